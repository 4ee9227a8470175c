"""Run folders: the contract between a running job, the command line and the app.

A run lives in ``<checkpoints>/<run>/`` and holds

- ``config.json``   everything needed to reproduce it (seed, sizes, package versions)
- ``status.json``   state, current stage, progress, pid, timestamps, error
- ``metrics.jsonl`` one line per logged step: ``{"stage", "step", "loss", "elapsed", ...}``
- ``log.txt``       human-readable log (the app shows its tail)
- ``results.json``  list of rows ``{"system", "language", "exact_match", "f1"}`` (``"verdict":
  "degenerate"`` and ``degenerate_stages`` on a row that depends on a degenerate stage)
- ``verdicts.json`` ``{stage: {"verdict": "ok" | "degenerate" | "unjudged", ...}}``, each judged
  stage's outcome with its numbers (:mod:`xlviz.training.verdicts`)
- one ``save_pretrained`` folder per trained stage, and ``export/`` with the zero-shot models.

Writers use :mod:`xlviz.io` atomics, so a reader (the app) never sees half a file and a
killed run can resume from ``status.json["stages_done"]``. One process writes a run at a time:
:meth:`Run.writer_lock` holds an ``fcntl.flock`` on ``.writer.lock`` (released by the OS when
the process dies), confines every write to the run folder and turns SIGTERM into Ctrl-C so a
terminated run is marked ``cancelled``. A run training several stages at
once (``workers``) has worker processes write its stage folders for the lock holder, which
stays the only writer of the files above (:mod:`xlviz.training.stage_workers`). Readers never crash on a malformed folder:
:meth:`Run.unreadable` gives the reason to show instead.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import platform
import signal
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from xlviz.errors import XlvizError
from xlviz.io import append_jsonl, append_line, atomic_write_json, confine_writes, read_json, read_jsonl, remove_orphans
from xlviz.names import check_name, check_stage

LOCK_FILE = ".writer.lock"

ENV_CHECKPOINTS = "XLVIZ_CHECKPOINTS"
STATES = ("pending", "running", "completed", "failed", "cancelled")


def checkpoints_root(out: str | os.PathLike | None = None) -> Path:
    """Where runs go: ``--out`` if given, else ``$XLVIZ_CHECKPOINTS``, else ``./checkpoints``."""
    if out:
        return Path(out)
    return Path(os.environ.get(ENV_CHECKPOINTS, "checkpoints"))


def process_start_ticks(pid: int) -> int | None:
    """A process's start time in clock ticks since boot (Linux), to tell a reused pid apart."""
    try:
        with open(f"/proc/{int(pid)}/stat", encoding="ascii", errors="replace") as f:
            rest = f.read().rsplit(")", 1)[-1].split()
        return int(rest[19])  # field 22 overall; comm (field 2) may hold spaces and ')'
    except (OSError, IndexError, ValueError):
        return None


