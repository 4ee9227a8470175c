"""Word translation (bilingual lexicon induction) against the source's dictionary, per layer:
each system's L1 and L2 encoders read the parallel pairs, contextual vectors are averaged per
word type, and each L1 word's nearest L2 word type (cosine) must be one of its gold
translations (:func:`xlviz.analysis.alignment.word_translation_accuracy`; both directions,
averaged). Scored per system in ``s4_<system>`` on the generated world (its gold dictionary and
word-segmented pairs); result fields ``word_translation_per_layer`` (percent) and
``word_translation_words``. Opt-in (``--tasks qa,word-translation``)."""

from __future__ import annotations

from xlviz.transfer.tasks import Task


class WordTranslation(Task):
    def score(self, ctx, system: str) -> None:
        if not ctx.main:
            return
        from xlviz.analysis.reports import ParallelData, system_alignment
        from xlviz.methods import method_of

        world, method = ctx.world, method_of(system)
        rows = []
        for l2 in world.l2s:
            b = method.encoder(ctx, system, l2)
            a = (method.pair_l1_encoder(ctx, system, l2) if l2 != world.l2s[0] else None) or method.encoder(ctx, system, world.l1)
            if a is None or b is None:
                continue
            pairs = world.parallel_pairs(l2, n=world.config.parallel_pairs)
            data = ParallelData(world.l1, l2, [p["src"] for p in pairs], [p["tgt"] for p in pairs], [p["id"] for p in pairs],
                                f"generated world ({world.l1}-{l2})", [p["src_words"] for p in pairs], [p["tgt_words"] for p in pairs],
                                [[tuple(x) for x in p["alignment"]] for p in pairs],
                                [(r[world.l1], r[l2]) for r in world.dictionary(l2)])
            layers = system_alignment(a[0].eval(), a[1], b[0].eval(), b[1], data, pooling="mean", words=True,
                                      max_length=ctx.cfg.qa_max_length, seed=ctx.cfg.seed)
            per_layer = [None if r.get("word_translation_a_to_b") is None
                         else round(100 * (r["word_translation_a_to_b"] + r["word_translation_b_to_a"]) / 2, 2) for r in layers]
            rows.append({"system": system, "language": l2, "word_translation_per_layer": per_layer,
                         "word_translation_words": layers[0].get("n_words")})
            ctx.log(f"  {system} {l2}: word translation per layer " + " ".join("-" if x is None else f"{x:.1f}" for x in per_layer))
        ctx.add_task_rows(self.name, rows)


TASK = WordTranslation("word-translation", "word translation per layer against the source's dictionary (nearest word type)",
                       needs=frozenset({"dictionary", "parallel"}), kinds=("world",), order=30, default=False)
