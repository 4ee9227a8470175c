"""A run's parallel pairs: the generated world's (words, gold alignment, dictionary) or the
pairs a corpus run saved (``world/parallel/<l1>-<l2>.jsonl``)."""

from __future__ import annotations

from xlviz.analysis.parallel import ParallelData, ParallelSource, Request
from xlviz.errors import XlvizError


def read(r: Request) -> ParallelData:
    from xlviz.analysis.reports import run_pairs

    if r.run_dir is None:
        raise XlvizError("the run's parallel pairs need --run DIR", field="run")
    return run_pairs(r.run_dir, r.lang_b or "", r.limit)


SOURCE = ParallelSource("world", "Run's parallel pairs", "a run's parallel pairs (the generated world's, with gold "
                        "word alignment and dictionary, or those a corpus run saved)", read, takes="run", order=10)
