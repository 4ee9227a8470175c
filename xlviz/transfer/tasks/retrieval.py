"""Sentence retrieval per layer on the source's parallel pairs (Multi30k's task-1 validation
pairs, any line-aligned pair of files): each system's L1 encoder on the L1 side against its L2
encoder on the L2 side, in its own ``alignment`` stage once the encoders are trained.

``alignment.json`` holds the per-layer numbers; result rows ``{"system", "language",
"retrieval", "retrieval_layer", ...}`` (percent, like EM/F1): the layer is chosen on one
seeded half of the pairs and ``retrieval`` is measured on the other half
(``retrieval_selection_pairs``, ``retrieval_reported_pairs``): the best of several layers,
picked and reported on the same pairs, is biased upwards.
"""

from __future__ import annotations

from xlviz.errors import XlvizError
from xlviz.io import atomic_write_json
from xlviz.training.verdicts import degenerate_reason
from xlviz.transfer.tasks import Task, degenerate_mark


def retrieval_ranks(X, Y) -> tuple:
    """Rank (1 = nearest) of each row's translation among all rows of the other side, by
    cosine after centring, in both directions: (ranks X->Y, ranks Y->X). For top-k and MRR."""
    import numpy as np

    X = np.asarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64)
    X = X - X.mean(0)
    Y = Y - Y.mean(0)
    X /= np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1e-12)
    Y /= np.maximum(np.linalg.norm(Y, axis=1, keepdims=True), 1e-12)
    sims = X @ Y.T
    gold = np.diag(sims)

    def ranks(s):  # ties count half: the expected rank under random tie-breaking
        return 1 + (s > gold[:, None]).sum(1) + 0.5 * ((s == gold[:, None]).sum(1) - 1)

    return ranks(sims), ranks(sims.T)


def held_out_layer(emb_a, emb_b, seed: int) -> dict:
    """The retrieval layer chosen on one half of the pairs, its retrieval reported on the other.

    The halves come from a permutation seeded with ``seed``; retrieval (centred, mean of both
    directions) searches among the half's own pairs. Returns ``{"layer", "retrieval",
    "selection_pairs", "reported_pairs", "selection_per_layer", "reported_per_layer"}`` (fractions)."""
    import numpy as np

    from xlviz.analysis.alignment import layerwise_alignment

    A, B = np.asarray(emb_a), np.asarray(emb_b)
    n = A.shape[1]
    if n < 4:
        raise XlvizError(f"choosing the retrieval layer on held-out pairs needs at least 4 parallel pairs, got {n}", field="parallel")
    order = np.random.default_rng(seed).permutation(n)
    halves = np.sort(order[: n // 2]), np.sort(order[n // 2:])
    selection, reported = ([(r["retrieval_a_to_b"] + r["retrieval_b_to_a"]) / 2 for r in layerwise_alignment(A[:, h], B[:, h], center=True)]
                           for h in halves)
    layer = int(np.argmax(selection))
    return {"layer": layer, "retrieval": reported[layer], "selection_pairs": len(halves[0]), "reported_pairs": len(halves[1]),
            "selection_per_layer": selection, "reported_per_layer": reported}


class Retrieval(Task):
    """Retrieval on the source's own parallel pairs; subclasses read other pair sets
    (:meth:`pairs`) and prefix their result fields (``prefix``)."""

    prefix = ""

    def pairs(self, ctx) -> tuple[list[tuple[str, str]], list[str]]:
        """(the (L1, L2) sentence pairs, the files they come from)."""
        return ctx.data.parallel_pairs(), [str(p) for p in ctx.data.parallel_files()]

    def run(self, ctx) -> None:
        """Sentence retrieval per layer on the pairs for every system of the run."""
        if not ctx.main:
            return
        import numpy as np

        from xlviz.analysis.alignment import layerwise_alignment
        from xlviz.analysis.representations import sentence_embeddings
        from xlviz.methods import method_of

        cfg, data, p = ctx.cfg, ctx.data, self.prefix
        pairs, origin = self.pairs(ctx)
        src, tgt = [a for a, _ in pairs], [b for _, b in pairs]
        kw = dict(pooling=cfg.eval_pooling, max_length=cfg.eval_max_length, batch_size=64)
        out = {"l1": data.l1, "l2": data.l2, "n_pairs": len(pairs), "pooling": cfg.eval_pooling, "chance": 1 / len(pairs),
               "parallel": origin, "systems": {}, "layer_selection": {}}
        rows = []
        for system in ctx.cfg.systems:
            method = method_of(system)  # the system's L1 encoder on the L1 side, its L2 encoder on the L2 side
            mark = degenerate_mark(ctx, system, [data.l1, data.l2])  # encoders on a degenerate stage: no result
            l1, l1_tok = method.encoder(ctx, system, data.l1)
            emb_l1 = sentence_embeddings(l1, l1_tok, src, **kw)
            model, tok = method.encoder(ctx, system, data.l2)
            emb = sentence_embeddings(model, tok, tgt, **kw)
            centred = layerwise_alignment(emb_l1, emb, center=True)
            raw = layerwise_alignment(emb_l1, emb, center=False)
            layers = []
            for c, r in zip(centred, raw):
                ranks = retrieval_ranks(emb_l1[c["layer"]], emb[c["layer"]])
                layers.append({"layer": c["layer"], "l1_to_l2": c["retrieval_a_to_b"], "l2_to_l1": c["retrieval_b_to_a"],
                               "mean": (c["retrieval_a_to_b"] + c["retrieval_b_to_a"]) / 2, "cka": c["cka"],
                               "top10": float(sum((rk <= 10).mean() for rk in ranks) / 2),
                               "mrr": float(sum((1.0 / rk).mean() for rk in ranks) / 2),
                               "median_rank": float(sum(float(np.median(rk)) for rk in ranks) / 2),
                               "l1_to_l2_uncentred": r["retrieval_a_to_b"], "l2_to_l1_uncentred": r["retrieval_b_to_a"]})
            out["systems"][system] = layers
            best = held_out_layer(emb_l1, emb, seed=cfg.seed)
            out["layer_selection"][system] = best
            rows.append({"system": system, "language": data.l2, f"{p}retrieval": round(100 * best["retrieval"], 2),
                         f"{p}retrieval_layer": best["layer"], f"{p}retrieval_selection_pairs": best["selection_pairs"],
                         f"{p}retrieval_reported_pairs": best["reported_pairs"],
                         f"{p}retrieval_per_layer": [round(100 * x["mean"], 2) for x in layers],
                         f"{p}retrieval_top10_per_layer": [round(100 * x["top10"], 2) for x in layers],
                         **mark})
            ctx.log(f"  {system}: {self.name} (mean of both directions, centred) per layer "
                    + " ".join(f"{100 * x['mean']:.1f}" for x in layers) + f"; layer {best['layer']} chosen on "
                    + f"{best['selection_pairs']} pairs gives {100 * best['retrieval']:.1f} on the other {best['reported_pairs']}; "
                    + "top-10 " + " ".join(f"{100 * x['top10']:.1f}" for x in layers)
                    + (f"; DEGENERATE ({degenerate_reason(mark)}): not a result" if mark else ""))
        atomic_write_json(ctx.path(f"{self.stage}.json"), out)
        ctx.add_task_rows(self.name, rows)


TASK = Retrieval("retrieval", "sentence retrieval per layer on the source's parallel pairs (e.g. Multi30k val)",
                 needs=frozenset({"parallel"}), kinds=("corpus",), stage="alignment", order=20)
