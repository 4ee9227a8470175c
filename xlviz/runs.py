"""Run folders: the contract between a running job, the command line and the app.

A run lives in ``<checkpoints>/<run>/`` and holds

- ``config.json``   everything needed to reproduce it (seed, sizes, package versions)
- ``status.json``   state, current stage, progress, pid, timestamps, error
- ``metrics.jsonl`` one line per logged step: ``{"stage", "step", "loss", "elapsed", ...}``
- ``log.txt``       human-readable log (the app shows its tail)
- ``results.json``  list of rows ``{"system", "language", "exact_match", "f1"}`` (``"verdict":
  "degenerate"`` and ``degenerate_stages`` on a row that depends on a degenerate stage; a world
  run's rows end with ``slices``, EM/F1 per slice of the world's questions with intervals; a
  corpus run's QA rows with the slices of the text's questions)
- ``notes.json``    the researcher's note and tags (written by the app or ``xlviz runs note|tag``)
- ``verdicts.json`` ``{stage: {"verdict": "ok" | "degenerate" | "unjudged", ...}}``, each judged
  stage's outcome with its numbers (:mod:`xlviz.training.verdicts`)
- ``manifest.json`` ``{"version": 1, "artefacts": [{"kind", "path", "system", "language", "role",
  "setting", "pair", "variant", "stage"}]}``: every export, encoder, predictions file, trained
  stage folder, induced dictionary (``dictionaries/<l1>-<l2>.json``) and stored encodings
  (``encodings/<key>.safetensors``) the run wrote, recorded by the stage (or command) that wrote it (:func:`artefacts`,
  :func:`exports`, :func:`encoders`, :func:`artefact`, :func:`owner_of` read it; a run without
  one is read from its folder names by :func:`legacy_artefacts`, the only parser of them), and
  the files of ``world/`` that readers open (the generated world's ``world.json``, one
  tokenizer per language, the QA sets, the parallel evaluation pairs: :func:`world_path`, read
  from their conventional places in a run whose world stage did not record them)
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
import math
import os
import platform
import signal
import stat
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from xlviz import confined, limits
from xlviz.errors import XlvizError
from xlviz.io import append_jsonl, append_line, atomic_write_json, confine_writes, parse_jsonl, remove_orphans
from xlviz.names import check_name, check_stage, check_text

LOCK_FILE = ".writer.lock"
NOTES_FILE = "notes.json"
ARCHIVE_DIR = ".archive"
NOTE_MAX = 10_000
TAG_MAX = 40
TAGS_MAX = 32

ENV_CHECKPOINTS = "XLVIZ_CHECKPOINTS"
# A sweep folder (xlviz.transfer.sweep) holds one run folder per cell beside its own record
# ``<sweep>/sweep/sweep.json``; its cells are runs named ``<sweep>/<cell>`` (cells of two sweeps
# share folder names).
SWEEP_RECORD = "sweep"
SWEEP_FILE = "sweep.json"
STATES = ("pending", "running", "completed", "failed", "cancelled")
# The error a reader shows for a run whose status.json says "running" though its process is gone.
KILLED = ("the process ended without finishing (killed? out of memory, or the machine restarted); "
          "resume continues from the last finished stage")


def checkpoints_root(out: str | os.PathLike | None = None) -> Path:
    """Where runs go: ``--out`` if given, else ``$XLVIZ_CHECKPOINTS``, else ``./checkpoints``. An
    ``--out`` with a newline or other control character is refused before any folder is made."""
    if out:
        return Path(check_text(out, field="--out"))
    return Path(os.environ.get(ENV_CHECKPOINTS, "checkpoints"))


def process_start_ticks(pid: int) -> int | None:
    """A process's start time in clock ticks since boot (Linux), to tell a reused pid apart."""
    try:
        with open(f"/proc/{int(pid)}/stat", encoding="ascii", errors="replace") as f:
            rest = f.read().rsplit(")", 1)[-1].split()
        return int(rest[19])  # field 22 overall; comm (field 2) may hold spaces and ')'
    except (OSError, IndexError, ValueError):
        return None


def process_cmdline(pid: int) -> list[str] | None:
    """A process's command line (``/proc/<pid>/cmdline``), or None when it cannot be read."""
    try:
        with open(f"/proc/{int(pid)}/cmdline", "rb") as f:
            raw = f.read(1 << 20)
    except (OSError, ValueError):
        return None
    return [a.decode("utf-8", "surrogateescape") for a in raw.split(b"\0")[:-1]] if raw else None


def flock_holders(fd: int) -> set[int]:
    """The pids holding an ``flock`` on the file open at ``fd`` (from ``/proc/locks``, Linux).

    Why: a pid written into a lock file proves nothing (a run folder from elsewhere can name
    any process); holding the lock on that very file does."""
    st_ = os.fstat(fd)
    key = f"{os.major(st_.st_dev):02x}:{os.minor(st_.st_dev):02x}:{st_.st_ino}"
    holders: set[int] = set()
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 6 and parts[1] == "FLOCK" and parts[5] == key:
                    holders.add(int(parts[4]))
    except (OSError, ValueError):
        pass
    return holders


