"""The generated bilingual world (:mod:`xlviz.data.world`): every resource a method may need,
in every language of the run's ``world`` config: corpora, parallel pairs, QA training and test
sets (and their translations), a dictionary and gold alignments."""

from __future__ import annotations

from xlviz.data.sources import OFFERS, Source


class WorldSource(Source):
    def _offers(self, options) -> set[str]:
        return set(OFFERS)


SOURCE = WorldSource(
    name="world", kind="world", order=0, options_class=None, pretrained=False,
    description="the generated world: corpora, parallel pairs, QA sets, dictionary and gold alignments in every language",
)
