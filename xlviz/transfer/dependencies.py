"""Record which stages each model of an older run comes from (``depends_on`` in its manifest).

Why: the probes judge an encoder by the verdicts of the stages its weights come from, which
a run records as it writes each model. A run written before that judges every encoder against
every stage of the run, so one degenerate body refuses all of them. This rebuilds the run's
plan from its ``config.json`` (nothing trains, nothing is read but the config and the
manifest) and records, for each stage folder, export and encoder, the stages the run would
have recorded: a stage, itself after every stage it waits for; an encoder,
:meth:`xlviz.methods.base.Method.encoder_stages`; an export, ``row_stages``.
"""

from __future__ import annotations

import os
from pathlib import Path

from xlviz.errors import XlvizError
from xlviz.runs import Run, artefacts, record_artefacts


def record_dependencies(run_dir: str | os.PathLike) -> list[str]:
    """Add ``depends_on`` to every model entry of ``run_dir``'s manifest that lacks it, as the
    run's only writer (refused while it runs). Returns the paths of the entries completed."""
    from xlviz.methods import method_of
    from xlviz.transfer.pipeline import Pipeline

    run = Run(Path(run_dir).expanduser())
    if not run.exists():
        raise XlvizError("not a run folder (no config.json)", path=run.path)
    with run.writer_lock():
        pipeline = Pipeline.resume(run.path)
        plan = set(pipeline.plan())
        entries = []
        for a in artefacts(run):
            if a.depends_on is not None:
                continue
            if a.kind == "stage" and a.path in plan:  # a stage folder's path is its stage's name
                deps = pipeline.stage_dependencies(a.path)
            elif a.kind == "encoder" and a.system and a.language:
                deps = method_of(a.system).encoder_stages(pipeline, a.system, a.language, a.pair)
            elif a.kind == "export" and a.system and a.language:
                deps = method_of(a.system).row_stages(pipeline, a.system, a.language)
            else:
                continue
            entries.append({**a.to_dict(), "depends_on": list(deps)})
        if entries:
            record_artefacts(run, entries)
    return [e["path"] for e in entries]
