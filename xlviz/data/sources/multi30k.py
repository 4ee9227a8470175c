"""Multi30k (en-de) from the shared data folder: the task-2 captions as two independent
monolingual corpora (comparable descriptions of the same images, never translations), the
task-1 validation pairs (1,014) as the parallel evaluation set, and the task-1 training pairs
(29,000) to induce a bilingual dictionary from (word translation, :mod:`xlviz.data.dictionary`).

    xlviz transfer --source multi30k --systems monotrans,floor

Its options are the files source's with these files as defaults; any of them can be changed
(``--l1-corpus``, ``--parallel``, ...).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xlviz.data.sources import Source
from xlviz.data.sources.files import CORPUS_DEFAULTS, CorpusOptions


@dataclass
class Multi30kOptions(CorpusOptions):
    l1: str = "en"
    l2: str = "de"
    l1_corpus: list[str] = field(default_factory=lambda: ["shared:multi30k/task2/train.*.en.gz"])
    l2_corpus: list[str] = field(default_factory=lambda: ["shared:multi30k/task2/train.*.de.gz"])
    parallel: list[str] | None = field(default_factory=lambda: ["shared:multi30k/task1/val.en.gz", "shared:multi30k/task1/val.de.gz"])
    parallel_train: list[str] | None = field(default_factory=lambda: ["shared:multi30k/task1/train.en.gz", "shared:multi30k/task1/train.de.gz"])
    parallel_max: int = 1014
    tokenizer_lines: int = 145_000


SOURCE = Source(
    name="multi30k", kind="corpus", order=20, options_class=Multi30kOptions, defaults=CORPUS_DEFAULTS,
    description="Multi30k en-de (shared data): task-2 captions as monolingual corpora, task-1 validation pairs for retrieval, a dictionary induced from the task-1 training pairs",
)
