"""``xlviz report RUN [RUN ...]``: the results of finished runs as a table, every score with its
95% interval; several runs of the same systems (seeds) as mean ± standard deviation with
intervals over seeds; one table per setting (zero-shot, translate-train, translate-test).
``--compare A B``: A − B on the same questions per language, with interval and p-value.
``--slices``: EM/F1 per slice of the test questions (question word, answer type and role, ...),
stored in the run (:mod:`xlviz.transfer.slices`); ``--systems A,B`` adds A − B per slice."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="results of one run, or mean ± sd over several runs (seeds), as a table",
                       description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", metavar="RUN", help="run folders (results.json), or one sweep folder (xlviz sweep)")
    p.add_argument("--compare", nargs=2, metavar=("SYSTEM_A", "SYSTEM_B"),
                   help="paired difference A − B per language (interval and p-value; over seeds when several runs)")
    p.add_argument("--slices", action="store_true",
                   help="EM/F1 per slice of the test questions with paragraph intervals (one run; stored in it as "
                   "analyses/slices-*.json and .csv)")
    p.add_argument("--systems", help="with --slices: comma-separated systems (default: every one with saved predictions); "
                   "two systems: also their paired difference per slice")
    p.add_argument("--language", help="with --slices: comma-separated test languages (default: the run's L2s)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from xlviz.errors import XlvizError
    from xlviz.runs import Run
    from xlviz.transfer.report import check_score_rows, compare_table, results_table, seeds_table
    from xlviz.transfer.uncertainty import combined_intervals, compare_systems, fill_intervals

    from xlviz.transfer.sweep import Sweep

    if getattr(args, "slices", False):
        from xlviz.commands.slices import print_slices

        return print_slices(args)
    if len(args.runs) == 1 and Sweep(args.runs[0]).exists():  # a sweep folder: means and intervals over seeds
        from xlviz.transfer.sweep_report import setting_label, sweep_table

        if not getattr(args, "compare", None):
            print(sweep_table(args.runs[0]))
            return 0
        sweep = Sweep(args.runs[0])  # --compare: one paired table per grid cell, over its seeds
        groups: dict[str, list[tuple[Path, list[dict]]]] = {}
        for cell in sweep.cells():
            run = sweep.cell_run(cell)
            rows = run.results()
            if rows:
                groups.setdefault(setting_label(cell), []).append((run.path, check_score_rows(rows, run.results_path)))
        if not groups:
            raise XlvizError("no cell of the sweep has results yet", path=args.runs[0])
        for label, cells in groups.items():
            paths, rows = [p for p, _ in cells], [r for _, r in cells]
            print(f"cell: {label} ({len(paths)} seed{'s' if len(paths) > 1 else ''})\n")
            print(compare_table(compare_systems(paths, rows, *args.compare), *args.compare))
            print()
        return 0
    results, folders = [], []
    for folder in args.runs:
        r = Run(Path(folder))
        rows = r.results()
        if not rows:
            raise XlvizError("no results yet (the run has not scored any system)", path=r.results_path)
        results.append(check_score_rows(rows, r.results_path))
        folders.append(r.path)
    if getattr(args, "compare", None):
        print(compare_table(compare_systems(folders, results, *args.compare), *args.compare))
        return 0
    if len(results) == 1:
        print(results_table(fill_intervals(folders[0], results[0])))
    else:
        print(seeds_table(results, combined=combined_intervals(folders, results)))
    return 0