def process_alive(pid: object, start_ticks: object = None) -> bool:
    """Whether ``pid`` runs (not a zombie) and, when ``start_ticks`` is known, is the same
    process that recorded it rather than a later one that reused the pid."""
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            state = f.read().rsplit(")", 1)[-1].split()[0]
    except (OSError, IndexError):
        return False
    if state in ("Z", "X"):
        return False
    return start_ticks is None or process_start_ticks(pid) == start_ticks


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises KeyboardInterrupt (so a run marks itself cancelled, as
    on Ctrl-C). Only the main thread can set handlers; elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum, frame):
        raise KeyboardInterrupt(f"terminated by signal {signum}")

    previous = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def one_line(text: object) -> str:
    """``text`` with newlines and other control characters escaped, for a log line."""
    return "".join(c if c >= " " and c not in "\x7f\x85\u2028\u2029" else repr(c)[1:-1] for c in str(text))


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

    def __post_init__(self) -> None:
        self.path = Path(self.path)

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

    @property
    def verdicts_path(self) -> Path:
        return self.path / "verdicts.json"

    @property
    def lock_path(self) -> Path:
        return self.path / LOCK_FILE

    def exists(self) -> bool:
        return self.config_path.exists()

    # --- reading ------------------------------------------------------------
    def config(self) -> dict:
        config = read_json(self.config_path, what="run config")
        if not isinstance(config, dict):
            raise XlvizError(f"expected a JSON object, got {type(config).__name__}", path=self.config_path)
        return config

    def status(self) -> dict:
        if not self.status_path.exists():
            return {"state": "pending", "stages_done": []}
        status = read_json(self.status_path, what="run status")
        if not isinstance(status, dict):
            raise XlvizError(f"expected a JSON object, got {type(status).__name__}", path=self.status_path)
        if status.get("state", "pending") not in STATES:
            raise XlvizError(f"unknown state {status.get('state')!r}", path=self.status_path, field="state")
        done = status.get("stages_done", [])
        if not isinstance(done, list) or not all(isinstance(x, str) for x in done):
            raise XlvizError("expected a list of stage names", path=self.status_path, field="stages_done")
        return status

    def metrics(self, all_attempts: bool = False) -> list[dict]:
        """Logged steps; where a resumed stage started over, only its last attempt (a step
        that does not increase starts a new attempt), so no (stage, step) appears twice.
        ``all_attempts``: every row in order (the loss charts draw each attempt as its own line)."""
        by_stage: dict[str, list[dict]] = {}
        for row in read_jsonl(self.metrics_path):
            if not isinstance(row, dict):
                continue
            rows = by_stage.setdefault(str(row.get("stage")), [])
            step = row.get("step")
            if (not all_attempts and rows and isinstance(step, (int, float)) and isinstance(rows[-1].get("step"), (int, float))
                    and step <= rows[-1]["step"]):
                rows.clear()
            rows.append(row)
        return [r for rows in by_stage.values() for r in rows]

    def results(self) -> list[dict]:
        if not self.results_path.exists():
            return []
        rows = read_json(self.results_path, what="run results")
        if not isinstance(rows, list):
            raise XlvizError("expected a list of result rows", path=self.results_path)
        for i, r in enumerate(rows):
            if not isinstance(r, dict) or not isinstance(r.get("system"), str) or not isinstance(r.get("language"), str):
                raise XlvizError(f"row {i} must be an object with 'system' and 'language'", path=self.results_path, field=f"[{i}]")
        return rows

    def verdicts(self) -> dict[str, dict]:
        """``{stage: verdict}`` of the stages judged so far (:mod:`xlviz.training.verdicts`):
        ``{"verdict": "ok" | "degenerate" | "unjudged", "kind", "reason", ...numbers}``."""
        if not self.verdicts_path.exists():
            return {}
        verdicts = read_json(self.verdicts_path, what="stage verdicts")
        if not isinstance(verdicts, dict):
            raise XlvizError(f"expected a JSON object, got {type(verdicts).__name__}", path=self.verdicts_path)
        return {str(k): v for k, v in verdicts.items() if isinstance(v, dict)}

    def unreadable(self) -> str | None:
        """None if the run's files read cleanly, else the reason (for the app to show)."""
        try:
            self.config()
            self.status()
            self.results()
        except XlvizError as e:
            return str(e)
        return None

    def writer_pid(self) -> int | None:
        """The pid of the live process holding this run's writer lock, if any (read from the
        lock file and checked against the process's start time; no lock is taken)."""
        try:
            parts = self.lock_path.read_text(encoding="ascii", errors="replace").split()
            pid, ticks = int(parts[0]), int(parts[1]) if len(parts) > 1 else None
        except (OSError, ValueError, IndexError):
            return None
        return pid if pid != os.getpid() and process_alive(pid, ticks) else None

    def log_tail(self, n: int = 40) -> str:
        if not self.log_path.exists():
            return ""
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return "".join(f.readlines()[-n:])

    # --- writing ------------------------------------------------------------
    @contextlib.contextmanager
    def writer_lock(self, *, main: bool = True) -> Iterator["Run"]:
        """Be this run's only writer for the block: an exclusive ``flock`` on ``.writer.lock``
        (a second writer gets an XlvizError naming the holder's pid; the OS releases the lock
        when the process dies, so a killed run can be resumed), every write confined to the
        run folder, leftovers of killed saves removed, SIGTERM handled like Ctrl-C. Processes
        other than the main one (``main=False``) write nothing and take no lock."""
        if not main:
            yield self
            return
        import fcntl

        self.path.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
        except OSError as e:
            raise XlvizError(f"cannot open the run's lock file: {e.strerror or e}", path=self.lock_path) from None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 64, 0).decode("ascii", "replace").split()
                pid = holder[0] if holder else "unknown"
                raise XlvizError(f"another process (pid {pid}) is writing this run; wait for it to finish or cancel it",
                                 path=self.path) from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()} {process_start_ticks(os.getpid())}\n".encode(), 0)
            remove_orphans(self.path)
            with confine_writes(self.path), sigterm_as_interrupt():
                yield self
        finally:
            os.close(fd)  # releases the flock

    def write_config(self, config: dict) -> None:
        atomic_write_json(self.config_path, config, root=self.path)

    def update_status(self, **fields: Any) -> dict:
        status = self.status()
        status.update(fields)
        status["updated"] = now_iso()
        status["pid"] = os.getpid()
        status["pid_start"] = process_start_ticks(os.getpid())
        atomic_write_json(self.status_path, status, root=self.path)
        return status

    def mark_stage_done(self, stage: str) -> None:
        check_stage(stage)
        done = list(self.status().get("stages_done", []))
        if stage not in done:
            done.append(stage)
        self.update_status(stages_done=done)

    def stage_done(self, stage: str) -> bool:
        return stage in self.status().get("stages_done", [])

    def log_metric(self, **row: Any) -> None:
        append_jsonl(self.metrics_path, row, root=self.path)

    def log(self, message: str) -> None:
        """Append one line to ``log.txt``: never through a symlink, never a raw newline."""
        self.path.mkdir(parents=True, exist_ok=True)
        append_line(self.log_path, f"[{now_iso()}] {one_line(message)}\n", root=self.path)

    def record_verdict(self, stage: str, verdict: dict) -> None:
        """Write (or replace, on a stage's re-run) ``stage``'s verdict; the lock holder only."""
        check_stage(stage)
        verdicts = self.verdicts()
        verdicts[stage] = verdict
        atomic_write_json(self.verdicts_path, verdicts, root=self.path)

    def write_results(self, rows: list[dict]) -> None:
        atomic_write_json(self.results_path, rows, root=self.path)

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

    def mtime(run: Run) -> float:
        try:
            return run.config_path.stat().st_mtime
        except OSError:
            return 0.0

    return sorted(runs, key=mtime, reverse=True)


