"""Start, watch, cancel and resume CLI jobs for the app.

The app never trains inside a Streamlit script: it starts ``python -m xlviz <command> ...`` as a
detached subprocess (its own session and process group, so it survives app reruns, closed tabs
and app restarts) and watches the run folder. The job's pid, process group and start time go
into ``<run>/job.json`` so a later app process can still tell whether the job is alive and can
cancel it. Cancelling is explicit: terminate the whole process group, then mark the run
``cancelled`` in ``status.json``.

A run folder may come from elsewhere, so its ``job.json`` and ``.writer.lock`` are claims, not
proof: Cancel signals a process only when it is one the app or the CLI started for that run
(:func:`job_pid`, :meth:`xlviz.runs.Run.writer_pid`) and refuses otherwise, naming the pid.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator, Sequence

from xlviz import confined, limits
from xlviz.errors import XlvizError
from xlviz.io import append_line, atomic_write_json, read_json
from xlviz.runs import (SWEEP_RECORD, Run, archive_run_folder, check_run_folder, checkpoints_root, delete_run_folder, now_iso,
                         process_alive, process_cmdline, process_start_ticks, run_folder, run_kind, sweep_cells)

JOB_FILE = "job.json"
OUTPUT_FILE = "job-output.txt"

# Popen handles of jobs started by this process: polled so finished children are reaped
# instead of lingering as zombies while the app keeps running.
_CHILDREN: dict[int, subprocess.Popen] = {}
# Streamlit runs sessions as threads of one process: one start at a time per process, and a
# file lock per run folder against other app processes.
_START_LOCK = threading.Lock()
START_LOCK_FILE = ".job-start.lock"
# Set in the environment of every job start_job starts: the job's run folder (resolved). A
# process whose environment names another folder (or none) was not started for this run.
JOB_RUN_ENV = "XLVIZ_JOB_RUN"


def _proc_start_ticks(pid: int) -> int | None:
    return process_start_ticks(pid)


def reap() -> list[int]:
    """Collect every finished job this process started (``Popen.poll``: ``waitpid`` with
    ``WNOHANG``), so none stays a zombie while the app runs; returns their pids. Only this
    process's own children are waited for, as only they can be."""
    done = []
    for pid, child in list(_CHILDREN.items()):
        if child.poll() is not None:
            _CHILDREN.pop(pid, None)
            done.append(pid)
    return done


@contextlib.contextmanager
def _starting(run_dir: Path) -> Iterator[None]:
    """Exclusive right to start a job for ``run_dir`` (threads of this process and other processes)."""
    with _START_LOCK:
        fd = os.open(run_dir / START_LOCK_FILE, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)


def _proc_state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[-1].split()[0]
    except (OSError, IndexError):
        return None


def job_info(run_dir: str | os.PathLike) -> dict | None:
    """The ``job.json`` written when the app started this run, or None (also when it is not a
    small regular file inside the run folder, or not a JSON object)."""
    path = Path(run_dir) / JOB_FILE
    if not os.path.lexists(path):
        return None
    try:
        info = confined.read_json(path, root=run_dir, max_bytes=limits.RECORD_MAX_BYTES, what="job record")
    except XlvizError:
        return None
    return info if isinstance(info, dict) else None


def _environ_value(pid: int, name: str) -> str | None:
    """``name``'s value in the environment ``pid`` was started with (``/proc/<pid>/environ``)."""
    try:
        with open(f"/proc/{int(pid)}/environ", "rb") as f:
            raw = f.read(4 << 20)
    except (OSError, ValueError):
        return None
    prefix = name.encode() + b"="
    for item in raw.split(b"\0"):
        if item.startswith(prefix):
            return item[len(prefix):].decode("utf-8", "surrogateescape")
    return None


def job_pid(run_dir: str | os.PathLike, info: dict | None = None) -> int | None:
    """The pid of the live job the app started for ``run_dir``, or None.

    ``job.json`` only claims a pid. It is believed when the process is alive with the recorded
    start time (a record without one counts as not alive), runs the recorded command line,
    leads its own process group, and was started with ``XLVIZ_JOB_RUN`` naming this very run
    folder; so a foreign pid (or another run's job) is never taken for this run's job."""
    reap()
    info = job_info(run_dir) if info is None else info
    if not info:
        return None
    pid, ticks = info.get("pid"), info.get("start_ticks")
    if not process_alive(pid, ticks, require_start=True):
        return None
    child = _CHILDREN.get(pid)
    if child is not None and child.poll() is not None:
        _CHILDREN.pop(pid, None)
        return None
    argv = info.get("argv")
    if not isinstance(argv, list) or process_cmdline(pid) != [str(a) for a in argv]:
        return None
    try:
        if os.getpgid(pid) != pid:
            return None
    except OSError:
        return None
    if _environ_value(pid, JOB_RUN_ENV) != os.path.realpath(run_dir):
        return None
    return pid


