"""``xlviz report RUN [RUN ...]``: the results of finished runs as a table; several runs of the
same systems (seeds) as mean ± standard deviation, zero-shot and translate-train apart."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="results of one run, or mean ± sd over several runs (seeds), as a table",
                       description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", metavar="RUN", help="run folders (results.json)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from xlviz.errors import XlvizError
    from xlviz.runs import Run
    from xlviz.transfer.report import check_score_rows, results_table, seeds_table

    results = []
    for folder in args.runs:
        r = Run(Path(folder))
        rows = r.results()
        if not rows:
            raise XlvizError("no results yet (the run has not scored any system)", path=r.results_path)
        results.append(check_score_rows(rows, r.results_path))
    print(results_table(results[0]) if len(results) == 1 else seeds_table(results))
    return 0
