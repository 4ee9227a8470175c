"""``xlviz report RUN [RUN ...]``: the results of finished runs as a table, every score with its
95% interval; several runs of the same systems (seeds) as mean ± standard deviation with
intervals over seeds; one table per setting (zero-shot, translate-train, translate-test).
``--compare A B``: A − B on the same questions per language, with interval, raw and Holm-adjusted
p-values, the verdict (seeds are the unit: 3 or more needed) and the seeds a difference needs.
``--slices``: EM/F1 per slice of the test questions (question word, answer type and role, ...),
stored in the run (:mod:`xlviz.transfer.slices`); ``--systems A,B`` adds A − B per slice.

What is averaged is checked first (:mod:`xlviz.transfer.report_inputs`): several runs must be
distinct folders of one configuration that differ only in the seed (``--allow-different-settings``
shows runs of other settings together, listing what differs under the table); every score is
a percentage with EM at most F1; a row's verdict comes from its run's ``verdicts.json``; and
pairs in which a system's row is degenerate are left out of ``--compare``."""

from __future__ import annotations

import argparse
from pathlib import Path

from xlviz.errors import XlvizError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="results of one run, or mean ± sd over several runs (seeds), as a table",
                       description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("runs", nargs="+", metavar="RUN", help="run folders (results.json), or one sweep folder (xlviz sweep)")
    p.add_argument("--compare", nargs=2, metavar=("SYSTEM_A", "SYSTEM_B"),
                   help="paired difference A − B per language (interval and p-value; over seeds when several runs)")
    p.add_argument("--allow-different-settings", dest="allow_different_settings", action="store_true",
                   help="show runs whose settings differ in more than the seed together, the differences listed under "
                        "the table (default: refused, since seeds are runs of one configuration)")
    p.add_argument("--slices", action="store_true",
                   help="EM/F1 per slice of the test questions with paragraph intervals (one run; stored in it as "
                   "analyses/slices-*.json and .csv)")
    p.add_argument("--systems", help="with --slices: comma-separated systems (default: every one with saved predictions); "
                   "two systems: also their paired difference per slice")
    p.add_argument("--language", help="with --slices: comma-separated test languages (default: the run's L2s)")
    p.set_defaults(handler=run)


def check_sweep_cells(sweep) -> None:
    """The sweep table reads its cells' rows itself: refuse a cell whose scores are not
    percentages or whose row verdicts disagree with its verdicts.json (a degenerate row edited
    to "ok" would be averaged as a result), naming the file and row."""
    from xlviz.training.verdicts import is_degenerate
    from xlviz.transfer.report_inputs import checked_results

    for cell in sweep.cells():
        cell_run = sweep.cell_run(cell)
        rows = cell_run.results()
        if not rows:
            continue
        for i, (raw, checked) in enumerate(zip(rows, checked_results(cell_run))):
            if is_degenerate(checked) and not is_degenerate(raw):
                raise XlvizError(f"row {i} ({raw['system']} {raw['language']}) says {raw.get('verdict')!r} but depends on "
                                 f"degenerate stage(s) {', '.join(checked['degenerate_stages'])} (verdicts.json): it is no "
                                 "result", path=cell_run.results_path, field=f"[{i}].verdict")


def run(args: argparse.Namespace) -> int:
    from xlviz.runs import Run
    from xlviz.transfer.report import compare_table, resources_line, resources_table, results_table, seeds_table
    from xlviz.transfer.report_inputs import check_seed_runs, checked_results
    from xlviz.transfer.sweep import Sweep
    from xlviz.transfer.uncertainty import combined_intervals, compare_systems, family, fill_intervals

    if getattr(args, "slices", False):
        from xlviz.commands.slices import print_slices

        return print_slices(args)
    if len(args.runs) == 1 and Sweep(args.runs[0]).exists():  # a sweep folder: means and intervals over seeds
        from xlviz.transfer.sweep import setting_label
        from xlviz.transfer.sweep_report import sweep_table

        if not getattr(args, "compare", None):
            check_sweep_cells(Sweep(args.runs[0]))
            print(sweep_table(args.runs[0]))
            cells = [Sweep(args.runs[0]).cell_run(cell).results() for cell in Sweep(args.runs[0]).cells()]
            if any(cells):
                print()
                print(resources_table([rows for rows in cells if rows]))
            return 0
        sweep = Sweep(args.runs[0])  # --compare: one paired table per grid cell, over its seeds
        groups: dict[str, list[tuple[Path, list[dict]]]] = {}
        for cell in sweep.cells():
            cell_run = sweep.cell_run(cell)
            if cell_run.results():
                groups.setdefault(setting_label(cell), []).append((cell_run.path, checked_results(cell_run)))
        if not groups:
            raise XlvizError("no cell of the sweep has results yet", path=args.runs[0])
        # every cell's languages and metrics are one family: Holm over all of them
        tables = []
        for label, cells in groups.items():
            paths, rows = [p for p, _ in cells], [r for _, r in cells]
            tables.append((label, len(paths), compare_systems(paths, rows, *args.compare, adjust=False), rows))
        everything = family([r for _, _, rows, _ in tables for r in rows])
        adjusted = iter(everything)
        for label, n, rows, results in tables:
            print(f"cell: {label} ({n} seed{'s' if n > 1 else ''})\n")
            print(compare_table([next(adjusted) for _ in rows], *args.compare, family_size=len(everything)))
            print(resources_line(results, *args.compare))
            print()
        return 0
    runs = [Run(Path(folder)) for folder in args.runs]
    labels = check_seed_runs(runs, allow_different=getattr(args, "allow_different_settings", False))
    results = [checked_results(r) for r in runs]
    folders = [r.path for r in runs]
    if getattr(args, "compare", None):
        print(compare_table(compare_systems(folders, results, *args.compare), *args.compare))
        print(resources_line(results, *args.compare))
    elif len(results) == 1:
        print(results_table(fill_intervals(folders[0], results[0])))
    else:
        print(seeds_table(results, combined=combined_intervals(folders, results)))
        print()
        print(resources_table(results))
    if labels:
        print("\nNot seeds of one configuration (--allow-different-settings):")
        for line in labels:
            print(f"- {line}")
    return 0
