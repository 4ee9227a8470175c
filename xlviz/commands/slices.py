"""``xlviz report --slices RUN``: the run's metrics by slice, stored in the run and printed.

Why a module of its own: ``report`` prints results rows; the slice table is read from (or
written to) the run's ``analyses/`` through its writer lock, which the results table never takes.
"""

from __future__ import annotations

import argparse
import time


def _languages(run, asked: str | None) -> list[str]:
    if asked:
        return [s.strip() for s in asked.split(",") if s.strip()]
    from xlviz.runs import artefacts

    cfg_langs = run.config().get("languages") or []
    have = {a.language for a in artefacts(run, "predictions")}
    return [l for l in cfg_langs if isinstance(l, str) and l in have] or sorted(l for l in have if l and l != "en")


def print_slices(args: argparse.Namespace) -> int:
    from pathlib import Path

    from xlviz.errors import XlvizError
    from xlviz.evaluation.slices import format_slices
    from xlviz.runs import Run, record_artefacts
    from xlviz.transfer import slices

    if len(args.runs) != 1:
        raise XlvizError("--slices reads one run folder", field="--slices")
    run = Run(Path(args.runs[0]).expanduser())
    if not run.exists():
        raise XlvizError("not a run folder (no config.json)", path=run.path)
    systems = [s.strip() for s in args.systems.split(",") if s.strip()] if args.systems else None
    pair = (systems[0], systems[1]) if systems and len(systems) == 2 else None
    for lang in _languages(run, args.language):
        t0 = time.perf_counter()
        request, _ = slices.slice_request(run.path, lang, systems, pair)
        report = slices.find(run.path, request)
        how = "read from"
        if report is None:
            report = slices.compute(run.path, lang, systems, pair)
            try:
                with run.writer_lock():  # the run's only writer meanwhile (its manifest)
                    slices.write(run, report, lambda entries: record_artefacts(run, entries))
                how = "written to"
            except XlvizError as e:  # the run is being written (or read-only): show, store nothing
                how = f"not stored ({e})"
        print(f"{lang}: metrics by slice ({'the world generator' if report.source == 'world' else 'the text'}'s slices; "
              "EM / F1 %, [F1 95% paragraph bootstrap], one seed)")
        print(format_slices(report.rows, report.differences))
        where = f" {report.stored}" if report.stored is not None and not how.startswith("not") else ""
        print(f"{how}{where} ({time.perf_counter() - t0:.1f} s)\n")
    return 0
