"""Run folders: the contract between a running job, the command line and the app.

A run lives in ``<checkpoints>/<run>/`` and holds

- ``config.json``   everything needed to reproduce it (seed, sizes, package versions)
- ``status.json``   state, current stage, progress, pid, timestamps, error
- ``metrics.jsonl`` one line per logged step: ``{"stage", "step", "loss", "elapsed", ...}``
- ``log.txt``       human-readable log (the app shows its tail)
- ``results.json``  list of rows ``{"system", "language", "exact_match", "f1"}``
- one ``save_pretrained`` folder per trained stage, and ``export/`` with the zero-shot models.

Writers use :mod:`xlviz.io` atomics, so a reader (the app) never sees half a file and a
killed run can resume from ``status.json["stages_done"]``.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xlviz.errors import XlvizError
from xlviz.io import append_jsonl, atomic_write_json, read_json, read_jsonl

ENV_CHECKPOINTS = "XLVIZ_CHECKPOINTS"
STATES = ("pending", "running", "completed", "failed", "cancelled")


def checkpoints_root(out: str | os.PathLike | None = None) -> Path:
    """Where runs go: ``--out`` if given, else ``$XLVIZ_CHECKPOINTS``, else ``./checkpoints``."""
    if out:
        return Path(out)
    return Path(os.environ.get(ENV_CHECKPOINTS, "checkpoints"))


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def package_versions() -> dict[str, str]:
    """Versions recorded in every run's config, for reproducibility."""
    from importlib import metadata

    versions = {"python": sys.version.split()[0], "platform": platform.platform()}
    for name in ("xlviz", "torch", "transformers", "accelerate", "tokenizers", "numpy", "safetensors"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


@dataclass
class Run:
    """A handle on one run folder. Cheap to create; reads lazily from disk."""

    path: Path
    _t0: float | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return self.path.name

    # --- files --------------------------------------------------------------
    @property
    def config_path(self) -> Path:
        return self.path / "config.json"

    @property
    def status_path(self) -> Path:
        return self.path / "status.json"

    @property
    def metrics_path(self) -> Path:
        return self.path / "metrics.jsonl"

    @property
    def results_path(self) -> Path:
        return self.path / "results.json"

    @property
    def log_path(self) -> Path:
        return self.path / "log.txt"

    def exists(self) -> bool:
        return self.config_path.exists()

    # --- reading ------------------------------------------------------------
    def config(self) -> dict:
        return read_json(self.config_path, what="run config")

    def status(self) -> dict:
        if not self.status_path.exists():
            return {"state": "pending", "stages_done": []}
        return read_json(self.status_path, what="run status")

    def metrics(self) -> list[dict]:
        return list(read_jsonl(self.metrics_path))

    def results(self) -> list[dict]:
        if not self.results_path.exists():
            return []
        rows = read_json(self.results_path, what="run results")
        if not isinstance(rows, list):
            raise XlvizError("expected a list of result rows", path=self.results_path)
        return rows

    def log_tail(self, n: int = 40) -> str:
        if not self.log_path.exists():
            return ""
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return "".join(f.readlines()[-n:])

    # --- writing ------------------------------------------------------------
    def write_config(self, config: dict) -> None:
        atomic_write_json(self.config_path, config)

    def update_status(self, **fields: Any) -> dict:
        status = self.status()
        status.update(fields)
        status["updated"] = now_iso()
        status["pid"] = os.getpid()
        atomic_write_json(self.status_path, status)
        return status

    def mark_stage_done(self, stage: str) -> None:
        done = list(self.status().get("stages_done", []))
        if stage not in done:
            done.append(stage)
        self.update_status(stages_done=done)

    def stage_done(self, stage: str) -> bool:
        return stage in self.status().get("stages_done", [])

    def log_metric(self, **row: Any) -> None:
        append_jsonl(self.metrics_path, row)

    def log(self, message: str) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "a", encoding="utf-8") as f:
            f.write(f"[{now_iso()}] {message}\n")

    def write_results(self, rows: list[dict]) -> None:
        atomic_write_json(self.results_path, rows)

    def add_results(self, rows: list[dict]) -> None:
        """Merge rows by (system, language), replacing older rows for the same pair."""
        merged = {(r["system"], r["language"]): r for r in self.results()}
        for r in rows:
            merged[(r["system"], r["language"])] = r
        self.write_results(list(merged.values()))


def list_runs(root: str | os.PathLike | None = None) -> list[Run]:
    """All run folders under the checkpoints root, newest first."""
    root = checkpoints_root(root)
    if not root.exists():
        return []
    runs = [Run(p) for p in root.iterdir() if p.is_dir() and not p.name.startswith(".") and (p / "config.json").exists()]
    return sorted(runs, key=lambda r: r.config_path.stat().st_mtime, reverse=True)


def new_run_path(root: str | os.PathLike | None, prefix: str) -> Path:
    """A fresh, human-readable run folder name: ``<prefix>-YYYYmmdd-HHMMSS[-n]``."""
    root = checkpoints_root(root)
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    path = root / f"{prefix}-{stamp}"
    n = 1
    while path.exists():
        n += 1
        path = root / f"{prefix}-{stamp}-{n}"
    return path