def claimed_pids(run_dir: str | os.PathLike) -> list[tuple[int, str]]:
    """Live processes that ``job.json`` or ``.writer.lock`` name (verified or not), with the
    file; a recorded start time that differs (the pid was reused since) is no claim."""
    out = []
    info = job_info(run_dir)
    if info and process_alive(info.get("pid"), info.get("start_ticks")):
        out.append((info["pid"], JOB_FILE))
    record = Run(Path(run_dir)).lock_record()
    if record is not None and process_alive(record[0], record[1]):
        out.append((record[0], Run(Path(run_dir)).lock_path.name))
    return out


def check_in_root(run_dir: str | os.PathLike) -> Path:
    """``run_dir`` if it resolves inside the checkpoints root (not a symlink to elsewhere):
    the app starts, resumes and cancels nothing outside it."""
    root = checkpoints_root()
    if not confined.inside(root, run_dir) or os.path.realpath(run_dir) == os.path.realpath(root):
        raise XlvizError(f"the run folder lies outside the checkpoints root {os.path.realpath(root)} (a symbolic link?); "
                         "refusing to touch it", path=run_dir)
    return Path(run_dir)


def command_argv(argv: Sequence[str]) -> list[str]:
    """The full command line for an ``xlviz`` sub-command, using this interpreter."""
    return [sys.executable, "-m", "xlviz", *map(str, argv)]


def start_job(argv: Sequence[str], run_dir: str | os.PathLike, *, env: dict | None = None) -> int:
    """Start ``xlviz <argv>`` detached; record its pid in ``run_dir/job.json``; return the pid.

    stdout and stderr go to ``run_dir/job-output.txt`` so a crash before the run's own log
    starts is still visible in the app.
    """
    run_dir = check_in_root(Path(run_dir))
    run_dir.mkdir(parents=True, exist_ok=True)
    with _starting(run_dir):
        return _start_locked(argv, run_dir, env)


def _start_locked(argv: Sequence[str], run_dir: Path, env: dict | None) -> int:
    if is_alive(run_dir):
        raise XlvizError("a job is already running for this run", path=run_dir)
    holder = Run(run_dir).writer_pid()
    if holder is not None:
        raise XlvizError(f"another process (pid {holder}) is writing this run", path=run_dir)
    full = command_argv(argv)
    try:  # never through a symlink planted in the folder
        out = os.fdopen(os.open(run_dir / OUTPUT_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0),
                                0o644), "ab")
    except OSError as e:
        raise XlvizError(f"cannot open the job's output file: {e.strerror or e}", path=run_dir / OUTPUT_FILE) from None
    try:
        out.write(f"\n$ {' '.join(full)}\n".encode())
        out.flush()
        proc = subprocess.Popen(
            full,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1", JOB_RUN_ENV: os.path.realpath(run_dir)},
            close_fds=True,
        )
    finally:
        out.close()
    _CHILDREN[proc.pid] = proc
    atomic_write_json(
        run_dir / JOB_FILE,
        {
            "pid": proc.pid,
            "pgid": proc.pid,  # start_new_session makes the child its own group leader
            "start_ticks": _proc_start_ticks(proc.pid),
            "argv": full,
            "started": now_iso(),
        },
    )
    return proc.pid


def is_alive(run_dir: str | os.PathLike) -> bool:
    """Whether the job started for ``run_dir`` is still running (not finished, not a zombie,
    and really the job started for this run: :func:`job_pid`)."""
    return job_pid(run_dir) is not None


