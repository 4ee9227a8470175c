"""A fake finished sweep for the Sweeps page's tests and its browser check: ``sweep.json``
written by :class:`xlviz.transfer.sweep.Sweep` from a real grid (world.languages=sov,tr x
seed=0,1, the CLI's cell configs), each cell a run folder from tests/app_fixtures.py with
results that differ by seed. The first cell has tiny models (it opens in XQuAD, Attention,
Alignment and Probing). Builds in a few seconds; nothing is trained."""

from __future__ import annotations

import argparse
from pathlib import Path

from xlviz.runs import Run

GRID = ["world.languages=sov,tr", "seed=0,1"]
SYSTEMS = ("monotrans", "floor")


def f1_of(system: str, lang: str, seed: int) -> float:
    """The fake F1 of a cell's row: English 50 (+ seed), monotrans keeps 60% in sov and 40%
    in tr, the floor 20%."""
    en = 50.0 + seed
    if lang == "en":
        return en
    keep = {"monotrans": {"sov": 0.6, "tr": 0.4}, "floor": {"sov": 0.2, "tr": 0.2}}[system][lang]
    return en * keep + seed


def make_sweep(root: str | Path, name: str = "tiny-sweep") -> Path:
    from tests.app_fixtures import make_run
    from xlviz.commands.transfer import build_config
    from xlviz.transfer.sweep import Sweep, make_cells, parse_grid

    folder = Path(root) / name
    grid = parse_grid(GRID)
    cells = make_cells(grid, argparse.Namespace(methods=",".join(SYSTEMS)), None, build_config)
    sweep = Sweep(folder)
    sweep.start(cells, grid)
    for i, cell in enumerate(cells):
        path = make_run(folder, cell.name, models=i == 0)
        config = Run(path).config()  # the cell's own settings, as a sweep's cell records them
        config.pop("languages")
        Run(path).write_config({**config, **cell.config, "name": cell.name})
        seed, lang = cell.config["seed"], cell.config["world"]["languages"][0]["code"]
        Run(path).write_results([{"system": s, "language": l, "f1": f1_of(s, l, seed), "exact_match": f1_of(s, l, seed) / 2}
                                 for s in SYSTEMS for l in ("en", lang)])
    return folder
