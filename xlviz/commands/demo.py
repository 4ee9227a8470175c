"""``xlviz demo``: the whole offline pipeline on the generated world, ending with a table."""

from __future__ import annotations

import argparse

from xlviz.commands.transfer import add_transfer_options, build_config


def run(args: argparse.Namespace) -> int:
    import time

    from xlviz.runs import checkpoints_root, new_run_path
    from xlviz.transfer.pipeline import Pipeline
    from xlviz.transfer.config import DEMO_METHODS
    from xlviz.transfer.report import results_table

    base = {"name": "demo", "methods": list(DEMO_METHODS), "workers": 0}
    if args.variants:  # --variants all: the demo's systems plus MONOTRANS's former variants
        from xlviz.transfer.config import parse_variants

        base["methods"] = list(dict.fromkeys(DEMO_METHODS + parse_variants(args.variants)))
        args.variants = None
    cfg = build_config(args, base)
    run_dir = new_run_path(checkpoints_root(args.out), cfg.name)
    t0 = time.time()
    pipeline = Pipeline(cfg, run_dir)
    if pipeline.main:
        precision = str(pipeline.acc.mixed_precision).replace("no", "float32")
        print(f"xlviz demo: transfer methods on the generated world ({', '.join(cfg.systems)}) on {pipeline.acc.device}, {precision}; "
              f"run folder {run_dir}", flush=True)
    with pipeline.run.writer_lock(main=pipeline.main):
        rows = pipeline.run_all()
        probing = _store_probing(pipeline.run) if pipeline.main else ""
    if pipeline.main:
        print()
        print(results_table(rows))
        print(probing)
        print(f"\nfinished in {time.time() - t0:.0f} s; open the app with `xlviz app` to explore {run_dir}")
    return 0


def _store_probing(run) -> str:
    """Store the Probing page's first view of the finished run (``xlviz analyse agreement RUN``,
    under the lock the demo holds), so the page opens without loading every model; only
    ``analyses/`` files and their manifest entries are added. A line saying so."""
    import time

    from xlviz.commands.analyse import store_probing
    from xlviz.errors import XlvizError

    t0 = time.perf_counter()
    try:
        rows, how, stored = store_probing(run, locked=True)
    except (XlvizError, OSError) as e:  # the run is finished and scored: say so, do not fail the demo
        how, stored = str(e), False
    if not stored:
        return f"probing results not stored ({how}); `xlviz analyse agreement {run.path}` stores them"
    return f"probing results (agreement, {len(rows)} rows) stored for the Probing page in {time.perf_counter() - t0:.0f} s"


def register(sub) -> None:
    p = sub.add_parser("demo", help="run the offline bench of methods on the generated world",
                       description="Train MONOTRANS, its floor and dictionary oracle and jointpair-disjoint on the generated world "
                                   "(--methods all: every system) and print a system x language table.")
    add_transfer_options(p)
    p.set_defaults(handler=run)
