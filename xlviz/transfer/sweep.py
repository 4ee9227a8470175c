"""A sweep: every cell of a grid over any config settings, each a normal transfer run.

Why: the questions the bench asks (which difference between languages breaks transfer, which
method survives which) need many runs of one config that differ in one or two settings, at
several seeds. A sweep folder holds one ordinary run folder per cell (``<sweep>/<cell>/``,
what ``xlviz transfer`` would write for that cell alone, byte for byte) and its own record in
``<sweep>/sweep/`` (``sweep.json``, ``log.txt``, the writer lock, the job engine's files).

Cells are independent jobs run by submitit (``backend``: ``local`` runs each cell in its own
process on this machine, ``debug`` in this process, ``slurm`` on a cluster). The sweep
process is the sweep's one writer (``Run.writer_lock`` on ``<sweep>/sweep``); each cell's job
holds its cell's own writer lock, as ``xlviz transfer`` does. Re-running the same command
continues a killed sweep: finished cells are skipped, a cell killed half-way resumes from its
last finished stage (``StagedRun``).

Stages identical across cells run once: the stages that read only the world's English side
(``SHARED_STAGES``: MONOTRANS's step 1 and the step-3 fine-tunings on English QA, CLWE's body and
its QA fine-tuning over the frozen English skip-gram vectors) depend on the
run's settings but not on its L2s (the English corpus, QA sets and vocabulary do not change
with the L2s: ``tests/test_typology.py``). Cells whose settings differ only in
``world.languages`` and ``methods`` form a group; the sweep runs one cell per group first and
gives the others a copy of its finished shared stages (folders and their metrics), so a sweep
over G grammars x S seeds pre-trains the English body S times, not G x S.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from xlviz.errors import XlvizError, bounded
from xlviz.io import atomic_dir, atomic_write_json, read_json
from xlviz.names import check_name
from xlviz.runs import SWEEP_FILE as RUN_SWEEP_FILE
from xlviz.runs import KILLED, SWEEP_RECORD, Run, artefacts, differing_settings, is_sweep_folder, now_iso
from xlviz.transfer.settings import EVERY_COMMAND, named_settings

# <sweep>/sweep: the sweep's own record (not a run folder: no config.json); xlviz.runs lists
# the cells of a folder holding <sweep>/sweep/sweep.json as runs
SWEEP_DIR = SWEEP_RECORD
SWEEP_FILE = RUN_SWEEP_FILE
# Stages that read only the world's English side (corpus, vocabulary, QA training set) and
# the run's settings: identical in cells that differ only in their L2s and systems. CLWE's body
# (``s1_clwe``) and QA model (``s3_clwe``) read the English rows of ``clwe_vectors``: skip-gram on
# the English corpus with the run's seed, normalised alone, so the same for every L2 (the
# mapping moves only the L2's vectors; tests/test_sweep.py compares the bytes).
SHARED_STAGES = re.compile(r"^(s1_pretrain|s1_clwe|s3_clwe|s3_finetune(-[A-Za-z0-9_+-]+)?)$")
# Settings a shared stage does not read (the rest must be equal for cells to share).
# ``world.shared_names`` spells the L2s' names as English does and ``world.loanword_share``
# borrows English words into them: both change only the L2 lexicons
# (tests/test_typology.py::test_english_side_does_not_depend_on_the_l2s,
# tests/test_realism_axes.py::test_loanwords_leave_the_english_side_alone).
NOT_SHARED_KEYS = ("name", "methods", "world.languages", "world.shared_names", "world.loanword_share")
BACKENDS = ("local", "debug", "slurm")


# --------------------------------------------------------------------------- the grid
def parse_grid_value(key: str, text: str) -> Any:
    """One ``--grid`` value: ``world.languages`` takes ``--languages`` syntax (one preset or
    ``code:grammar[:script]`` per value); other keys JSON (``0``, ``0.5``, ``true``) or else
    the text itself (``small``)."""
    if key == "world.languages":
        from xlviz.data.typology import parse_languages

        return parse_languages(text)
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_grid(items: list[str] | None, grid_file: str | None = None) -> list[tuple[str, list]]:
    """``--grid KEY=V1,V2,...`` (repeated) and ``--grid-file`` (a JSON object: key -> list of
    values; a ``world.languages`` value is a ``--languages`` string or a list of entries) as an
    ordered list of (dotted key, values)."""
    grid: list[tuple[str, list]] = []
    if grid_file:
        data = read_json(grid_file, what="sweep grid")
        if not isinstance(data, dict) or not data:
            raise XlvizError("must be a JSON object of setting -> list of values", path=grid_file, field="grid")
        for key, values in data.items():
            if not isinstance(values, list) or not values:
                raise XlvizError("must be a non-empty list of values", path=grid_file, field=key)
            if key == "world.languages":
                values = [parse_grid_value(key, v) if isinstance(v, str) else v for v in values]
            grid.append((key, values))
    for item in items or []:
        key, eq, rest = item.partition("=")
        key = key.strip()
        if not eq or not key or not rest.strip():
            raise XlvizError(f"{item!r} is not KEY=V1,V2,...", field="--grid")
        grid.append((key, [parse_grid_value(key, v.strip()) for v in rest.split(",") if v.strip()]))
    for key, values in grid:  # seed=0,0: both cells would run and the means count seed 0 twice
        texts = [json.dumps(v, sort_keys=True) for v in values]
        twice = next((v for v, t in zip(values, texts) if texts.count(t) > 1), None)
        if twice is not None:
            raise XlvizError(f"{key} lists the value {bounded(json.dumps(twice), 40)} twice: each value is one cell, so a "
                             "repeated one would be run twice and counted twice in the means", field="--grid")
    keys = [k for k, _ in grid]
    dup = sorted({k for k in keys if keys.count(k) > 1})
    if dup:
        raise XlvizError(f"setting {dup[0]!r} appears twice in the grid", field="--grid")
    if not grid:
        raise XlvizError("give at least one --grid KEY=V1,V2,... or a --grid-file", field="--grid")
    return grid


def _set(d: dict, key: str, value: Any) -> None:
    parts = key.split(".")
    for p in parts[:-1]:
        inner = d.get(p)
        if not isinstance(inner, dict):
            inner = d[p] = {}
        d = inner
    d[parts[-1]] = value


def _get(d: dict, key: str) -> Any:
    for p in key.split("."):
        if not isinstance(d, dict) or p not in d:
            return None
        d = d[p]
    return d


def _slug(value: Any) -> str:
    if isinstance(value, list) and all(isinstance(v, dict) and "code" in v for v in value):
        text = "+".join(str(v["code"]) for v in value)
    else:
        text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_") or "x"


@dataclass
class Cell:
    name: str  # its folder under the sweep
    overrides: dict  # dotted key -> value
    config: dict  # the validated TransferConfig as a dict

    def group(self) -> str:
        """Cells of one group differ only in settings the shared stages do not read."""
        d = json.loads(json.dumps(self.config))
        for key in NOT_SHARED_KEYS:
            parts = key.split(".")
            inner = _get(d, ".".join(parts[:-1])) if len(parts) > 1 else d
            if isinstance(inner, dict):
                inner.pop(parts[-1], None)
        return json.dumps(d, sort_keys=True)


SEED_KEYS = ("seed", "world.seed")  # the settings that make a cell one seed of its setting


def cell_label(cell: Cell, skip: tuple[str, ...]) -> str:
    """The cell's overrides but ``skip`` as ``key=value`` pairs (last part of a dotted key)."""
    return ", ".join(f"{k.split('.')[-1]}={_show(v)}" for k, v in cell.overrides.items() if k not in skip)


