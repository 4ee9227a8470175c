"""Sentence retrieval per layer on Tatoeba (``<shared data>/tatoeba``, xx-eng pairs, as
XTREME's Tatoeba task): English as L1, the run's L2 on the other side; result fields
``tatoeba_retrieval*``, per-layer numbers in ``alignment-tatoeba.json``. Opt-in (``--tasks``):
it needs English as L1 and the L2 among Tatoeba's languages."""

from __future__ import annotations

from xlviz.errors import XlvizError
from xlviz.transfer.tasks.retrieval import Retrieval


class TatoebaRetrieval(Retrieval):
    prefix = "tatoeba_"

    def pairs(self, ctx):
        from xlviz.data.real import read_tatoeba

        if ctx.data.l1 != "en":
            raise XlvizError(f"Tatoeba pairs every language with English; the run's L1 is {ctx.data.l1!r}", field="tasks")
        pairs = read_tatoeba(None, ctx.data.l2)[: ctx.data.o.parallel_max]
        return [(en, xx) for xx, en in pairs], [f"tatoeba:{ctx.data.l2}-eng"]


TASK = TatoebaRetrieval("retrieval-tatoeba", "sentence retrieval per layer on Tatoeba (xx-eng pairs, shared data)",
                        needs=frozenset({"l1_model", "l2_corpus"}), kinds=("corpus",), stage="alignment-tatoeba", order=21,
                        default=False)
