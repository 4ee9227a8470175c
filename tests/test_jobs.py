"""xlviz.jobs: detached CLI jobs the app starts, watches, cancels and resumes.

Real subprocesses (a sleeping Python stands in for a training run, so the tests take a couple
of seconds) check what matters in the app: the job is in its own session (survives the app),
is found alive from ``job.json`` alone (after an app restart), and cancel kills its whole
process group and marks the run cancelled.
"""

from __future__ import annotations

import os
import signal
import sys
import time

import pytest

from xlviz import jobs
from xlviz.errors import XlvizError
from xlviz.runs import Run


def _sleeper(monkeypatch, child: bool = False, seconds: int = 60):
    """Make start_job run a sleeping Python (optionally with a sleeping child) instead of xlviz."""
    code = "import time\n"
    if child:
        code += (
            "import subprocess, sys, pathlib\n"
            "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
            "pathlib.Path(sys.argv[1]).write_text(str(p.pid))\n"
        )
    code += f"time.sleep({seconds})\n"

    def argv(args):
        return [sys.executable, "-c", code, *map(str, args)]

    monkeypatch.setattr(jobs, "command_argv", argv)


def _wait(cond, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def _alive(pid: int) -> bool:
    return jobs._proc_state(pid) not in (None, "Z", "X")


def test_start_records_pid_in_own_session_and_cancel_kills_the_group(tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    child_file = tmp_path / "child.pid"
    _sleeper(monkeypatch, child=True)
    pid = jobs.start_job([str(child_file)], run_dir)
    info = jobs.job_info(run_dir)
    assert info["pid"] == pid and info["pgid"] == pid and info["start_ticks"]
    assert os.getsid(pid) == pid, "the job must run in its own session to survive the app"
    assert jobs.is_alive(run_dir)
    assert _wait(child_file.exists)
    child = int(child_file.read_text())
    assert _alive(child)

    Run(run_dir).write_config({"name": "run"})
    Run(run_dir).update_status(state="running")
    assert jobs.effective_state(run_dir) == "running"

    assert jobs.cancel(run_dir, grace_s=3) is True
    assert not jobs.is_alive(run_dir)
    assert _wait(lambda: not _alive(child)), "cancel must terminate the whole process group"
    status = Run(run_dir).status()
    assert status["state"] == "cancelled"
    assert jobs.effective_state(run_dir) == "cancelled"
    assert "cancelled" in Run(run_dir).log_tail()


def test_job_is_found_alive_after_an_app_restart_and_stopped_after_a_kill(tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    _sleeper(monkeypatch)
    pid = jobs.start_job([], run_dir)
    Run(run_dir).write_config({"name": "run"})
    Run(run_dir).update_status(state="running")
    jobs._CHILDREN.clear()  # a new app process knows the job only from job.json
    assert jobs.is_alive(run_dir)
    os.killpg(pid, signal.SIGKILL)
    # nobody reaps it here (it was started by "another" app process): zombies count as dead
    assert _wait(lambda: not jobs.is_alive(run_dir))
    assert jobs.effective_state(run_dir) == "failed"  # status.json says running, its process is gone: killed
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def test_reused_pid_is_not_alive(tmp_path):
    from xlviz.io import atomic_write_json

    run_dir = tmp_path / "run"
    atomic_write_json(run_dir / jobs.JOB_FILE, {"pid": os.getpid(), "pgid": os.getpid(), "start_ticks": 1})
    assert not jobs.is_alive(run_dir)


def test_second_start_while_running_is_refused(tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    _sleeper(monkeypatch)
    jobs.start_job([], run_dir)
    try:
        with pytest.raises(XlvizError, match="already running"):
            jobs.start_job([], run_dir)
    finally:
        jobs.cancel(run_dir, grace_s=2)


def test_real_cli_output_goes_to_the_run_folder(tmp_path):
    run_dir = tmp_path / "run"
    jobs.start_job(["--version"], run_dir)
    assert _wait(lambda: not jobs.is_alive(run_dir), timeout=60)
    assert "xlviz" in jobs.job_output_tail(run_dir)
    assert jobs.effective_state(run_dir) == "failed"  # finished without ever writing a run


def test_resume_starts_transfer_resume(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(jobs, "start_job", lambda argv, run_dir: calls.append((list(argv), run_dir)) or 123)
    run_dir = tmp_path / "run"
    with pytest.raises(XlvizError, match="not a run folder"):
        jobs.resume(run_dir)
    Run(run_dir).write_config({"name": "run"})
    assert jobs.resume(run_dir) == 123
    assert calls == [(["transfer", "--resume", str(run_dir)], run_dir)]


def test_effective_state_of_terminal_runs(tmp_path):
    run = Run(tmp_path / "run")
    run.write_config({"name": "run"})
    run.update_status(state="completed")
    assert jobs.effective_state(run.path) == "completed"
    # a run started from a terminal (no job.json) is alive while its status pid is
    status = run.status()
    status.update(state="running", pid=999_999_999)
    from xlviz.io import atomic_write_json

    atomic_write_json(run.status_path, status)
    assert jobs.effective_state(run.path) == "failed"  # its process is gone without writing its end