def setting_label(cell: Cell, *, seed: bool = False) -> str:
    """The cell's label, without its seed unless ``seed``: ``languages=tr``."""
    return cell_label(cell, () if seed else SEED_KEYS) or "all"


def _show(value: object) -> str:
    if isinstance(value, list) and all(isinstance(v, dict) and "code" in v for v in value):
        return "+".join(str(v["code"]) for v in value)
    return value if isinstance(value, str) else json.dumps(value)


# Flags of ``xlviz sweep`` named otherwise than the setting each sets (a world setting's flag,
# --variants): a grid key may not be given twice.
FLAG_KEYS = {**{s.name: s.path for s in named_settings(EVERY_COMMAND) if s.path != s.name}, "variants": "methods"}


def make_cells(grid: list[tuple[str, list]], args: argparse.Namespace, base: dict | None,
               build: Callable[[argparse.Namespace, dict], Any]) -> list[Cell]:
    """Every combination of the grid's values (the last key varying fastest), each applied to
    the config file's settings ``base`` and then the command's flags, as ``xlviz transfer``
    builds a run's config (``build``)."""
    import itertools

    for key, _ in grid:
        flag = next((f for f, k in FLAG_KEYS.items() if k == key), key)
        if getattr(args, flag, None) is not None:
            raise XlvizError(f"{key!r} is both in the grid and given as a flag; give it once", field="--grid")
    cells = []
    checked: set[str] = set()
    for i, combo in enumerate(itertools.product(*[values for _, values in grid])):
        d = json.loads(json.dumps(base or {}))
        overrides = {}
        for (key, _), value in zip(grid, combo):
            _set(d, key, value)
            overrides[key] = value
        cfg = build(args, d)
        data = json.dumps(getattr(cfg, "data", None), sort_keys=True, default=str)
        if data not in checked and hasattr(cfg, "check_files"):  # before the sweep folder is made
            cfg.check_files()
            checked.add(data)
        slug = "_".join(f"{key.split('.')[-1]}-{_slug(value)}" for key, value in overrides.items())
        name = f"{i:03d}-{slug}"[:64].rstrip("-_")
        check_name(name, field="--grid", what="cell name")
        cells.append(Cell(name, overrides, cfg.to_dict()))
    return cells


