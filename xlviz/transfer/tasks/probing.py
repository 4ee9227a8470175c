"""Probing: Goldberg's masked-LM subject-verb agreement probe (:func:`xlviz.analysis.probing.
agreement_accuracy`) on the generated world's minimal pairs, for each system's masked LM in
every language it reads (the L1 reference too). Scored per system in ``s4_<system>``; result
fields ``agreement`` (percent of minimal pairs where the grammatical word scores higher; None
when no pair's two forms are single words of the vocabulary), ``agreement_pairs`` (how many were
scored) of ``agreement_total``; an encoder built on a degenerate stage is not scored
(``agreement`` None, ``agreement_verdict`` "degenerate" and ``agreement_degenerate_stages``). Opt-in (``--tasks qa,probing``); the Probing page
has the full grid (word in context, per category)."""

from __future__ import annotations

from xlviz.transfer.tasks import Task


class Probing(Task):
    def score(self, ctx, system: str) -> None:
        if not ctx.main:
            return
        from xlviz.analysis.probing import agreement_accuracy
        from xlviz.methods import method_of

        from xlviz.training.verdicts import DEGENERATE, degenerate_encoder_stages

        world, method = ctx.world, method_of(system)
        verdicts = ctx.run.verdicts()
        rows = []
        for lang in world.languages:
            encoder = method.encoder(ctx, system, lang)
            if encoder is None:
                continue
            bad = degenerate_encoder_stages(method.encoder_stages(ctx, system, lang), verdicts)
            if bad:  # built on a degenerate stage: no result (shown as such, never as a number)
                rows.append({"system": system, "language": lang, "agreement": None, "agreement_verdict": DEGENERATE,
                             "agreement_degenerate_stages": bad})
                ctx.log(f"  {system} {lang}: agreement not scored, DEGENERATE stage(s) {', '.join(bad)}")
                continue
            model, tok = encoder
            result = agreement_accuracy(model.eval(), tok, world.agreement_pairs(lang), max_length=ctx.cfg.qa_max_length)
            accuracy = None if result["accuracy"] is None else round(100 * result["accuracy"], 2)  # None: no pair scorable
            rows.append({"system": system, "language": lang, "agreement": accuracy, "agreement_pairs": result["n_scored"],
                         "agreement_total": result["n_total"]})
            ctx.log(f"  {system} {lang}: agreement {accuracy}% of {result['n_scored']} minimal pairs")
        ctx.add_task_rows(self.name, rows)


TASK = Probing("probing", "masked-LM subject-verb agreement on the world's minimal pairs (Goldberg's probe)",
               needs=frozenset({"l1_corpus", "l2_corpus"}), kinds=("world",), order=40, default=False)
