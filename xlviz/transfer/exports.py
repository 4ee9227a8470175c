"""A system's encoders exported for the analysis pages, in its scoring stage: one masked LM per
language it reads (and a pair model's own L1 side), recorded in the run's manifest with the
stages its weights come from, and the Alignment page's stored encodings of them. On the world
the QA task exports them beside each language's QA model (:mod:`xlviz.transfer.tasks.qa`); on a
corpus source the scoring stage exports them whichever tasks the run scores."""

from __future__ import annotations

from pathlib import Path

from xlviz.errors import XlvizError
from xlviz.methods import method_of
from xlviz.methods.common import run_l1, run_l2s, run_languages


def export_encoder(ctx, system: str, lang: str, encoders: dict[str, Path], pair_l1: dict[str, Path]) -> None:
    """Save ``system``'s encoder of ``lang`` (and, for an L2 after the first, a pair model's
    own L1 side) and record it with the stages its weights come from; adds the folders
    written to ``encoders`` (by language) and ``pair_l1`` (by L2). What the Alignment and
    Probing pages and the CLI analyses read (:meth:`xlviz.analysis.reports.RunInfo.system_encoders`)."""
    method = method_of(system)
    l1, l2s = run_l1(ctx), run_l2s(ctx)
    encoder = method.encoder(ctx, system, lang)
    if encoder is not None:
        encoders[lang] = ctx.save_artefact(encoder[0], encoder[1], "encoder", system, lang,
                                           role="l1-encoder" if lang == l1 else "l2-encoder",
                                           depends_on=method.encoder_stages(ctx, system, lang))
    if lang != l1 and lang != l2s[0]:  # the first pair's L1 is the system's L1 encoder
        pair = method.pair_l1_encoder(ctx, system, lang)
        if pair is not None:
            pair_l1[lang] = ctx.save_artefact(pair[0], pair[1], "encoder", system, l1, pair=lang, role="l1-encoder",
                                              depends_on=method.encoder_stages(ctx, system, l1, pair=lang))


def export_encoders(ctx, system: str) -> None:
    """A corpus run's encoders of ``system``, one per language (its scoring stage)."""
    if not ctx.main:
        return
    encoders: dict[str, Path] = {}
    for lang in run_languages(ctx):
        export_encoder(ctx, system, lang, encoders, {})
    ctx.log(f"  {system}: encoders of {', '.join(encoders)} exported for the Alignment and Probing pages")


def store_encodings(ctx, system: str, encoders: dict[str, Path], pair_l1: dict[str, Path]) -> None:
    """Store the Alignment page's encodings of the system's encoders just exported, for each
    L2 (:mod:`xlviz.analysis.encodings`): the page then reads them instead of loading the
    models. Which encoder reads which side is what the page pairs up
    (:meth:`xlviz.analysis.reports.RunInfo.system_encoders`). Systems sharing an encoder
    share its file, recorded without a system or stage (stages at once may both write it;
    the manifest reads the same either way). They save the page time and nothing else, so a
    failure is logged and the run goes on (``xlviz analyse encodings`` writes them later)."""
    from xlviz.analysis.encodings import write_encodings
    from xlviz.analysis.reports import System
    from xlviz.models.reference import ModelSpec

    l1 = ctx.world.l1

    def record(entries: list[dict]) -> None:
        for e in entries:
            e = dict(e)
            ctx.record_artefact(e.pop("kind"), ctx.run.path / e.pop("path"), shared=True, **e)

    for l2 in ctx.world.l2s:
        a, b = pair_l1.get(l2, encoders.get(l1)), encoders.get(l2)
        if a is None or b is None:
            continue
        try:
            write_encodings(ctx.run.path, l2, [System(system, l1, l2, ModelSpec(str(a)), ModelSpec(str(b)))], record,
                            log=ctx.log)
        except XlvizError as e:
            ctx.log(f"  {system} {l2}: no encodings stored for the Alignment page ({e})")


__all__ = ["export_encoder", "export_encoders", "store_encodings"]