# --------------------------------------------------------------------------- one cell (a job)
def run_cell(cell_dir: str, config: dict) -> str:
    """The job of one cell: the transfer run of ``config`` in ``cell_dir`` (resumed if it has
    begun), under the cell's writer lock; returns the run's final state. Waits while another
    process (a job of a killed sweep, still finishing) writes the cell."""
    from xlviz.transfer.config import TransferConfig
    from xlviz.transfer.pipeline import Pipeline

    run = Run(Path(cell_dir))
    while True:
        try:
            with run.writer_lock():
                if run.exists() and run.status().get("state") == "completed":
                    return "completed"
                pipeline = Pipeline.resume(cell_dir) if run.exists() else Pipeline(TransferConfig.from_dict(config), cell_dir)
                pipeline.run_all()
                return str(run.status().get("state"))
        except XlvizError as e:
            if "another process" not in str(e):
                raise
            time.sleep(5)


# --------------------------------------------------------------------------- the sweep
class Sweep:
    """``Sweep(folder).start(cells)`` writes or checks ``sweep.json``; ``run(...)`` runs every
    cell not yet completed through the backend."""

    def __init__(self, folder: str | Path):
        self.path = Path(folder)
        self.record = Run(self.path / SWEEP_DIR)

    @property
    def file(self) -> Path:
        return self.record.path / SWEEP_FILE

    def exists(self) -> bool:
        return self.file.exists()

    def read(self) -> dict:
        data = read_json(self.file, what="sweep record")
        if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
            raise XlvizError("expected an object with a list of 'cells'", path=self.file, field="cells")
        return data

    def cells(self) -> list[Cell]:
        out = []
        for i, c in enumerate(self.read()["cells"]):
            if not isinstance(c, dict) or not isinstance(c.get("config"), dict):
                raise XlvizError("each cell must be an object with a 'config'", path=self.file, field=f"cells[{i}]")
            name = check_name(c.get("name"), field=f"cells[{i}].name", path=self.file, what="cell name")
            out.append(Cell(name, dict(c.get("overrides") or {}), c["config"]))
        return out

    def cell_run(self, cell: Cell) -> Run:
        return Run(self.path / cell.name)

    def start(self, cells: list[Cell], grid: list[tuple[str, list]]) -> None:
        """Record the sweep, or check that an existing one is the same sweep (re-running the
        same command continues it; another grid or setting in the same folder is refused)."""
        if self.exists():
            old = self.read()
            names = [c.get("name") for c in old["cells"] if isinstance(c, dict)]
            if names != [c.name for c in cells]:
                raise XlvizError("already holds a sweep over another grid; choose another --out, or re-run that sweep's "
                                 "command to continue it", path=self.path, field="--out")
            for c, o in zip(cells, old["cells"]):
                diff = differing_settings(o.get("config") or {}, c.config)
                if diff:
                    raise XlvizError(f"already holds a sweep with other settings (cell {c.name}: {'; '.join(diff[:4])}); "
                                     "choose another --out", path=self.path, field="--out")
            return
        for c in cells:
            run = self.cell_run(c)
            if run.path.exists() and any(run.path.iterdir()):
                raise XlvizError("a cell's folder exists and is not empty; choose a new or empty --out",
                                 path=run.path, field="--out")
        atomic_write_json(self.file, {"created": now_iso(), "grid": [[k, v] for k, v in grid],
                                      "cells": [{"name": c.name, "overrides": c.overrides, "config": c.config} for c in cells]})

    def log(self, message: str) -> None:
        self.record.log(message)
        print(message, flush=True)

    # --- sharing ---------------------------------------------------------------------
    def share_into(self, cell: Cell, source: Cell) -> list[str]:
        """Copy ``source``'s finished shared stages (folders, metrics and verdicts) into ``cell`` and mark
        them done there, before the cell runs; returns the stages copied."""
        from xlviz.transfer.config import TransferConfig
        from xlviz.transfer.pipeline import Pipeline

        src, dst = self.cell_run(source), self.cell_run(cell)
        done_src = set(src.status().get("stages_done", []))
        copied = []
        with dst.writer_lock():
            pipeline = Pipeline.resume(dst.path) if dst.exists() else Pipeline(TransferConfig.from_dict(cell.config), dst.path)
            if not dst.exists():
                dst.write_config(pipeline.config_record())
            rows = src.metrics()
            verdicts = src.verdicts()
            for stage in pipeline.plan():
                if not SHARED_STAGES.match(stage) or stage not in done_src or dst.stage_done(stage):
                    continue
                with atomic_dir(dst.path / stage) as tmp:
                    shutil.copytree(src.path / stage, tmp, dirs_exist_ok=True)
                # the copy is what the source's manifest says it is (pretrained, fine-tuned, ...); the
                # stages it waits for are this cell's (its own L2s'), as the cell run alone records them
                dst.record_artefacts([{**a.to_dict(), "depends_on": pipeline.stage_dependencies(stage)}
                                      for a in artefacts(src, "stage") if a.path == stage])
                for row in rows:
                    if row.get("stage") == stage:
                        dst.log_metric(**row)
                if stage in verdicts:  # the copy was judged where it trained: rows that read it are judged alike
                    dst.record_verdict(stage, verdicts[stage])
                dst.log(f"stage {stage}: copied from cell {source.name} (same settings but the L2s and systems)")
                dst.mark_stage_done(stage)
                copied.append(stage)
        return copied

    # --- running ---------------------------------------------------------------------
    def run(self, backend: str = "local", parallel: int = 1, slurm: dict | None = None) -> dict:
        """Run every cell not yet completed: first one cell per group (in parallel up to
        ``parallel`` jobs), then the others with the group's shared stages copied in. Returns
        ``{cell: state}``."""
        if backend not in BACKENDS:
            raise XlvizError(f"unknown backend {backend!r}; choose from {list(BACKENDS)}", field="--backend")
        if isinstance(parallel, bool) or not isinstance(parallel, int) or parallel < 1:
            raise XlvizError(f"must be at least 1 (cells running at once), got {parallel!r}", field="--parallel")
        cells = self.cells()
        states = {c.name: self.state(c) for c in cells}
        t0 = time.time()
        self.log(f"sweep of {len(cells)} cells ({backend}); {sum(s == 'completed' for s in states.values())} already completed")
        groups: dict[str, list[Cell]] = {}
        for c in cells:
            groups.setdefault(c.group(), []).append(c)

        def has_shared(c: Cell) -> bool:
            return any(SHARED_STAGES.match(s) for s in self.cell_run(c).status().get("stages_done", []))

        first = [next(c for c in g if states[c.name] != "completed") for g in groups.values()
                 if not any(has_shared(c) for c in g) and any(states[c.name] != "completed" for c in g)]
        self._run_jobs(first, backend, parallel, slurm, states)
        rest = []
        for g in groups.values():
            source = next((c for c in g if has_shared(c)), None)
            for c in g:
                if states[c.name] == "completed" or c in first:  # a failed first cell is not run twice
                    continue
                if source is not None and c is not source:
                    copied = self.share_into(c, source)
                    if copied:
                        self.log(f"{c.name}: {', '.join(copied)} copied from {source.name}")
                rest.append(c)
        self._run_jobs(rest, backend, parallel, slurm, states)
        self.log(f"sweep finished in {time.time() - t0:.0f} s: "
                 + ", ".join(f"{n} {s}" for n, s in states.items()))
        return states

    def state(self, cell: Cell) -> str:
        """The cell's state as its files say, read as a reader does (:meth:`Run.live_status`):
        a cell whose job was killed mid-run is ``failed (<why>)``, never ``running``."""
        run = self.cell_run(cell)
        if not run.exists():
            return "pending"
        status = run.live_status()
        state = str(status.get("state", "pending"))
        return f"{state} (the process ended without finishing: killed?)" if status.get("killed") else state

    def _run_jobs(self, cells: list[Cell], backend: str, parallel: int, slurm: dict | None, states: dict) -> None:
        if not cells:
            return
        executor = make_executor(self.record.path / "submitit", backend, slurm or {})
        queue = list(cells)
        running: list[tuple[Cell, Any]] = []
        try:
            while queue or running:
                while queue and len(running) < max(1, parallel):
                    c = queue.pop(0)
                    self.log(f"{c.name}: started")
                    running.append((c, executor.submit(run_cell, str(self.cell_run(c).path), c.config)))
                for c, job in list(running):
                    if job.done():
                        running.remove((c, job))
                        states[c.name] = self.state(c)
                        self.log(f"{c.name}: {states[c.name]}")
                if running:
                    time.sleep(0.5 if backend != "slurm" else 30)
        except KeyboardInterrupt:
            for _, job in running:
                job.cancel(check=False)
            raise