def cancel(run_dir: str | os.PathLike, *, grace_s: float = 5.0) -> bool:
    """Terminate the job's process group and mark the run cancelled.

    Sends SIGTERM to the group, waits up to ``grace_s`` seconds, then SIGKILL. Returns whether
    a live job was found. The run is marked cancelled either way unless it already finished.
    Only a process started for this run is signalled (:func:`job_pid`, ``Run.writer_pid``):
    when ``job.json`` or ``.writer.lock`` names any other live process, nothing is signalled
    or written and an XlvizError says why.
    """
    run_dir = check_in_root(Path(run_dir))
    info = job_info(run_dir)
    found = False
    job = job_pid(run_dir, info)
    terminal = Run(run_dir).writer_pid() if job is None else None
    if job is None and terminal is None:
        claimed = claimed_pids(run_dir)
        if claimed:
            pid, file = claimed[0]
            raise XlvizError(f"refusing to cancel: process {pid} named in {file} is not a job started for this run "
                             "(its start time, command line or run folder differ); nothing was signalled", path=run_dir)
    if terminal is not None:
        # started from a terminal (no job.json, or an old one): stop the process writing it
        found = True
        _signal_pid(terminal, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and Run(run_dir).writer_pid() == terminal:
            time.sleep(0.1)
        if Run(run_dir).writer_pid() == terminal:
            _signal_pid(terminal, signal.SIGKILL)
    elif job is not None:
        found = True
        pgid = job  # verified: the job leads its own process group
        _signal_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and is_alive(run_dir):
            time.sleep(0.1)
        if is_alive(run_dir):
            _signal_group(pgid, signal.SIGKILL)
            deadline = time.monotonic() + 2.0
            while time.monotonic() < deadline and is_alive(run_dir):
                time.sleep(0.05)
        child = _CHILDREN.pop(job, None)
        if child is not None:
            try:
                child.wait(timeout=1)
            except subprocess.TimeoutExpired:
                pass
    run = Run(run_dir)
    if not run.exists():
        # Cancelled while "starting": the job never wrote its config, so there is no run to
        # mark. Writing status.json or log.txt here would leave a folder that is neither a run
        # nor restartable; the cancel is recorded in job.json instead, and resume starts the
        # recorded command again.
        if info:
            atomic_write_json(run_dir / JOB_FILE, {**info, "cancelled": now_iso()})
            append_line(run_dir / OUTPUT_FILE, f"[{now_iso()}] cancelled from the app before the run wrote its config\n",
                        root=run_dir)
        return found
    status = run.status()
    if status.get("state") != "completed":
        # Written here rather than with Run.update_status, which would record the app's pid.
        status.update(state="cancelled", updated=now_iso(), ended=now_iso())
        atomic_write_json(run.status_path, status)
        run.log("cancelled from the app")
    return found


def _signal_pid(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass
    except PermissionError as e:
        raise XlvizError(f"cannot signal process {pid}: {e}") from None


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass
    except PermissionError as e:
        raise XlvizError(f"cannot signal process group {pgid}: {e}") from None


def resume(run_dir: str | os.PathLike) -> int:
    """Restart a stopped run where it left off: ``xlviz transfer --resume RUN_DIR``; a run
    stopped before it wrote its config starts its recorded command again (:func:`restart_argv`)."""
    run_dir = check_in_root(Path(run_dir))
    check_run_folder(run_dir)  # never a model folder, a link or a folder xlviz did not make
    run = Run(run_dir)
    if not run.exists():
        argv = restart_argv(run_dir)
        if argv is None:
            raise XlvizError("not a run folder (no config.json)", path=run_dir)
        return start_job(argv, run_dir)
    check_resumable_config(run.config(), path=run.config_path)
    return start_job(["transfer", "--resume", str(run_dir)], run_dir)


def restart_argv(run_dir: str | os.PathLike) -> list[str] | None:
    """The ``xlviz`` arguments to start again a job that stopped before writing its config
    (cancelled while starting, killed): the command recorded in ``job.json``, if it is an
    ``xlviz transfer --run-dir RUN_DIR`` for this very folder; else None. Only the arguments
    are reused (never the recorded interpreter), and the transfer command checks them again."""
    run_dir = Path(run_dir)
    info = job_info(run_dir)
    argv = info.get("argv") if isinstance(info, dict) else None
    if Run(run_dir).exists() or is_alive(run_dir) or not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        return None
    if argv[1:3] != ["-m", "xlviz"] or argv[3:4] != ["transfer"] or "--resume" in argv or "--config" in argv:
        return None
    rest = argv[3:]
    try:
        target = rest[rest.index("--run-dir") + 1]
    except (ValueError, IndexError):
        return None
    if Path(target).resolve() != run_dir.resolve():
        return None
    return rest


def can_resume(run_dir: str | os.PathLike) -> bool:
    """Whether the app offers Resume: a stopped, failed or cancelled run with a config, or one
    stopped before writing it whose command can be started again."""
    run = Run(Path(run_dir))
    try:
        check_run_folder(run_dir)
    except XlvizError:
        return False
    if effective_state(run_dir) not in ("stopped", "failed", "cancelled"):
        return False
    return run.exists() or restart_argv(run_dir) is not None


def _busy(path: Path) -> str | None:
    """Why the run or sweep folder ``path`` is running (None: it is not): a job the app
    started, or a process holding its writer lock; for a sweep, its own process (the writer
    of ``<sweep>/sweep``, or the app's job there) or any cell's."""
    if run_kind(path, path.parent) == "sweep":
        record = path / SWEEP_RECORD
        if is_alive(record) or Run(record).writer_pid() is not None:
            return "the sweep is still running; cancel it first"
        for cell in sweep_cells(path):
            if is_alive(cell) or Run(cell).writer_pid() is not None:
                return f"the sweep's cell {cell.name} is still running; cancel the sweep first"
        return None
    if is_alive(path) or Run(path).writer_pid() is not None:
        return "the run is still running; cancel it first"
    return None


def _idle_folder(root: str | os.PathLike | None, name: str) -> Path:
    """The run or sweep folder ``name`` (:func:`xlviz.runs.run_folder`), refused while a job
    or a terminal process writes it (a sweep: while any of its cells does) and for a single
    cell of a sweep (deleted or archived with its sweep)."""
    path = run_folder(root, name, sweeps=True)
    if path.parent != checkpoints_root(root):
        raise XlvizError("is a cell of a sweep; delete or archive the whole sweep", path=path, field="run")
    if (why := _busy(path)) is not None:
        raise XlvizError(why, path=path, field="run")
    return path


def delete_run(root: str | os.PathLike | None, name: str) -> None:
    """Delete run (or sweep) ``name`` for good (it must not be running): only what
    :func:`xlviz.runs.run_kind` takes for one, directly in the checkpoints root; never through a link."""
    path = _idle_folder(root, name)
    with _START_LOCK:  # no start for this folder in this process meanwhile
        if (why := _busy(path)) is not None:
            raise XlvizError(why, path=path, field="run")
        delete_run_folder(path)


def archive_run(root: str | os.PathLike | None, name: str) -> Path:
    """Move run (or sweep) ``name`` (not running) into ``<root>/.archive/``; returns where it went."""
    path = _idle_folder(root, name)
    with _START_LOCK:
        if (why := _busy(path)) is not None:
            raise XlvizError(why, path=path, field="run")
        return archive_run_folder(path)


def check_resumable_config(config: dict, *, path: Path) -> None:
    """The names in a config read back from disk (run name, language codes) are short
    identifiers: a crafted ``config.json`` must not steer a resumed run's writes."""
    from xlviz.names import check_code, check_name, language_entries

    if "name" in config:
        check_name(config["name"], field="name", path=path, what="run name")
    for key in ("l1", "l2"):
        if key in config:
            check_code(config[key], field=key, path=path)
    world = config.get("world")
    if isinstance(world, dict) and "languages" in world:
        language_entries(world["languages"], path=path)


def effective_state(run_dir: str | os.PathLike) -> str:
    """The run's state as the app should show it.

    ``status.json`` says ``running`` until the run itself writes otherwise; if its process is
    gone (killed by the system, machine restarted) the run is ``failed`` (the reason:
    :data:`xlviz.runs.KILLED`) and can be resumed; a ``pending`` one whose process is gone is
    ``stopped``. A folder the app
    just created whose job has not written its config yet is ``starting``. A run started from a
    terminal (no ``job.json``) counts as alive while the pid in its ``status.json`` is.
    """
    run = Run(Path(run_dir))
    alive = is_alive(run_dir)
    if not run.exists():
        if alive:
            return "starting"
        info = job_info(run_dir)
        if info and info.get("cancelled"):
            return "cancelled"
        return "failed" if info else "pending"
    try:
        status = run.status()
    except XlvizError:
        status = {}
    state = status.get("state", "pending")
    if not alive:
        # started from a terminal: the writer lock names the live process (pid and start time)
        alive = run.writer_pid() is not None
    if not alive and job_info(run_dir) is None and not run.lock_path.exists():
        # a run written before writer locks existed: its status pid, checked against its start time
        pid = status.get("pid")
        alive = isinstance(pid, int) and pid != os.getpid() and process_alive(pid, status.get("pid_start"), require_start=True)
    if alive:
        return "completed" if state == "completed" else "running"
    if state == "running":
        # its process is gone without writing its end (the out-of-memory killer, SIGKILL, a
        # restart): failed, with xlviz.runs.KILLED as the reason (Run.live_status); resumable
        return "failed"
    if state == "pending":
        return "stopped"
    return state


def job_output_tail(run_dir: str | os.PathLike, n: int = 20) -> str:
    """Last lines of the job's stdout/stderr (useful when it died before logging anything)."""
    path = Path(run_dir) / OUTPUT_FILE
    if not os.path.lexists(path):
        return ""
    try:
        data = confined.read_tail(path, root=run_dir, max_bytes=limits.LOG_TAIL_MAX_BYTES, what="job output")
    except XlvizError as e:
        return f"(job output not shown: {e})\n"
    return "".join(data.decode("utf-8", errors="replace").splitlines(keepends=True)[-n:])
