"""Start, watch, cancel and resume CLI jobs for the app.

The app never trains inside a Streamlit script: it starts ``python -m xlviz <command> ...`` as a
detached subprocess (its own session and process group, so it survives app reruns, closed tabs
and app restarts) and watches the run folder. The job's pid, process group and start time go
into ``<run>/job.json`` so a later app process can still tell whether the job is alive and can
cancel it. Cancelling is explicit: terminate the whole process group, then mark the run
``cancelled`` in ``status.json``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

from xlviz.errors import XlvizError
from xlviz.io import atomic_write_json, read_json
from xlviz.runs import Run, now_iso

JOB_FILE = "job.json"
OUTPUT_FILE = "job-output.txt"

# Popen handles of jobs started by this process: polled so finished children are reaped
# instead of lingering as zombies while the app keeps running.
_CHILDREN: dict[int, subprocess.Popen] = {}


def _proc_start_ticks(pid: int) -> int | None:
    """Process start time in clock ticks since boot (Linux), to tell a reused pid apart."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except OSError:
        return None
    # Field 2 (comm) may contain spaces and parentheses; the rest follows the last ')'.
    rest = stat.rsplit(")", 1)[-1].split()
    try:
        return int(rest[19])  # field 22 overall
    except (IndexError, ValueError):
        return None


def _proc_state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[-1].split()[0]
    except (OSError, IndexError):
        return None


def job_info(run_dir: str | os.PathLike) -> dict | None:
    """The ``job.json`` written when the app started this run, or None."""
    path = Path(run_dir) / JOB_FILE
    if not path.exists():
        return None
    try:
        return read_json(path, what="job record")
    except XlvizError:
        return None


def command_argv(argv: Sequence[str]) -> list[str]:
    """The full command line for an ``xlviz`` sub-command, using this interpreter."""
    return [sys.executable, "-m", "xlviz", *map(str, argv)]


def start_job(argv: Sequence[str], run_dir: str | os.PathLike, *, env: dict | None = None) -> int:
    """Start ``xlviz <argv>`` detached; record its pid in ``run_dir/job.json``; return the pid.

    stdout and stderr go to ``run_dir/job-output.txt`` so a crash before the run's own log
    starts is still visible in the app.
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    if is_alive(run_dir):
        raise XlvizError("a job is already running for this run", path=run_dir)
    full = command_argv(argv)
    out = open(run_dir / OUTPUT_FILE, "ab")
    try:
        out.write(f"\n$ {' '.join(full)}\n".encode())
        out.flush()
        proc = subprocess.Popen(
            full,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"},
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
    """Whether the job started for ``run_dir`` is still running (not finished, not a zombie)."""
    info = job_info(run_dir)
    if not info or not info.get("pid"):
        return False
    pid = int(info["pid"])
    child = _CHILDREN.get(pid)
    if child is not None and child.poll() is not None:
        _CHILDREN.pop(pid, None)
        return False
    state = _proc_state(pid)
    if state is None or state in ("Z", "X"):
        return False
    recorded = info.get("start_ticks")
    if recorded is not None and _proc_start_ticks(pid) != recorded:
        return False  # the pid was reused by another process
    return True


def cancel(run_dir: str | os.PathLike, *, grace_s: float = 5.0) -> bool:
    """Terminate the job's process group and mark the run cancelled.

    Sends SIGTERM to the group, waits up to ``grace_s`` seconds, then SIGKILL. Returns whether
    a live job was found. The run is marked cancelled either way unless it already finished.
    """
    run_dir = Path(run_dir)
    info = job_info(run_dir)
    found = False
    if info and is_alive(run_dir):
        found = True
        pgid = int(info.get("pgid") or info["pid"])
        _signal_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and is_alive(run_dir):
            time.sleep(0.1)
        if is_alive(run_dir):
            _signal_group(pgid, signal.SIGKILL)
            deadline = time.monotonic() + 2.0
            while time.monotonic() < deadline and is_alive(run_dir):
                time.sleep(0.05)
        child = _CHILDREN.pop(int(info["pid"]), None)
        if child is not None:
            try:
                child.wait(timeout=1)
            except subprocess.TimeoutExpired:
                pass
    run = Run(run_dir)
    status = run.status()
    if status.get("state") != "completed":
        # Written here rather than with Run.update_status, which would record the app's pid.
        status.update(state="cancelled", updated=now_iso(), ended=now_iso())
        atomic_write_json(run.status_path, status)
        run.log("cancelled from the app")
    return found


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass
    except PermissionError as e:
        raise XlvizError(f"cannot signal process group {pgid}: {e}") from None


def resume(run_dir: str | os.PathLike) -> int:
    """Restart a stopped run where it left off: ``xlviz transfer --resume RUN_DIR``."""
    run_dir = Path(run_dir)
    if not Run(run_dir).exists():
        raise XlvizError("not a run folder (no config.json)", path=run_dir)
    return start_job(["transfer", "--resume", str(run_dir)], run_dir)


def effective_state(run_dir: str | os.PathLike) -> str:
    """The run's state as the app should show it.

    ``status.json`` says ``running`` until the run itself writes otherwise; if its process is
    gone (killed, machine restarted) the run is ``stopped`` and can be resumed. A folder the app
    just created whose job has not written its config yet is ``starting``. A run started from a
    terminal (no ``job.json``) counts as alive while the pid in its ``status.json`` is.
    """
    run = Run(Path(run_dir))
    alive = is_alive(run_dir)
    if not run.exists():
        if alive:
            return "starting"
        return "failed" if job_info(run_dir) else "pending"
    try:
        status = run.status()
    except XlvizError:
        status = {}
    state = status.get("state", "pending")
    if not alive and job_info(run_dir) is None:
        pid = status.get("pid")
        alive = isinstance(pid, int) and pid != os.getpid() and _proc_state(pid) not in (None, "Z", "X")
    if alive:
        return "completed" if state == "completed" else "running"
    if state in ("running", "pending"):
        return "stopped"
    return state


def job_output_tail(run_dir: str | os.PathLike, n: int = 20) -> str:
    """Last lines of the job's stdout/stderr (useful when it died before logging anything)."""
    path = Path(run_dir) / OUTPUT_FILE
    if not path.exists():
        return ""
    with open(path, encoding="utf-8", errors="replace") as f:
        return "".join(f.readlines()[-n:])