def run_sweep(folder: str | Path, cells: list[Cell], grid: list[tuple[str, list]], *, backend: str = "local",
              parallel: int = 1, slurm: dict | None = None) -> dict:
    """Record (or check) and run a sweep as its one writer: ``{cell: final state}``."""
    sweep = Sweep(folder)
    with sweep.record.writer_lock():
        sweep.start(cells, grid)
        return sweep.run(backend, parallel, slurm)


# --------------------------------------------------------------------------- listing (the app)
@dataclass
class CellState:
    name: str  # folder under the sweep
    run: str  # its run name (``<sweep>/<cell>``), as every page lists it
    setting: str  # ``languages=tr, seed=1``
    state: str  # pending | running | completed | failed (also: its process is gone) | cancelled | unreadable
    stage: str = ""
    problem: str = ""  # why the cell's files cannot be read, or why it failed though status.json says running


@dataclass
class SweepSummary:
    name: str
    path: Path
    created: str
    grid: list  # [[key, values], ...] as recorded
    cells: list[CellState]
    writing: bool  # the sweep's process holds its writer lock (started from the app or a terminal)
    problem: str = ""  # the sweep record cannot be read

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for c in self.cells:
            out[c.state] = out.get(c.state, 0) + 1
        return out


def cell_state(run: Run) -> tuple[str, str, str]:
    """(state, stage, problem) of a cell's run folder: ``failed`` (with :data:`xlviz.runs.KILLED`
    as its problem) when status.json says running but no process holds the cell's writer lock
    any more (a killed sweep or cell job: re-run the sweep to continue)."""
    if not run.exists():
        return "pending", "", ""
    try:
        status = run.live_status()
    except XlvizError as e:
        return "unreadable", "", str(e)
    state = str(status.get("state", "pending"))
    if state == "running" and run.writer_pid() is None and run.lock_path.exists():
        state, status = "failed", {**status, "killed": True, "error": KILLED}  # a lock held by a process not its writer
    stage = status.get("stage") if isinstance(status.get("stage"), str) else ""
    return state, stage, str(status["error"]) if status.get("killed") else ""