def process_alive(pid: object, start_ticks: object = None, *, require_start: bool = False) -> bool:
    """Whether ``pid`` runs (not a zombie) and, when ``start_ticks`` is known, is the same
    process that recorded it rather than a later one that reused the pid. ``require_start``:
    a record without a start time counts as not alive (it cannot tell the pid apart)."""
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        return False
    if require_start and (isinstance(start_ticks, bool) or not isinstance(start_ticks, int)):
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
    # What the last ``metrics()`` skipped: torn lines and rows of the wrong types, for the app to show.
    skipped_metrics: list[str] = field(default_factory=list, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.path = Path(self.path)

    @property
    def name(self) -> str:
        """The folder's name; for a sweep's cell ``<sweep>/<cell>``, its path under the
        checkpoints root, so every page tells the cells of two sweeps apart."""
        if self.path.name != SWEEP_RECORD and is_sweep_folder(self.path.parent):
            return f"{self.path.parent.name}/{self.path.name}"
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
    def manifest_path(self) -> Path:
        return self.path / MANIFEST_FILE

    @property
    def lock_path(self) -> Path:
        return self.path / LOCK_FILE

    @property
    def notes_path(self) -> Path:
        return self.path / NOTES_FILE

    def exists(self) -> bool:
        return self.config_path.exists()

    # --- reading ------------------------------------------------------------
    # Every read goes through xlviz.confined: the file must be a regular file inside this
    # folder (no symlink, FIFO or device) and at most the size of xlviz.limits.
    def _read_json(self, path: Path, what: str, max_bytes: int = limits.RUN_JSON_MAX_BYTES) -> Any:
        return confined.read_json(path, root=self.path, max_bytes=max_bytes, what=what)

    def config(self) -> dict:
        config = self._read_json(self.config_path, "run config")
        if not isinstance(config, dict):
            raise XlvizError(f"expected a JSON object, got {type(config).__name__}", path=self.config_path)
        return config

    def status(self) -> dict:
        if not os.path.lexists(self.status_path):
            return {"state": "pending", "stages_done": []}
        status = self._read_json(self.status_path, "run status")
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
        skipped: list[str] = []
        for row in self._metrics_rows(skipped):
            if (problem := metric_row_problem(row)) is not None:
                skipped.append(problem)
                continue
            rows = by_stage.setdefault(row["stage"], [])
            step = row.get("step")
            if (not all_attempts and rows and isinstance(step, (int, float)) and isinstance(rows[-1].get("step"), (int, float))
                    and step <= rows[-1]["step"]):
                rows.clear()
            rows.append(row)
        self.skipped_metrics = skipped
        return [r for rows in by_stage.values() for r in rows]

    def _metrics_rows(self, skipped: list[str]) -> Iterator[object]:
        """The complete JSON lines of ``metrics.jsonl``, read confined and bounded; a torn line
        (a kill mid-write) or one naming a key twice is skipped and described in ``skipped``."""
        if not os.path.lexists(self.metrics_path):
            return
        data = confined.read_text(self.metrics_path, root=self.path, max_bytes=limits.METRICS_MAX_BYTES, what="metrics")
        yield from parse_jsonl(data.splitlines(), skipped)

    def results(self) -> list[dict]:
        if not os.path.lexists(self.results_path):
            return []
        rows = self._read_json(self.results_path, "run results", limits.RESULTS_MAX_BYTES)
        if not isinstance(rows, list):
            raise XlvizError("expected a list of result rows", path=self.results_path)
        for i, r in enumerate(rows):
            if not isinstance(r, dict) or not isinstance(r.get("system"), str) or not isinstance(r.get("language"), str):
                raise XlvizError(f"row {i} must be an object with 'system' and 'language'", path=self.results_path, field=f"[{i}]")
        return rows

    def verdicts(self) -> dict[str, dict]:
        """``{stage: verdict}`` of the stages judged so far (:mod:`xlviz.training.verdicts`):
        ``{"verdict": "ok" | "degenerate" | "unjudged", "kind", "reason", ...numbers}``."""
        if not os.path.lexists(self.verdicts_path):
            return {}
        verdicts = self._read_json(self.verdicts_path, "stage verdicts")
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

    def notes(self) -> dict:
        """The researcher's note and tags (``notes.json``): ``{"note": str, "tags": [str]}``,
        empty when there are none. Kept apart from the run's own files, so annotating a
        running run never races its writer."""
        if not os.path.lexists(self.notes_path):
            return {"note": "", "tags": []}
        data = self._read_json(self.notes_path, "run notes")
        if not isinstance(data, dict):
            raise XlvizError(f"expected a JSON object, got {type(data).__name__}", path=self.notes_path)
        return {"note": check_note(data.get("note", ""), path=self.notes_path),
                "tags": check_tags(data.get("tags", []), path=self.notes_path)}

    def write_notes(self, *, note: str | None = None, tags: list[str] | None = None) -> dict:
        """Replace the note and/or the tags (None keeps the current one); atomic, inside the run."""
        current = self.notes()
        if note is not None:
            current["note"] = check_note(note)
        if tags is not None:
            current["tags"] = check_tags(tags)
        atomic_write_json(self.notes_path, current, root=self.path)
        return current

    def lock_record(self) -> tuple[int, int | None, list[str] | None] | None:
        """``(pid, start ticks, command line)`` written into ``.writer.lock`` by its holder, or
        None when there is no readable record (a symlink, a FIFO, garbage)."""
        if not os.path.lexists(self.lock_path):
            return None
        try:
            text = confined.read_text(self.lock_path, root=self.path, max_bytes=limits.RECORD_MAX_BYTES, what="writer lock")
            first, _, rest = text.partition("\n")
            parts = first.split()
            pid = int(parts[0])
            ticks = int(parts[1]) if len(parts) > 1 and parts[1] != "None" else None
            cmdline = json.loads(rest) if rest.strip() else None
        except (XlvizError, ValueError, IndexError, RecursionError):
            return None
        if not (isinstance(cmdline, list) and all(isinstance(a, str) for a in cmdline)):
            cmdline = None
        return pid, ticks, cmdline

    def writer_pid(self) -> int | None:
        """The pid of the live process writing this run, if any. The lock file's record is
        only a claim: the process must be alive with the recorded start time (a record
        without one counts as not alive), run the recorded command line, and hold the flock
        on this very lock file. No lock is taken."""
        record = self.lock_record()
        if record is None:
            return None
        pid, ticks, cmdline = record
        if pid == os.getpid() or not process_alive(pid, ticks, require_start=True):
            return None
        if cmdline is not None and process_cmdline(pid) != cmdline:
            return None
        try:
            fd = os.open(self.lock_path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            return None
        try:
            return pid if pid in flock_holders(fd) else None
        finally:
            os.close(fd)

    def writer_gone(self) -> bool:
        """Whether the process that took this run's writer lock has ended: ``.writer.lock`` is a
        regular file in the run and no process holds its ``flock`` (the OS drops it when the
        holder dies, however it dies: the out-of-memory killer, SIGKILL, a power cut). False
        when it cannot be told (no lock file, no ``/proc/locks``)."""
        if not os.path.exists("/proc/locks"):
            return False
        try:
            fd = os.open(self.lock_path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            return False
        try:
            import stat as _stat

            return _stat.S_ISREG(os.fstat(fd).st_mode) and not flock_holders(fd)
        finally:
            os.close(fd)

    def live_status(self) -> dict:
        """:meth:`status` as a reader should show it: a run whose ``status.json`` still says
        ``running`` while its writer is gone (:meth:`writer_gone`: killed by the system, say)
        is ``failed`` with :data:`KILLED` as its error. Derived at each read, never written
        (the writer itself reads :meth:`status`, which stays what the file says)."""
        status = self.status()
        if status.get("state") == "running" and self.writer_gone():
            return {**status, "state": "failed", "error": KILLED, "killed": True}
        return status

    def log_tail(self, n: int = 40) -> str:
        """The last ``n`` lines of ``log.txt`` (at most its last bytes, see xlviz.limits); a
        log that cannot be read safely (a symlink, a FIFO) gives one line saying why."""
        if not os.path.lexists(self.log_path):
            return ""
        try:
            data = confined.read_tail(self.log_path, root=self.path, max_bytes=limits.LOG_TAIL_MAX_BYTES, what="log")
        except XlvizError as e:
            return f"(log not shown: {e})\n"
        return "".join(data.decode("utf-8", errors="replace").splitlines(keepends=True)[-n:])

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
            # pid, start time and command line: what Cancel checks before it signals anything
            cmdline = json.dumps(process_cmdline(os.getpid()))
            cmdline = cmdline if len(cmdline) < limits.RECORD_MAX_BYTES // 2 else "null"  # the flock still proves it
            record = f"{os.getpid()} {process_start_ticks(os.getpid())}\n{cmdline}\n"
            os.pwrite(fd, record.encode(), 0)
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

    def mark_stage_done(self, stage: str, seconds: float | None = None) -> None:
        """Record ``stage`` as done and, when given, its wall time (``stage_seconds``: what a
        stage costs, for the benchmarks and the census, without reading the log)."""
        check_stage(stage)
        status = self.status()
        done = list(status.get("stages_done", []))
        if stage not in done:
            done.append(stage)
        fields: dict[str, Any] = {"stages_done": done}
        if seconds is not None:
            fields["stage_seconds"] = {**status.get("stage_seconds", {}), stage: round(float(seconds), 1)}
        self.update_status(**fields)

    def stage_seconds(self) -> dict[str, float]:
        """Each finished stage's wall time in seconds, as its run recorded it (runs written
        before this was recorded: none)."""
        raw = self.status().get("stage_seconds", {})
        return {k: float(v) for k, v in raw.items() if isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool)} \
            if isinstance(raw, dict) else {}

    def unmark_stages(self, stages: list[str]) -> None:
        """Forget that ``stages`` are done, so that a resume runs them again (the scoring stages,
        when a run's task list grew after they ran)."""
        drop = set(stages)
        status = self.status()
        self.update_status(stages_done=[s for s in status.get("stages_done", []) if s not in drop])

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

    def record_artefacts(self, entries: list[dict]) -> None:
        """Add manifest entries (:func:`record_artefacts`); the lock holder only."""
        record_artefacts(self, entries)

    def write_results(self, rows: list[dict]) -> None:
        atomic_write_json(self.results_path, rows, root=self.path)

    def add_results(self, rows: list[dict]) -> None:
        """Merge rows by (system, language), replacing older rows for the same pair."""
        merged = {(r["system"], r["language"]): r for r in self.results()}
        for r in rows:
            merged[(r["system"], r["language"])] = r
        self.write_results(list(merged.values()))


def check_note(value: object, *, path: str | os.PathLike | None = None) -> str:
    """A run's note: plain text (shown as text, never markdown), at most NOTE_MAX characters."""
    if not isinstance(value, str):
        raise XlvizError(f"a note must be text, got {type(value).__name__}", path=path, field="note")
    if len(value) > NOTE_MAX:
        raise XlvizError(f"a note may have at most {NOTE_MAX} characters, got {len(value)}", path=path, field="note")
    return value


def check_tags(value: object, *, path: str | os.PathLike | None = None) -> list[str]:
    """A run's tags: short names (letters, digits, '-', '_'), each once, in the order given."""
    if not isinstance(value, (list, tuple)):
        raise XlvizError(f"tags must be a list, got {type(value).__name__}", path=path, field="tags")
    tags = list(dict.fromkeys(check_name(t.strip() if isinstance(t, str) else t, field="tags", path=path, what="tag",
                                         max_len=TAG_MAX) for t in value))
    if len(tags) > TAGS_MAX:
        raise XlvizError(f"at most {TAGS_MAX} tags, got {len(tags)}", path=path, field="tags")
    return tags


# --- what is a run: the one rule every command and page that lists, deletes, archives, notes,
# tags or resumes a folder applies (a home folder, a model folder or a link is never taken for one)
MODEL_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json",
                 "tf_model.h5", "flax_model.msgpack")
# the records xlviz writes into a run folder: one of them (or a config.json that is not a model's)
# says xlviz made it; a folder with neither (``~/Documents``) is no run
RUN_MARKS = ("config.json", "status.json", "manifest.json", LOCK_FILE, "job.json")


def model_folder_problem(path: str | os.PathLike) -> str | None:
    """Why ``path`` is a model folder (its weights, or a ``config.json`` with a ``model_type``
    or ``architectures``: a Hugging Face model's), else None. A run keeps its models in
    sub-folders, never weights or a model config at its top."""
    path = Path(path)
    for name in MODEL_WEIGHTS:
        if os.path.lexists(path / name):
            return f"is a model folder (it holds {name}), not a run"
    if os.path.lexists(path / "config.json"):
        try:
            cfg = confined.read_json(path / "config.json", root=path, max_bytes=limits.RUN_JSON_MAX_BYTES, what="config")
        except XlvizError:
            return None
        if isinstance(cfg, dict) and ("model_type" in cfg or "architectures" in cfg):
            kind = one_line(cfg.get("model_type", "model"))[:40]
            return f"is a model folder (its config.json is a {kind} model's), not a run"
    return None


def _made_by_xlviz(path: Path) -> bool:
    """One of xlviz's run records is there (:data:`RUN_MARKS`). A ``config.json`` counts once
    :func:`model_folder_problem` has ruled out a model's; one that cannot be read (a FIFO,
    torn JSON) still marks a run, shown as unreadable so it can be deleted."""
    return any(os.path.lexists(path / name) for name in RUN_MARKS)


def _same(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def check_run_folder(path: str | os.PathLike) -> Path:
    """``path`` if it is a run folder xlviz made, else an XlvizError naming why not: a real
    folder (never a link), not a model folder (:func:`model_folder_problem`), holding one of
    xlviz's run records (:data:`RUN_MARKS`). What it is, not where it is: :func:`run_kind`
    adds where (resume needs only that it lies in the root)."""
    import stat as _stat

    path = Path(path)
    try:
        st_ = os.lstat(path)
    except FileNotFoundError:
        raise XlvizError("not a run folder: no such folder", path=path, field="run") from None
    except OSError as e:
        raise XlvizError(f"cannot read it: {e.strerror or e}", path=path, field="run") from None
    if _stat.S_ISLNK(st_.st_mode):
        raise XlvizError("is a symbolic link, not a run folder; remove it by hand", path=path, field="run")
    if not _stat.S_ISDIR(st_.st_mode):
        raise XlvizError("is not a folder", path=path, field="run")
    problem = model_folder_problem(path)
    if problem:
        raise XlvizError(f"{problem}; xlviz manages only the runs it made", path=path, field="run")
    if not _made_by_xlviz(path):
        raise XlvizError("is not a run made by xlviz (no config.json, status.json, manifest.json or job record); "
                         "refusing to touch it", path=path, field="run")
    return path


def run_kind(path: str | os.PathLike, root: str | os.PathLike | None) -> str:
    """``"run"``, ``"cell"`` (a run in a sweep folder) or ``"sweep"`` (a sweep folder) for a
    folder xlviz may list, delete, archive, note or tag, else an XlvizError naming why not.
    The rule: directly in the checkpoints ``root`` (a cell: in a sweep folder there, itself a
    real folder), no dot-name, and :func:`check_run_folder` (a real folder xlviz made, not a
    link or a model folder); a sweep folder holds ``sweep/sweep.json``."""
    root = checkpoints_root(root)
    path = Path(path)
    if os.path.islink(path):
        check_run_folder(path)  # the link's own line
    if path.name.startswith(".") or path.name in ("", "..") or any(c < " " for c in path.name):
        raise XlvizError("is not a run folder (a hidden or odd name)", path=path, field="run")
    parent = path.parent
    if _same(parent, root):
        kind = "run"
    elif (_same(parent.parent, root) and not parent.is_symlink() and not parent.name.startswith(".")
          and is_sweep_folder(parent) and path.name != SWEEP_RECORD):
        kind = "cell"
    else:
        raise XlvizError(f"is not directly in the checkpoints root {os.path.realpath(root)} (nor a sweep's cell there); "
                         "refusing to touch it", path=path, field="run")
    if kind == "run" and path.is_dir() and is_sweep_folder(path) and not (path / "config.json").exists():
        return "sweep"
    check_run_folder(path)
    return kind


def is_run(path: str | os.PathLike, root: str | os.PathLike | None) -> bool:
    """Whether :func:`run_kind` takes ``path`` for a run or a sweep's cell (what listings show)."""
    try:
        return run_kind(path, root) in ("run", "cell")
    except XlvizError:
        return False


def run_folder(root: str | os.PathLike | None, name: object, *, sweeps: bool = False) -> Path:
    """The run folder ``name`` in the checkpoints ``root`` (``<sweep>/<cell>`` for a sweep's
    cell; with ``sweeps``, a sweep folder too), checked by :func:`run_kind`: a name (no '..',
    no leading '.'), a real folder made by xlviz, never a link or a model folder."""
    root = checkpoints_root(root)
    parts = name.split("/") if isinstance(name, str) else []
    if (not parts or len(parts) > 2 or any(not p or p.startswith(".") or "\\" in p or any(c < " " for c in p) for p in parts)):
        raise XlvizError(f"not a run name: {one_line(name)!r}", path=root, field="run")
    path = root.joinpath(*parts)
    kind = run_kind(path, root)
    if kind == "sweep" and not sweeps:
        raise XlvizError("is a sweep folder; name one of its cells (<sweep>/<cell>)", path=path, field="run")
    return path


def delete_run_folder(path: Path) -> None:
    """Remove a run folder checked by :func:`run_folder`. ``shutil.rmtree`` removes links inside
    it as links (it never follows them) and, on Linux, works through file descriptors so a
    folder swapped for a link midway is not followed either."""
    import shutil

    if os.path.islink(path):
        raise XlvizError("is a symbolic link, not a run folder", path=path, field="run")
    try:
        shutil.rmtree(path)
    except OSError as e:
        raise XlvizError(f"cannot delete the run: {e.strerror or e}", path=path, field="run") from None


def archive_run_folder(path: Path) -> Path:
    """Move a run folder checked by :func:`run_folder` into ``<root>/.archive/`` (a suffix
    ``-2``, ``-3``... when an archived run has its name); listings skip dot-folders, so it
    leaves the app and the CLI's lists but nothing is lost. Returns the new path."""
    archive = path.parent / ARCHIVE_DIR
    if os.path.islink(archive) or (archive.exists() and not archive.is_dir()):
        raise XlvizError("the archive is not a folder (or is a link)", path=archive, field="run")
    archive.mkdir(exist_ok=True)
    for n in range(1, 10_000):
        dest = archive / (path.name if n == 1 else f"{path.name}-{n}")
        if os.path.lexists(dest):
            continue
        try:
            os.rename(path, dest)  # same filesystem: atomic, never a half-moved run
        except OSError as e:
            raise XlvizError(f"cannot archive the run: {e.strerror or e}", path=path, field="run") from None
        return dest
    raise XlvizError("no free name in the archive", path=archive, field="run")


METRIC_NUMBERS = ("loss", "elapsed", "lr")


def metric_row_problem(row: object) -> str | None:
    """Why a ``metrics.jsonl`` row cannot be drawn (``stage`` a name, ``step`` an integer, the
    numbers numbers), else None. Such rows are skipped and reported (``Run.skipped_metrics``),
    never passed on to break a chart."""
    if not isinstance(row, dict):
        return f"a row that is not an object: {str(row)[:40]}"
    if not isinstance(row.get("stage"), str):
        return f"field 'stage' must be a stage name, got {str(row.get('stage'))[:40]}"
    step = row.get("step")
    if isinstance(step, bool) or not isinstance(step, int):
        return f"field 'step' must be an integer, got {str(step)[:40]}"
    for key in METRIC_NUMBERS:
        value = row.get(key)
        if key in row and (isinstance(value, bool) or not isinstance(value, (int, float))):
            return f"field '{key}' must be a number, got {str(value)[:40]}"
        if key in row and not math.isfinite(value):  # 1e400 reads as inf: a chart cannot draw it
            return f"field '{key}' must be a finite number, got {value}"
    return None


def is_sweep_folder(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a sweep's folder: its record ``sweep/sweep.json`` is a regular file."""
    record = Path(path) / SWEEP_RECORD / SWEEP_FILE
    return os.path.isfile(record) and not os.path.islink(record)


def sweep_cells(folder: str | os.PathLike) -> list[Path]:
    """The cell run folders of a sweep folder that have begun (a ``config.json``), by name."""
    folder = Path(folder)
    if not is_sweep_folder(folder):
        return []
    return sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink() and not p.name.startswith(".")
                  and p.name != SWEEP_RECORD and (p / "config.json").exists())


def list_runs(root: str | os.PathLike | None = None) -> list[Run]:
    """All run folders under the checkpoints root, newest first, the cells of its sweep folders
    (``<root>/<sweep>/<cell>``, named ``<sweep>/<cell>``) among them. Only what :func:`run_kind`
    takes for a run: a link (to elsewhere or not), a model folder or a folder xlviz did not
    make is skipped, so nothing outside is read, resumed or deleted from a listing."""
    root = checkpoints_root(root)
    if not root.exists():
        return []
    folders = []
    for p in root.iterdir():
        if not p.is_dir() or p.name.startswith("."):
            continue
        if (p / "config.json").exists():
            folders.append(p)
        elif is_sweep_folder(p):
            folders += sweep_cells(p)
    # the one rule (run_kind): no link, no model folder, nothing xlviz did not make
    runs = [Run(p) for p in folders if is_run(p, root)]

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


def resume_dir(run_dir: str | os.PathLike, root: str | os.PathLike) -> Path:
    """A ``--resume`` folder that resolves inside the checkpoints ``root``: a run folder that is
    (or lies under) a symlink to elsewhere must not carry a resumed run's writes out of it."""
    text = str(run_dir)
    if not confined.inside(root, text) or os.path.realpath(text) == os.path.realpath(root):
        raise XlvizError(f"resolves to {os.path.realpath(text)}, outside the checkpoints root {os.path.realpath(root)}; "
                         "pass --out (or set XLVIZ_CHECKPOINTS) to the folder that holds the run", path=text, field="--resume")
    try:  # a model folder, a link, a folder xlviz did not make: nothing is written into it
        check_run_folder(text)
    except XlvizError as e:
        raise XlvizError(e.message, path=text, field="--resume") from None
    return Path(text)


def explicit_run_dir(run_dir: str | os.PathLike, root: str | os.PathLike, config: dict) -> Path:
    """A ``--run-dir`` checked before anything is written: inside the checkpoints ``root``, no
    '..', no newline, a valid name (:func:`xlviz.names.check_run_dir`), and not an existing
    run with other settings (:func:`check_same_settings`)."""
    from xlviz.names import check_run_dir

    path = check_run_dir(run_dir, root)
    if path.exists() and not path.is_dir():
        raise XlvizError("exists and is not a folder", path=path, field="--run-dir")
    # what the app leaves in a folder whose job never wrote its config (started, maybe cancelled, maybe annotated)
    app_files = (LOCK_FILE, ".job-start.lock", "job.json", "job-output.txt", NOTES_FILE)
    if path.is_dir() and not Run(path).exists() and any(p.name not in app_files for p in path.iterdir()):
        raise XlvizError("is a folder with other files in it, not a run folder; choose a new or empty folder",
                         path=path, field="--run-dir")
    check_same_settings(path, config)
    return path


# --- the artefact manifest ----------------------------------------------------------------
# ``manifest.json`` lists the model folders and files a run's stages wrote: QA exports, encoders,
# saved predictions and trained stage folders, each with what it is (system, language, role,
# setting, the stage that wrote it). Readers ask these functions instead of parsing folder
# names; the names themselves are made here too (:func:`artefact_relpath`), so the string
# protocol ``export/<system>-<lang>`` lives in one module. A run written before the manifest
# existed is read from its folders by :func:`legacy_artefacts`, the only parser of those names.

MANIFEST_FILE = "manifest.json"
MANIFEST_VERSION = 1
KINDS = ("export", "encoder", "predictions", "stage", "dictionary", "encodings", "analysis", "world", "tokenizer", "qa", "parallel")
# the folders each kind lives in (a stage folder lies directly in the run)
KIND_DIRS = {"export": "export", "encoder": "encoders", "predictions": "predictions"}
ROLES = ("qa", "l1-encoder", "l2-encoder", "predictions", "pretrained", "transferred", "finetuned", "dictionary", "encodings", "analysis")
DICTIONARY_DIR = "dictionaries"  # dictionaries/<l1>-<l2>.json: a bilingual dictionary a run induced (language: L2, pair: L1)
# encodings/<key>.safetensors: an encoder's vectors of the run's parallel pairs (xlviz.analysis.encodings), the
# key a digest of what they are; their metadata says which model, texts and settings, so no reader needs the name
ENCODINGS_DIR = "encodings"
# analyses/<name>-<key>.<json|csv>: a set-level analysis table of the run (slices, patching), the key a digest
# of its inputs; the JSON's own "request" says what it was computed from, so a reader matches that
ANALYSES_DIR = "analyses"
ANALYSIS_EXTS = ("json", "csv")
ENTRY_TEXT_FIELDS = ("system", "language", "role", "setting", "pair", "variant", "stage", "split")
# The world stage's files that readers open, under world/ (written by xlviz.methods.common's world stage,
# xlviz.data.world.World.save, and on a corpus source xlviz.methods.corpus): ``world`` the generated world's
# description (world/world.json: a reader regenerates the world from it), ``tokenizer`` one language's
# vocabulary (world/tokenizers/<language>), ``qa`` a QA set (world/qa/<split>.<language>.json), ``parallel``
# the evaluation pairs L1-L2 (world/parallel/<pair>-<language>.jsonl: language the L2, pair the L1). The
# fields each needs besides its path:
WORLD_DIR = "world"
WORLD_KINDS = {"world": (), "tokenizer": ("language",), "qa": ("language", "split"), "parallel": ("language", "pair")}
WORLD_STAGE = "world"  # the stage that writes them (on the world and on a corpus source alike)
# ``depends_on``: the training stages the artefact's weights come from (itself included for a
# stage folder), so a reader can refuse one built on a degenerate stage (the run's verdicts);
# absent in runs written before it was recorded
DEPENDS_MAX = 200
PAIR_MARK = "@"  # encoders/<system>@<l2>-<l1>: the L1 encoder of a pair model's <l2> pair
_PATH_PART_MAX = 200
SCORING_STAGE_PREFIX = "s4_"  # the stage that scores one system (xlviz finetune-qa: one evaluation language)


def scoring_stage(subject: str) -> str:
    """The name a scoring stage has on disk (status.json, manifest.json, metrics.jsonl, the
    log): ``s4_<system>`` (``xlviz finetune-qa``: ``s4_<language>``). The one place it is
    spelt: runs keep their stages typed and ask here for the name."""
    return SCORING_STAGE_PREFIX + subject


NAME_MAX_LEN = 64


@dataclass(frozen=True)
class Artefact:
    """One manifest entry: ``kind`` (export, encoder, predictions, stage), ``path`` relative to
    the run, and what it holds. ``pair``: the L2 whose pair model an L1 encoder comes from;
    ``variant``: a stage's variant (``pos``, ``noise``, ``adapters``)."""

    kind: str
    path: str
    system: str | None = None
    language: str | None = None
    role: str | None = None
    setting: str | None = None
    pair: str | None = None
    variant: str | None = None
    stage: str | None = None
    split: str | None = None  # a QA set's split (train, dev, test)
    depends_on: tuple[str, ...] | None = None  # None: not recorded (a run written before it was)
    run_path: Path | None = field(default=None, compare=False, repr=False)

    @property
    def folder(self) -> Path:
        """Where it lies: the run folder joined with ``path``."""
        return Path(self.run_path or ".").joinpath(*self.path.split("/"))

    @property
    def name(self) -> str:
        """The system as the app names it: a pair model's L1 encoder is ``<system>@<l2>``."""
        return f"{self.system}{PAIR_MARK}{self.pair}" if self.pair else str(self.system or self.path)

    def to_dict(self) -> dict:
        out = {"kind": self.kind, "path": self.path}
        out.update({k: getattr(self, k) for k in ENTRY_TEXT_FIELDS if getattr(self, k) is not None})
        if self.depends_on is not None:
            out["depends_on"] = list(self.depends_on)
        return out


def world_relpath(kind: str, *, language: str | None = None, split: str | None = None, pair: str | None = None) -> str:
    """The path of one of the world stage's files inside the world folder (``world.json``,
    ``tokenizers/<language>``, ``qa/<split>.<language>.json``, ``parallel/<pair>-<language>.jsonl``):
    what :meth:`xlviz.data.world.World.save` writes there (it is handed the folder, not the run)."""
    if kind == "world":
        return "world.json"
    if kind not in WORLD_KINDS:
        raise XlvizError(f"not a kind of the world's files: {kind!r}; they are {list(WORLD_KINDS)}", field="kind")
    language = check_name(language, field="language", what="language code")
    if kind == "tokenizer":
        return f"tokenizers/{language}"
    if kind == "qa":
        return f"qa/{check_name(split, field='split', what='split')}.{language}.json"
    return f"parallel/{check_name(pair, field='pair', what='language code')}-{language}.jsonl"


def artefact_relpath(kind: str, system: str | None = None, language: str | None = None, *, pair: str | None = None,
                     stage: str | None = None, key: str | None = None, split: str | None = None) -> str:
    """The path (relative to the run) an artefact is written to: ``export/<system>-<lang>``,
    ``encoders/<system>-<lang>`` (``<system>@<pair>-<lang>``), ``predictions/<system>-<lang>.json``,
    ``dictionaries/<pair>-<language>.json`` (an induced L1-L2 dictionary),
    ``encodings/<key>.safetensors`` (stored vectors, ``key`` a hex digest), the stage's own
    folder, or one of the world's files (``world/`` + :func:`world_relpath`). The writer
    records it in the manifest; readers never rebuild it."""
    if kind in WORLD_KINDS:
        return f"{WORLD_DIR}/{world_relpath(kind, language=language, split=split, pair=pair)}"
    if kind == "stage":
        return check_stage(stage, field="stage")
    if kind == "encodings":
        if not isinstance(key, str) or not 8 <= len(key) <= NAME_MAX_LEN or any(c not in "0123456789abcdef" for c in key):
            raise XlvizError(f"an encodings key must be a hex digest, got {one_line(key)[:80]!r}", field="key")
        return f"{ENCODINGS_DIR}/{key}.safetensors"
    if kind == "analysis":
        name, _, ext = (key or "").rpartition(".")
        if (ext not in ANALYSIS_EXTS or not 1 <= len(name) <= NAME_MAX_LEN
                or any(c not in "0123456789abcdefghijklmnopqrstuvwxyz-" for c in name)):
            raise XlvizError(f"an analysis file is <name>-<key>.json or .csv (lower-case letters, digits, '-'), "
                             f"got {one_line(key)[:80]!r}", field="key")
        return f"{ANALYSES_DIR}/{name}.{ext}"
    if kind == "dictionary":
        l1 = check_name(pair, field="pair", what="language code")
        return f"{DICTIONARY_DIR}/{l1}-{check_name(language, field='language', what='language code')}.json"
    if kind not in KIND_DIRS:
        raise XlvizError(f"unknown artefact kind {kind!r}; kinds are {list(KINDS)}", field="kind")
    system = check_stage(system, field="system")
    language = check_name(language, field="language", what="language code")
    name = f"{system}{PAIR_MARK}{check_name(pair, field='pair', what='language code')}" if pair else system
    return f"{KIND_DIRS[kind]}/{name}-{language}" + (".json" if kind == "predictions" else "")


def _check_entry(raw: object, i: int, path: Path) -> dict:
    """One manifest entry checked: an object with a known ``kind``, a plain relative ``path``
    (no '..', no absolute path, no control character) and text (or null) fields."""
    where = f"artefacts[{i}]"
    if not isinstance(raw, dict):
        raise XlvizError(f"an entry must be an object, got {type(raw).__name__}", path=path, field=where)
    if raw.get("kind") not in KINDS:
        raise XlvizError(f"unknown kind {str(raw.get('kind'))[:40]!r}; kinds are {list(KINDS)}", path=path, field=f"{where}.kind")
    rel = raw.get("path")
    parts = rel.split("/") if isinstance(rel, str) else []
    if (not parts or len(rel) > 4 * _PATH_PART_MAX
            or any(not p or p in (".", "..") or len(p) > _PATH_PART_MAX or "\\" in p or any(c < " " or c == "\x7f" for c in p)
                   for p in parts)):
        raise XlvizError(f"must be a plain path relative to the run (no '..', not absolute), got {one_line(rel)[:80]!r}",
                         path=path, field=f"{where}.path")
    out = {"kind": raw["kind"], "path": rel}
    for key in ENTRY_TEXT_FIELDS:
        value = raw.get(key)
        if value is not None and (not isinstance(value, str) or len(value) > 2 * NAME_MAX_LEN or any(c < " " for c in value)):
            raise XlvizError(f"must be a short text or null, got {one_line(value)[:40]!r}", path=path, field=f"{where}.{key}")
        if value is not None:
            out[key] = value
    deps = raw.get("depends_on")
    if deps is not None:
        if (not isinstance(deps, list) or len(deps) > DEPENDS_MAX
                or any(not isinstance(d, str) or not d or len(d) > 2 * NAME_MAX_LEN or any(c < " " for c in d) for d in deps)):
            raise XlvizError(f"must be a list of at most {DEPENDS_MAX} stage names, got {one_line(deps)[:60]!r}",
                             path=path, field=f"{where}.depends_on")
        out["depends_on"] = list(deps)
    if raw["kind"] in KIND_DIRS and (out.get("system") is None or out.get("language") is None):
        missing = "system" if out.get("system") is None else "language"
        raise XlvizError(f"an {raw['kind']} entry needs its {missing}", path=path, field=f"{where}.{missing}")
    missing = next((k for k in WORLD_KINDS.get(raw["kind"], ()) if out.get(k) is None), None)
    if missing is not None:
        raise XlvizError(f"a {raw['kind']} entry needs its {missing}", path=path, field=f"{where}.{missing}")
    return out


def parse_manifest(data: object, path: Path) -> list[dict]:
    """The entries of a manifest's JSON, checked (:func:`_check_entry`)."""
    if not isinstance(data, dict):
        raise XlvizError(f"expected a JSON object, got {type(data).__name__}", path=path)
    version = data.get("version")
    if version != MANIFEST_VERSION:
        raise XlvizError(f"unknown manifest version {str(version)[:20]!r} (this xlviz reads {MANIFEST_VERSION})",
                         path=path, field="version")
    entries = data.get("artefacts")
    if not isinstance(entries, list):
        raise XlvizError("expected a list of artefacts", path=path, field="artefacts")
    return [_check_entry(e, i, path) for i, e in enumerate(entries)]


def _run_languages(run: "Run") -> tuple[str, list[str]]:
    """(L1, every language the run names): from its config, then its world's tokenizers. Used
    only to split legacy folder names (a code may itself hold a '-')."""
    try:
        cfg = run.config()
    except XlvizError:
        cfg = {}
    world = cfg.get("world") if isinstance(cfg.get("world"), dict) else {}
    nested = [v for v in cfg.values() if isinstance(v, dict)]
    l1 = next((w[k] for k in ("l1", "source_language", "lang1") for w in (cfg, *nested) if isinstance(w.get(k), str)), "en")
    langs = [l1]
    for where in (cfg, world):
        for key in ("l2", "languages", "target_languages"):
            v = where.get(key)
            items = [v] if isinstance(v, str) else v if isinstance(v, list) else []
            langs += [x if isinstance(x, str) else x.get("code") for x in items
                      if isinstance(x, str) or (isinstance(x, dict) and isinstance(x.get("code"), str))]
    tok = run.path / WORLD_DIR / "tokenizers"
    if tok.is_dir() and not tok.is_symlink():
        langs += sorted(p.name for p in tok.iterdir() if p.is_dir() and not p.name.startswith("."))
    return l1, list(dict.fromkeys(langs))


def _split_lang(name: str, langs: list[str]) -> tuple[str, str] | None:
    """``(prefix, language)`` of ``<prefix>-<language>``: a language the run names (longest
    first), else the text after the last '-' (what readers did before the manifest)."""
    for lang in sorted(langs, key=len, reverse=True):
        if name.endswith("-" + lang) and len(name) > len(lang) + 1:
            return name[: -len(lang) - 1], lang
    head, sep, tail = name.rpartition("-")
    return (head, tail) if sep and head and tail else None


def _is_model_dir(p: Path) -> bool:
    return p.is_dir() and not p.is_symlink() and (p / "config.json").is_file()


def legacy_artefacts(run: "Run") -> list[dict]:
    """The manifest of a run written before manifests existed, read from its folder names
    (the one place those names are parsed): ``export/<system>-<lang>``,
    ``encoders/<system>[@<l2>]-<lang>``, ``predictions/<system>-<lang>.json`` and the
    trained stage folders (``s1_pretrain[-<lang>]``, ``s2_transfer-<lang>[-<variant>]``,
    ``s3_finetune[-<variant>]``, any other ``s<n>_...`` model folder)."""
    l1, langs = _run_languages(run)
    settings: dict[tuple[str, str], str] = {}
    try:
        settings = {(r["system"], r["language"]): r["setting"] for r in run.results() if isinstance(r.get("setting"), str)}
    except XlvizError:
        pass
    out: list[dict] = []
    for kind, sub in KIND_DIRS.items():
        root = run.path / sub
        if not root.is_dir() or root.is_symlink():
            continue
        for p in sorted(root.iterdir()):
            if kind == "predictions":
                if not (p.is_file() and p.name.endswith(".json")):
                    continue
                split = _split_lang(p.name[: -len(".json")], langs)
            else:
                split = _split_lang(p.name, langs) if p.is_dir() else None
            if split is None:
                continue
            system, lang = split
            pair = None
            if kind == "encoder" and PAIR_MARK in system:
                system, _, pair = system.partition(PAIR_MARK)
            entry = {"kind": kind, "path": f"{sub}/{p.name}", "system": system, "language": lang, "stage": scoring_stage(system),
                     "role": {"export": "qa", "predictions": "predictions"}.get(kind) or ("l1-encoder" if lang == l1 else "l2-encoder")}
            if kind != "encoder" and (system, lang) in settings:
                entry["setting"] = settings[(system, lang)]
            if pair:
                entry["pair"] = pair
            out.append(entry)
    for p in sorted(run.path.iterdir()) if run.path.is_dir() else []:
        name = p.name
        head, _, rest = name.partition("_")
        if not (len(head) > 1 and head[0] == "s" and head[1:].isdigit() and rest and _is_model_dir(p)):
            continue
        entry = {"kind": "stage", "path": name, "stage": name}
        if name == "s1_pretrain":
            entry.update(role="pretrained", language=l1)
        elif name.startswith("s1_pretrain-"):
            entry.update(role="pretrained", language=name[len("s1_pretrain-"):])
        elif name.startswith("s2_transfer-"):
            tail = name[len("s2_transfer-"):]
            lang = next((l for l in sorted(langs, key=len, reverse=True) if tail == l or tail.startswith(l + "-")),
                        tail.split("-", 1)[0])
            entry.update(role="transferred", language=lang)
            if tail != lang:
                entry["variant"] = tail[len(lang) + 1:]
        elif name == "s3_finetune" or name.startswith("s3_finetune-"):
            entry.update(role="finetuned", language=l1)
            if name != "s3_finetune":
                entry["variant"] = name[len("s3_finetune-"):]
        out.append(entry)
    checked = []
    for i, e in enumerate(out):  # a folder whose name cannot be an entry (a control character) is left out
        try:
            checked.append(_check_entry(e, i, run.manifest_path))
        except XlvizError:
            continue
    return sorted(checked, key=lambda e: e["path"])


def _artefact(entry: dict, run_path: Path) -> Artefact:
    deps = entry.get("depends_on")
    return Artefact(run_path=run_path, **{**entry, "depends_on": None if deps is None else tuple(deps)})


# Parsed manifests and world listings, per state of their files. Every page asks for a run's
# artefacts many times a render (the sidebar's models, each table, each world file), and a
# manifest of a hundred entries took 10-40 ms to read and check each time: up to 2 s of a warm
# page. A state is the files' (device, inode, mtime, size, mode), taken before reading: a run's
# writer replaces manifest.json atomically (a new inode), and adding or removing a file changes
# its folder's mtime, so the next read after any change parses again.
_PARSED_MAX = 256
_MANIFESTS: dict[str, tuple[tuple, list[dict]]] = {}
_WORLD_LISTINGS: dict[str, tuple[tuple, list[dict]]] = {}


def _file_state(*paths: str | os.PathLike) -> tuple:
    """What a cached parse of ``paths`` depends on: each one's lstat (and, for a symbolic link,
    its target's stat), None for a missing one."""
    out = []
    for p in paths:
        try:
            st = os.lstat(p)
        except OSError:
            out.append(None)
            continue
        state = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size, st.st_mode)
        if stat.S_ISLNK(st.st_mode):
            try:
                t = os.stat(p)
                state += (t.st_dev, t.st_ino, t.st_mtime_ns, t.st_size, t.st_mode)
            except OSError:
                state += (None,)
        out.append(state)
    return tuple(out)


def _parsed(cache: dict, key: str, state: tuple, parse) -> list[dict]:
    """``parse()``'s entries, reused while ``state`` is unchanged; copies, so no caller changes
    the cached ones. A parse that raises is not kept (the next read says why again)."""
    hit = cache.get(key)
    if hit is not None and hit[0] == state:
        entries = hit[1]
    else:
        entries = parse()
        if len(cache) >= _PARSED_MAX:
            cache.clear()
        cache[key] = (state, entries)
    return [dict(e) for e in entries]


def _manifest_entries(run: "Run") -> list[dict]:
    """The run's checked manifest entries: ``manifest.json`` (confined, bounded; parsed once per
    state of the file), else its folders read once (:func:`legacy_artefacts`)."""
    if not os.path.lexists(run.manifest_path):
        return legacy_artefacts(run)
    state = _file_state(run.manifest_path)

    def parse() -> list[dict]:
        data = run._read_json(run.manifest_path, "artefact manifest", limits.RESULTS_MAX_BYTES)
        return parse_manifest(data, run.manifest_path)

    return _parsed(_MANIFESTS, os.path.abspath(run.manifest_path), state, parse)


def _split_parallel(stem: str, l1: str | None) -> tuple[str, str] | None:
    """``(l1, l2)`` of a parallel pairs file's stem ``<l1>-<l2>``: the run's L1 first when it
    is known (a code may itself hold a '-'), else at the first '-'."""
    if l1 and stem.startswith(l1 + "-") and len(stem) > len(l1) + 1:
        return l1, stem[len(l1) + 1:]
    a, sep, b = stem.partition("-")
    return (a, b) if sep and a and b else None


def legacy_world_artefacts(run: "Run") -> list[dict]:
    """The world stage's files (:data:`WORLD_KINDS`) of a run whose world stage did not record
    them (it ran before they were recorded), found where it put them: ``world/world.json``,
    ``world/tokenizers/<language>``, ``world/qa/<split>.<language>.json``,
    ``world/parallel/<l1>-<l2>.jsonl`` (the one place those names are parsed). Never written
    into the manifest: read at each look (listed once per state of the world's folders)."""
    root = run.path / WORLD_DIR
    state = _file_state(root, root / "world.json", root / "tokenizers", root / "qa", root / "parallel",
                        run.config_path)
    return _parsed(_WORLD_LISTINGS, os.path.abspath(root), state, lambda: _list_world(run, root))


def _list_world(run: "Run", root: Path) -> list[dict]:
    """:func:`legacy_world_artefacts`, read from the folders."""

    def listed(sub: str) -> list[Path]:
        folder = root / sub
        return sorted(folder.iterdir()) if folder.is_dir() and not folder.is_symlink() else []

    if not root.is_dir() or root.is_symlink():
        return []
    out: list[dict] = []
    if (root / "world.json").is_file():
        out.append({"kind": "world", "path": f"{WORLD_DIR}/world.json"})
    for p in listed("tokenizers"):
        if p.is_dir() and not p.name.startswith("."):
            out.append({"kind": "tokenizer", "path": f"{WORLD_DIR}/tokenizers/{p.name}", "language": p.name})
    for p in listed("qa"):
        split, dot, lang = p.name[: -len(".json")].partition(".") if p.name.endswith(".json") else ("", "", "")
        if p.is_file() and split and dot and lang:
            out.append({"kind": "qa", "path": f"{WORLD_DIR}/qa/{p.name}", "language": lang, "split": split})
    parallel = [p for p in listed("parallel") if p.is_file() and p.name.endswith(".jsonl")]
    l1 = _run_languages(run)[0] if parallel and run.config_path.is_file() else None
    for p in parallel:
        langs = _split_parallel(p.name[: -len(".jsonl")], l1)
        if langs is not None:
            out.append({"kind": "parallel", "path": f"{WORLD_DIR}/parallel/{p.name}", "language": langs[1], "pair": langs[0]})
    checked = []
    for i, e in enumerate(out):  # a name that cannot be an entry (a control character) is left out
        try:
            checked.append(_check_entry({**e, "stage": WORLD_STAGE}, i, run.manifest_path))
        except XlvizError:
            continue
    return checked


def _entries(run: "Run") -> list[dict]:
    """The manifest's entries, with the world's files found in their places when its world
    stage recorded none of them (:func:`legacy_world_artefacts`)."""
    entries = _manifest_entries(run)
    if not any(e["kind"] in WORLD_KINDS for e in entries):
        entries = entries + legacy_world_artefacts(run)
    return entries


def artefacts(run: "Run | str | os.PathLike", kind: str | None = None, *, system: str | None = None,
              language: str | None = None, role: str | None = None, split: str | None = None,
              present: bool = True) -> list[Artefact]:
    """The run's artefacts, optionally of one kind / system / language / role / split, in path
    order. ``present``: only those whose folder or file exists inside the run (a manifest entry
    of a folder deleted by hand, or one that is a symlink out of the run, is left out)."""
    run = run if isinstance(run, Run) else Run(Path(run))
    return _matching(_entries(run), run, kind, system=system, language=language, role=role, split=split, present=present)


def _matching(entries: list[dict], run: "Run", kind: str | None, *, system: str | None = None, language: str | None = None,
              role: str | None = None, split: str | None = None, present: bool = True) -> list[Artefact]:
    wanted = {k: v for k, v in (("kind", kind), ("system", system), ("language", language), ("role", role), ("split", split))
              if v is not None}
    root = os.path.realpath(run.path) if present else ""  # confined.inside's rule, the run's folder resolved once
    out = []
    for e in entries:
        if any(e.get(k) != v for k, v in wanted.items()):
            continue
        a = _artefact(e, run.path)
        if present:
            folder = a.folder
            if not os.path.lexists(folder) or os.path.islink(folder):
                continue
            real = os.path.realpath(folder)
            if not (real == root or real.startswith(root.rstrip(os.sep) + os.sep)):
                continue
        out.append(a)
    return sorted(out, key=lambda a: a.path)


def exports(run: "Run | str | os.PathLike") -> list[Artefact]:
    """The run's QA exports (one per system and language)."""
    return artefacts(run, "export")


def encoders(run: "Run | str | os.PathLike") -> list[Artefact]:
    """The run's encoders (the masked LM reading each language in each system; pair models'
    L1 encoders carry ``pair``)."""
    return artefacts(run, "encoder")


def artefact(run: "Run | str | os.PathLike", kind: str, *, system: str | None = None, language: str | None = None,
             role: str | None = None, pair: str | None = None, variant: str | None = None,
             split: str | None = None) -> Artefact | None:
    """The one artefact of ``kind`` matching the given fields (``pair`` and ``variant`` must
    match exactly: None means none), or None."""
    for a in artefacts(run, kind, system=system, language=language, role=role, split=split):
        if a.pair == pair and a.variant == variant:
            return a
    return None


def owner_of(folder: str | os.PathLike) -> tuple["Run", Artefact] | None:
    """The run and manifest entry of a folder or file inside a run (a stage folder, an
    export, an encoder), or None: what a typed path is, without reading its name."""
    p = Path(os.path.abspath(os.path.expanduser(str(folder))))
    for parent in list(p.parents)[:2]:
        run = Run(parent)
        if not run.config_path.is_file():
            continue
        rel = p.relative_to(parent).as_posix()
        try:  # its entry only, then whether it is present (not every entry's folder)
            found = _matching([e for e in _entries(run) if e["path"] == rel], run, None)
        except XlvizError:
            return None
        return (run, found[0]) if found else None
    return None


def record_artefacts(run: "Run", entries: list[dict]) -> list[dict]:
    """Add (or replace, by path) manifest entries and write ``manifest.json`` atomically: the
    run's writer only (the lock holder, as for results.json). A run written before
    manifests gets its folders' entries first, so the file then lists everything."""
    path = run.manifest_path
    current = {e["path"]: e for e in _manifest_entries(run)}
    for i, e in enumerate(entries):
        checked = _check_entry(e, i, path)
        if checked.get("role") is not None and checked["role"] not in ROLES:  # a writer's typo, caught where it is made
            raise XlvizError(f"unknown role {checked['role']!r}; roles are {list(ROLES)}", path=path, field=f"artefacts[{i}].role")
        current[checked["path"]] = checked
    merged = [current[k] for k in sorted(current)]
    atomic_write_json(path, {"version": MANIFEST_VERSION, "artefacts": merged}, root=run.path)
    return merged



# --- the world's files ----------------------------------------------------------------------
def _world_found(run: "Run", kind: str, *, language: str | None = None, split: str | None = None) -> list[Artefact]:
    """The run's present files of a world ``kind`` matching ``language`` and ``split``. A run
    whose manifest cannot be read (its table says why) is read as one whose world stage
    recorded nothing: the world's files are where that stage puts them."""
    try:
        entries = _entries(run)
    except XlvizError:
        entries = legacy_world_artefacts(run)
    return _matching(entries, run, kind, language=language, split=split)


def world_path(run: "Run | str | os.PathLike", kind: str, *, language: str | None = None, split: str | None = None,
               pair: str | None = None) -> Path:
    """Where the run keeps one of its world stage's files (``kind`` one of :data:`WORLD_KINDS`:
    ``world``, ``tokenizer`` with ``language``, ``qa`` with ``split`` and ``language``,
    ``parallel`` with the L2 as ``language``): its manifest entry, else (a run whose world
    stage did not record it, or a file it never wrote) its conventional place, which may not
    exist: the caller's own check of the file says so, as before. ``pair``: a parallel file's
    L1 (default: the run's)."""
    run = run if isinstance(run, Run) else Run(Path(run))
    if kind not in WORLD_KINDS:
        raise XlvizError(f"not a kind of the world's files: {kind!r}; they are {list(WORLD_KINDS)}", field="kind")
    given = {"language": language, "split": split, "pair": pair}
    missing = [k for k in WORLD_KINDS[kind] if k != "pair" and given[k] is None]
    if missing:
        raise XlvizError(f"a {kind} file is named by its {' and '.join(missing)}", field=missing[0])
    for a in _world_found(run, kind, language=language, split=split):
        if pair is None or a.pair == pair:
            return a.folder
    if kind == "parallel" and pair is None:
        pair = _run_languages(run)[0]
    return run.path.joinpath(*artefact_relpath(kind, language=language, split=split, pair=pair).split("/"))


def world_files(run: "Run | str | os.PathLike", kind: str, *, split: str | None = None) -> dict[str, Path]:
    """``{language: path}`` of the run's present world files of ``kind`` (tokenizers, QA sets
    of ``split``, parallel pairs by L2), by language; empty when it has none."""
    run = run if isinstance(run, Run) else Run(Path(run))
    found = _world_found(run, kind, split=split)
    return {str(a.language): a.folder for a in sorted(found, key=lambda a: str(a.language)) if a.language is not None}


def world_folder(run: "Run | str | os.PathLike") -> Path:
    """The folder of the run's generated world, as :func:`xlviz.data.world.load_world` reads it:
    the folder of its ``world.json`` (:func:`world_path`)."""
    return world_path(run, "world").parent


def parallel_languages(file: str | os.PathLike) -> tuple[str, str]:
    """``(l1, l2)`` of a run's parallel pairs file ``world/parallel/<l1>-<l2>.jsonl``: its
    manifest entry's, else from its name (the run's L1 first when its config names it, so a
    code holding '-' splits right)."""
    p = Path(file)
    stem = p.name[: -len(".jsonl")] if p.name.endswith(".jsonl") else p.stem
    run = Run(p.parent.parent.parent)
    known = run.config_path.is_file()
    for a in _world_found(run, "parallel") if known else []:
        if a.folder == p and a.pair:
            return a.pair, str(a.language)
    langs = _split_parallel(stem, _run_languages(run)[0] if known else None)
    if langs is None:
        raise XlvizError("not a parallel pairs file named <l1>-<l2>.jsonl", path=p)
    return langs


def parallel_files(run_path: str | os.PathLike) -> dict[str, Path]:
    """``{l2: world/parallel/<l1>-<l2>.jsonl}`` of a run (empty when it has none)."""
    return world_files(run_path, "parallel")
