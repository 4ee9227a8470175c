"""The registry of data sources: what one run trains and scores on.

A *source* (one module of this package defining ``SOURCE``, a :class:`Source`) says what it
offers (:data:`OFFERS`: monolingual corpora, parallel pairs, QA sets, a dictionary, gold
alignments) for its options (the run config's ``data``); every method declares what it needs
(:meth:`xlviz.methods.base.Method.needs`). The config refuses a system whose premise the source
cannot meet, in one line naming ``methods``, before anything trains. A pre-trained starting
model (``init_model``) offers ``l1_model`` with any source that supports one.

Sources registered at runtime (:func:`register`, e.g. by a test or a plug-in) are listed beside
the modules here, so the CLI, the validation and the Runs form find them without naming them.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Iterable, Protocol

from xlviz.errors import XlvizError, shown_keys

# What a source may offer, and what a method may need.
OFFERS = {
    "l1_corpus": "monolingual L1 text to learn a vocabulary and pre-train on",
    "l2_corpus": "monolingual L2 text (never translations of the L1 text)",
    "l1_model": "an L1 masked LM: pre-trained here on l1_corpus, or the run's init_model",
    "parallel": "line-aligned L1-L2 pairs to score on (sentence retrieval, word translation)",
    "parallel_train": "line-aligned L1-L2 pairs to train on (the methods that declare them), apart from the scored ones",
    "qa_train": "L1 question answering training data (SQuAD format)",
    "qa_test": "QA test sets (L1 and L2)",
    "qa_train_l2": "the L1 QA training set rendered in an L2 (translate-train)",
    "qa_test_translation": "the gold L1 translation of each L2 test context (translate-test)",
    "dictionary": "a bilingual dictionary",
    "gold_alignments": "gold word alignments of parallel pairs",
}
KINDS = ("world", "corpus")  # what the stages of a method are written for


@dataclass
class Source:
    """A data source. ``kind`` says which stage implementations read it ("world": the generated
    world's in-memory data; "corpus": text files streamed line by line); ``options_class`` is
    the dataclass of its options (None: none); ``defaults`` are run settings (``TransferConfig``
    fields) this source sizes differently from the world, applied when a config does not give them."""

    name: str
    description: str
    kind: str = "corpus"
    options_class: type | None = None
    defaults: dict[str, Any] = field(default_factory=dict)
    pretrained: bool = True  # whether init_model (a pre-trained step 1) is supported with this source
    order: int = 50

    def options(self, data: dict | None, *, path: str | None = None) -> Any:
        """The validated options object for a config's ``data`` (unknown keys refused)."""
        data = dict(data or {})
        if self.options_class is None:
            if data:
                raise XlvizError(f"the {self.name} source takes no data options, got {shown_keys(sorted(data))}", path=path, field="data")
            return None
        known = {f.name for f in fields(self.options_class)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise XlvizError(f"unknown data option(s) {shown_keys(unknown)} for the {self.name} source; known: {sorted(known)}",
                             path=path, field=f"data.{unknown[0]}")
        opts = self.options_class(**data)
        check = getattr(opts, "validate", None)
        if check is not None:
            check(path=path)
        return opts

    def offers(self, options: Any, init_model: str | None = None) -> frozenset[str]:
        """What this source gives a run with these options (and a pre-trained starting model)."""
        out = set(self._offers(options))
        if "l1_corpus" in out or init_model:
            out.add("l1_model")
        return frozenset(out)

    def _offers(self, options: Any) -> set[str]:
        return set(getattr(options, "offers", lambda: set())()) if options is not None else set()

    def languages(self, options: Any) -> tuple[str, str] | None:
        """(L1, L2) of a corpus source's run; None for the world (its config lists them)."""
        if options is None or not hasattr(options, "l1"):
            return None
        return options.l1, options.l2


class RunData(Protocol):
    """What a method's stages read of the run's data, the same way on every source (``ctx.data``):
    the generated world's wrapper (:class:`xlviz.data.sources.world.WorldData`) or a corpus
    source's files streamed line by line (:class:`xlviz.data.sources.files.CorpusData`).
    Resources only some sources offer (:data:`OFFERS`: QA sets, a gold dictionary) are read
    through it too; a method that needs them declares it (:meth:`xlviz.methods.base.Method.needs`),
    so the config refuses it on a source without them before anything trains."""

    kind: str  # the source's kind (KINDS): what the few stages whose premise differs read

    @property
    def l1(self) -> str: ...

    @property
    def l2s(self) -> list[str]: ...

    @property
    def lowercase(self) -> bool: ...  # whether the run's vocabularies lowercase

    @property
    def tokenizer_lines(self) -> int | None: ...  # lines a vocabulary is learned on at most (None: the whole corpus)

    def corpus(self, lang: str) -> Callable[[], Iterable[str]]: ...  # a fresh pass over lang's training text
    def sample(self, lang: str, lines: int | None) -> list[str]: ...  # the lines a vocabulary is learned on
    def positions(self, cfg: Any) -> int: ...  # positions every model of the run needs
    def parallel_train(self, l2: str, n: int) -> list[dict]: ...  # parallel training pairs {id, src, tgt}
    def qa(self, split: str, lang: str | None = None) -> dict: ...  # a SQuAD-format QA set
    def dictionary(self, l2: str) -> list[dict]: ...  # the gold bilingual dictionary's rows


_SOURCES: dict[str, Source] | None = None
_EXTRA: dict[str, Source] = {}


def sources() -> dict[str, Source]:
    """Every source by name: this package's modules, then those registered at runtime."""
    global _SOURCES
    if _SOURCES is None:
        found: dict[str, Source] = {}
        for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
            module = importlib.import_module(f"{__name__}.{info.name}")
            source = getattr(module, "SOURCE", None)
            if isinstance(source, Source):
                found[source.name] = source
        _SOURCES = found
    merged = {**_SOURCES, **_EXTRA}
    return dict(sorted(merged.items(), key=lambda kv: (kv[1].order, kv[0])))


def register(source: Source) -> Source:
    """Add a source at runtime (a plug-in, a test); the CLI, validation and Runs form list it."""
    if source.kind not in KINDS:
        raise XlvizError(f"a source's kind is one of {list(KINDS)}, got {source.kind!r}", field="source")
    _EXTRA[source.name] = source
    return source


def unregister(name: str) -> None:
    """Remove a source added by :func:`register` (tests clean up with it)."""
    _EXTRA.pop(name, None)


def source_of(name: str) -> Source:
    table = sources()
    if not isinstance(name, str) or name not in table:
        raise XlvizError(f"unknown data source {name!r}; choose from {list(table)}", field="source")
    return table[name]


__all__ = ["OFFERS", "KINDS", "Source", "RunData", "sources", "source_of", "register", "unregister"]