def sweep_summary(folder: str | Path) -> SweepSummary:
    """A sweep folder's record and each cell's state, read only (never a job's pickled result)."""
    sweep = Sweep(folder)
    writing = sweep.record.writer_pid() is not None
    try:
        data = sweep.read()
        cells = sweep.cells()
    except XlvizError as e:
        return SweepSummary(sweep.path.name, sweep.path, "", [], [], writing, str(e))
    out = []
    for c in cells:
        run = sweep.cell_run(c)
        state, stage, problem = cell_state(run)
        out.append(CellState(c.name, run.name, setting_label(c, seed=True), state, stage, problem))
    grid = data.get("grid") if isinstance(data.get("grid"), list) else []
    return SweepSummary(sweep.path.name, sweep.path, str(data.get("created") or ""), grid, out, writing)


def list_sweeps(root: str | Path | None = None) -> list[Path]:
    """The sweep folders directly under the checkpoints root (``<sweep>/sweep/sweep.json``),
    newest first; one that resolves outside the root is skipped."""
    import os

    from xlviz import confined
    from xlviz.runs import checkpoints_root

    root = checkpoints_root(root)
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".") and is_sweep_folder(p)
             and confined.inside(root, p) and os.path.realpath(p) != os.path.realpath(root)]

    def created(p: Path) -> float:
        try:
            return (p / SWEEP_DIR / SWEEP_FILE).stat().st_mtime
        except OSError:
            return 0.0

    return sorted(found, key=created, reverse=True)


