"""``xlviz sweep``: run every cell of a grid over any config settings as a normal transfer run.

``xlviz sweep --grid world.languages=svo,tr,sov --grid seed=0,1,2 --methods monotrans,floor --out SWEEP``
runs 9 cells into ``SWEEP/<cell>/`` through submitit; re-running the same command continues a
killed sweep. ``xlviz report SWEEP`` then gives means and intervals over seeds.
"""

from __future__ import annotations

import argparse

from xlviz.commands.transfer import add_transfer_options


def run(args: argparse.Namespace) -> int:
    from xlviz.commands.transfer import build_config
    from xlviz.errors import XlvizError
    from xlviz.io import read_json_object
    from xlviz.names import check_text
    from xlviz.transfer.sweep import make_cells, parse_grid, run_sweep

    if not args.out:
        raise XlvizError("give the sweep's folder with --out", field="--out")
    folder = check_text(args.out, field="--out")
    if isinstance(args.parallel, bool) or not isinstance(args.parallel, int) or args.parallel < 1:
        raise XlvizError(f"must be at least 1 (cells running at once), got {args.parallel!r}", field="--parallel")
    grid = parse_grid(args.grid, args.grid_file)
    base = read_json_object(args.config, what="transfer config") if args.config else None
    cells = make_cells(grid, args, base, build_config)
    slurm = {"partition": args.slurm_partition, "time": args.slurm_time, "cpus_per_task": args.slurm_cpus,
             "gpus_per_node": args.slurm_gpus}
    print(f"sweep folder: {folder} ({len(cells)} cells)", flush=True)
    states = run_sweep(folder, cells, grid, backend=args.backend, parallel=args.parallel, slurm=slurm)
    bad = {n: s for n, s in states.items() if s != "completed"}
    if bad:
        raise XlvizError(f"{len(bad)} of {len(states)} cells did not complete ({', '.join(f'{n}: {s}' for n, s in bad.items())}); "
                         "see their log.txt (a job that died before its run began: sweep/submitit/*.err), then re-run the same command "
                         "to continue", path=folder)
    from xlviz.transfer.sweep_report import sweep_table

    print(sweep_table(folder))
    return 0


def register(sub) -> None:
    p = sub.add_parser("sweep", help="run a grid of transfer runs (any setting x seeds) as one resumable sweep",
                       description=__doc__.splitlines()[0])
    p.add_argument("--grid", action="append", metavar="KEY=V1,V2,...",
                   help="a setting and its values, repeated for more settings (dotted keys: seed, world.languages, "
                        "pretrain_steps, world.preference, ...); world.languages values take --languages syntax, one L2 each")
    p.add_argument("--grid-file", dest="grid_file", help="JSON object: setting -> list of values (a value may hold commas or lists)")
    p.add_argument("--config", help="JSON file with transfer settings every cell starts from")
    p.add_argument("--backend", default="local", choices=["local", "debug", "slurm"],
                   help="submitit executor for the cells: local (each its own process here; default), debug (this process), "
                        "slurm (one Slurm job per cell)")
    p.add_argument("--parallel", type=int, default=1, help="cells running at once (default 1: each cell's stages already "
                                                          "use the cores, see --workers)")
    p.add_argument("--slurm-partition", dest="slurm_partition")
    p.add_argument("--slurm-time", dest="slurm_time", type=int, help="minutes per cell job (default 240)")
    p.add_argument("--slurm-cpus", dest="slurm_cpus", type=int, help="CPUs per cell job (default 4)")
    p.add_argument("--slurm-gpus", dest="slurm_gpus", type=int, help="GPUs per cell job (default 0)")
    add_transfer_options(p)
    p.set_defaults(handler=run)
