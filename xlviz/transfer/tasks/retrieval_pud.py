"""Sentence retrieval per layer on the Parallel Universal Dependencies treebanks
(``<shared data>/pud``, 1,000 sentences translated into each language, aligned by sentence id):
the run's L1 against its L2; result fields ``pud_retrieval*``, per-layer numbers in
``alignment-pud.json``. Opt-in (``--tasks``): both languages must have a PUD file."""

from __future__ import annotations

from xlviz.transfer.tasks.retrieval import Retrieval


class PudRetrieval(Retrieval):
    prefix = "pud_"

    def pairs(self, ctx):
        from xlviz.data.real import read_pud_pairs

        pairs = read_pud_pairs(None, ctx.data.l1, ctx.data.l2, limit=ctx.data.o.parallel_max)
        return [(a.text, b.text) for _, a, b in pairs], [f"pud:{ctx.data.l1}-{ctx.data.l2}"]


TASK = PudRetrieval("retrieval-pud", "sentence retrieval per layer on PUD (parallel treebank sentences, shared data)",
                    needs=frozenset({"l1_model", "l2_corpus"}), kinds=("corpus",), stage="alignment-pud", order=22, default=False)