def make_executor(folder: Path, backend: str, slurm: dict):
    """A submitit executor: ``local`` (each job its own process here), ``debug`` (in this
    process), ``slurm`` (``slurm``: partition, time in minutes, cpus_per_task, gpus_per_node)."""
    try:
        import submitit
    except ImportError:
        raise XlvizError("sweeps run their cells through submitit: pip install -e '.[sweep]'", field="--backend") from None
    if backend == "debug":
        return submitit.DebugExecutor(folder)
    if backend == "local":
        import torch

        ex = submitit.LocalExecutor(folder)
        # a cell's own length (submitit's default is 2 minutes); submitit hides GPUs not asked for
        ex.update_parameters(timeout_min=60 * 24 * 7, gpus_per_node=torch.cuda.device_count() if torch.cuda.is_available() else 0)
        return ex
    try:
        ex = submitit.SlurmExecutor(folder)
    except RuntimeError as e:  # no srun: not on a Slurm cluster
        raise XlvizError(f"cannot use Slurm here: {e}", field="--backend") from None
    params = {"time": int(slurm.get("time") or 240), "cpus_per_task": int(slurm.get("cpus_per_task") or 4)}
    if slurm.get("partition"):
        params["partition"] = slurm["partition"]
    if slurm.get("gpus_per_node"):
        params["gpus_per_node"] = int(slurm["gpus_per_node"])
    ex.update_parameters(**params)
    return ex


__all__ = ["Sweep", "Cell", "parse_grid", "make_cells", "run_cell", "run_sweep", "SHARED_STAGES", "BACKENDS", "list_sweeps",
           "sweep_summary", "SweepSummary", "CellState"]
