"""The generated bilingual world (:mod:`xlviz.data.world`): every resource a method may need,
in every language of the run's ``world`` config: corpora, parallel pairs, QA training and test
sets (and their translations), a dictionary and gold alignments."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from xlviz.data.sources import OFFERS, Source

if TYPE_CHECKING:
    from xlviz.data.world import World


class WorldSource(Source):
    def _offers(self, options) -> set[str]:
        return set(OFFERS)


class WorldData:
    """The generated world as the run's data (:class:`xlviz.data.sources.RunData`): every
    resource held in memory, the whole corpus read on every pass."""

    kind = "world"

    def __init__(self, world: World):
        self.world = world

    @property
    def l1(self) -> str:
        return self.world.l1

    @property
    def l2s(self) -> list[str]:
        return list(self.world.l2s)

    @property
    def lowercase(self) -> bool:
        return True

    @property
    def tokenizer_lines(self) -> int | None:
        return None  # the world's vocabularies are learned on its whole (small) corpus

    def corpus(self, lang: str) -> Callable[[], list[str]]:
        corpus = self.world.corpus(lang)
        return lambda: corpus

    def sample(self, lang: str, lines: int | None) -> list[str]:
        return self.world.corpus(lang)

    def positions(self, cfg: Any) -> int:
        """MLM blocks and QA windows."""
        return max(cfg.block_size, cfg.qa_max_length)

    def parallel_train(self, l2: str, n: int) -> list[dict]:
        return self.world.parallel_train(l2, n)

    def qa(self, split: str, lang: str | None = None) -> dict:
        return self.world.qa(split) if lang is None else self.world.qa(split, lang)

    def dictionary(self, l2: str) -> list[dict]:
        return self.world.dictionary(l2)


SOURCE = WorldSource(
    name="world", kind="world", order=0, options_class=None, pretrained=False,
    description="the generated world: corpora, parallel pairs, QA sets, dictionary and gold alignments in every language",
)