def new_run_path(root: str | os.PathLike | None, prefix: str) -> Path:
    """Create a fresh, human-readable run folder ``<prefix>-YYYYmmdd-HHMMSS[-n]`` and return it.

    Created here with ``mkdir`` (not ``exist_ok``), retrying with the next suffix, so two runs
    started in the same second never share a folder."""
    check_name(prefix, field="name", what="run name")
    root = checkpoints_root(root)
    if root.exists() and not root.is_dir():
        raise XlvizError("the checkpoints root is a file, not a folder", path=root, field="--out")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise XlvizError(f"cannot create the checkpoints root: {e.strerror or e}", path=root, field="--out") from None
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    for n in range(1, 10_000):
        path = root / (f"{prefix}-{stamp}" if n == 1 else f"{prefix}-{stamp}-{n}")
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue
    raise XlvizError("no free run folder name", path=root)


def _flatten(d: object, prefix: str = "") -> dict[str, object]:
    if isinstance(d, dict):
        out: dict[str, object] = {}
        for k, v in d.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: d}


def differing_settings(old: dict, new: dict) -> list[str]:
    """``key: old -> new`` for every setting (dotted, package versions ignored) that differs."""
    a = _flatten(json.loads(json.dumps({k: v for k, v in old.items() if k != "versions"})))
    b = _flatten(json.loads(json.dumps({k: v for k, v in new.items() if k != "versions"})))
    return [f"{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


def check_same_settings(run_dir: str | os.PathLike, config: dict) -> None:
    """Refuse to run into an existing run folder with other settings (its results would be
    shown as if they were this run's, or two configurations mixed in one folder)."""
    run = Run(Path(run_dir))
    if not run.exists():
        return
    diff = differing_settings(run.config(), config)
    if diff:
        shown = "; ".join(diff[:6]) + (f"; and {len(diff) - 6} more" if len(diff) > 6 else "")
        raise XlvizError(f"already holds a run with other settings ({shown}); choose another --run-dir, or continue it "
                         "with --resume", path=run_dir, field="--run-dir")


def explicit_run_dir(run_dir: str | os.PathLike, root: str | os.PathLike, config: dict) -> Path:
    """A ``--run-dir`` checked before anything is written: inside the checkpoints ``root``, no
    '..', no newline, a valid name (:func:`xlviz.names.check_run_dir`), and not an existing
    run with other settings (:func:`check_same_settings`)."""
    from xlviz.names import check_run_dir

    path = check_run_dir(run_dir, root)
    if path.exists() and not path.is_dir():
        raise XlvizError("exists and is not a folder", path=path, field="--run-dir")
    if path.is_dir() and not Run(path).exists() and any(p.name not in (LOCK_FILE, ".job-start.lock", "job.json", "job-output.txt")
                                                         for p in path.iterdir()):
        raise XlvizError("is a folder with other files in it, not a run folder; choose a new or empty folder",
                         path=path, field="--run-dir")
    check_same_settings(path, config)
    return path
