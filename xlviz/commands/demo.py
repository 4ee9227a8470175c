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
    if pipeline.main:
        print()
        print(results_table(rows))
        print(f"\nfinished in {time.time() - t0:.0f} s; open the app with `xlviz app` to explore {run_dir}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("demo", help="run the offline bench of methods on the generated world",
                       description="Train MONOTRANS, its floor and dictionary oracle and jointpair-disjoint on the generated world "
                                   "(--methods all: every system) and print a system x language table.")
    add_transfer_options(p)
    p.set_defaults(handler=run)
