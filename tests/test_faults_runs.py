"""Faults of run management: nothing lost, nothing written outside a run.

Each test is one numbered case of the fault probe (its number in the name): deleting,
archiving, noting, tagging, resuming and listing apply one rule for what is a run
(:func:`xlviz.runs.run_kind`: a real folder directly in the checkpoints root, or a sweep's cell
there, made by xlviz, not a model folder); a running sweep is as protected as a running run;
the trackers' folder is refused when linked out; a run killed by the system reads as failed;
the app reaps the jobs it started. Run folders are built by hand; nothing trains.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from xlviz import jobs
from xlviz.cli import main
from xlviz.errors import XlvizError
from xlviz.io import atomic_write_json
from xlviz.runs import Run, list_runs
from xlviz.views import runs as runs_view

REPO = Path(__file__).resolve().parents[1]


def _finished(root: Path, name: str) -> Run:
    run = Run(root / name)
    run.write_config({"name": name, "seed": 3, "world": {"languages": [{"code": "en"}, {"code": "sov"}]}})
    run.update_status(state="completed", stages_done=["s1"])
    return run


def _not_a_run(folder: Path) -> Path:
    """A user's folder (``~/Documents``): files of its own, nothing xlviz wrote."""
    folder.mkdir(parents=True)
    (folder / "letter.txt").write_text("precious")
    return folder


def _model_folder(folder: Path) -> Path:
    """A Hugging Face model saved into the checkpoints root (``minilm/``): its config and weights."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "bert", "architectures": ["BertForMaskedLM"],
                                                    "hidden_size": 8}))
    (folder / "model.safetensors").write_bytes(b"\0" * 64)
    return folder


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err and "\n" not in err and "Traceback" not in err, err
    return err


def _wait(cond, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def _hold_writer_lock(folder: Path) -> subprocess.Popen:
    """A process that takes ``folder``'s writer lock as a run's writer does, then sleeps:
    a running run (or sweep, or cell) as every check sees one."""
    code = ("import sys, time\nfrom xlviz.runs import Run\n"
            "with Run(sys.argv[1]).writer_lock():\n    print('held', flush=True)\n    time.sleep(120)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(folder)], cwd=REPO, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.stdout.readline().strip() == "held"
    assert _wait(lambda: Run(folder).writer_pid() == proc.pid)
    return proc


def _sweep(root: Path, name: str = "sw", cells: tuple[str, ...] = ("c1", "c2")) -> Path:
    """A sweep folder as ``xlviz sweep`` leaves it: its record and one finished run per cell."""
    folder = root / name
    atomic_write_json(folder / "sweep" / "sweep.json", {"created": "now", "grid": [["seed", [0, 1]]],
                                                        "cells": [{"name": c, "overrides": {}, "config": {}} for c in cells]})
    for c in cells:
        _finished(folder, c)
    return folder


# --- 1. deleting a folder that is not a run ------------------------------------------------------

def test_item1_delete_refuses_a_folder_that_is_not_a_run(tmp_path, monkeypatch, capsys):
    root = tmp_path / "ck"
    _finished(root, "r1")
    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(root))
    home = _not_a_run(tmp_path / "some" / "dir" / "notrun")
    assert main(["runs", "delete", "--yes", str(home)]) == 2  # its folder is not the checkpoints root
    assert "outside the checkpoints root" in _one_line_error(capsys)
    # even with --out naming its folder: it is no run xlviz made
    assert main(["runs", "delete", "--yes", "--out", str(home.parent), str(home)]) == 2
    assert "not a run made by xlviz" in _one_line_error(capsys)
    assert (home / "letter.txt").read_text() == "precious"
    with pytest.raises(XlvizError, match="not a run made by xlviz"):
        jobs.delete_run(home.parent, "notrun")
    assert home.exists() and (root / "r1").exists()
    assert main(["runs", "delete", "--yes", str(root / "r1")]) == 0 and not (root / "r1").exists()


# --- 2. --out and a path in another folder ------------------------------------------------------

def test_item2_out_with_a_path_in_another_folder_is_an_error_never_the_root_s_run(tmp_path, capsys):
    root = tmp_path / "ck"
    kept = _finished(root, "r2")
    elsewhere = _finished(tmp_path / "other" / "place", "r2")
    assert main(["runs", "delete", "--yes", "--out", str(root), str(elsewhere.path)]) == 2
    err = _one_line_error(capsys)
    assert "--out" in err and "not in the checkpoints root" in err
    assert kept.exists() and elsewhere.exists(), "neither the named folder nor the root's r2 is deleted"
    for action in (["archive"], ["note", "x"], ["tag", "t1"]):
        assert main(["runs", action[0], "--out", str(root), str(elsewhere.path), *action[1:]]) == 2
        _one_line_error(capsys)
    assert not kept.notes_path.exists() and not elsewhere.notes_path.exists() and not (root / ".archive").exists()
    # the path of the root's own run, with or without --out, is that run
    assert main(["runs", "note", "--out", str(root), str(kept.path), "kept"]) == 0 and kept.notes()["note"] == "kept"


# --- 3. a running sweep -------------------------------------------------------------------------

@pytest.mark.parametrize("writer", ["cell", "sweep"])
def test_item3_a_running_sweep_is_neither_deleted_nor_archived(tmp_path, monkeypatch, capsys, writer):
    root = tmp_path / "ck"
    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(root))
    folder = _sweep(root)
    proc = _hold_writer_lock(folder / "c2" if writer == "cell" else folder / "sweep")
    try:
        for remove in (jobs.delete_run, jobs.archive_run):
            with pytest.raises(XlvizError, match="still running"):
                remove(root, "sw")
        assert main(["runs", "delete", "--yes", "--out", str(root), "sw"]) == 2
        assert "still running" in _one_line_error(capsys)
        assert main(["runs", "archive", str(folder)]) == 2
        assert "still running" in _one_line_error(capsys)
        assert (folder / "c1" / "config.json").exists() and (folder / "sweep" / "sweep.json").exists()
    finally:
        proc.kill()
        proc.wait()
    # once it has ended, the whole sweep goes (never one of its cells alone)
    with pytest.raises(XlvizError, match="whole sweep"):
        jobs.delete_run(root, "sw/c1")
    assert jobs.archive_run(root, "sw") == root / ".archive" / "sw"


# --- 4. a model folder in the checkpoints root (the app) ------------------------------------------

def test_item4_a_model_folder_is_not_listed_resumed_or_deleted_as_a_run(tmp_path, monkeypatch):
    root = tmp_path / "ck"
    model = _model_folder(root / "minilm")
    _finished(root, "r1")
    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(root))
    assert [r.name for r in list_runs(root)] == ["r1"]
    assert [r.name for r in runs_view.all_runs(root)] == ["r1"]
    assert not jobs.can_resume(model)
    with pytest.raises(XlvizError, match="model folder"):
        jobs.resume(model)  # the app's Resume
    with pytest.raises(XlvizError, match="model folder"):
        jobs.delete_run(root, "minilm")  # the app's "Delete for good"
    assert sorted(p.name for p in model.iterdir()) == ["config.json", "model.safetensors"], "nothing written into it"
    # a model folder an earlier Resume wrote its job record into is still no run
    atomic_write_json(model / jobs.JOB_FILE, {"pid": 0, "argv": [sys.executable, "-m", "xlviz", "transfer"]})
    assert [r.name for r in runs_view.all_runs(root)] == ["r1"]
    with pytest.raises(XlvizError, match="model folder"):
        jobs.archive_run(root, "minilm")
    assert model.exists()


def test_item4_the_runs_page_does_not_offer_a_model_folder(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    root = tmp_path / "ck"
    _model_folder(root / "minilm")
    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(root))
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=120).run()
    assert not at.exception, [e.message for e in at.exception]
    assert "minilm" not in "\n".join(str(m.value) for m in at.markdown)  # Home's latest runs
    at.switch_page("pages/runs.py").run()
    assert not at.exception, [e.message for e in at.exception]
    assert "No runs yet" in "\n".join(str(e.value) for e in at.info)
    keys = [b.key for b in at.button]
    assert not any(k and "minilm" in k for k in keys), keys


# --- 5. notes, tags and archive outside runs ------------------------------------------------------

def test_item5_note_tag_archive_refuse_a_folder_that_is_not_a_run(tmp_path, monkeypatch, capsys):
    root = tmp_path / "ck"
    _finished(root, "r1")
    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(root))
    docs = _not_a_run(tmp_path / "some" / "dir" / "Documents")
    pics = _not_a_run(tmp_path / "some" / "dir" / "Pics")
    for out in ([], ["--out", str(docs.parent)]):
        assert main(["runs", "note", *out, str(docs), "x"]) == 2
        _one_line_error(capsys)
        assert main(["runs", "tag", *out, str(docs), "t1"]) == 2
        _one_line_error(capsys)
        assert main(["runs", "archive", *out, str(pics)]) == 2
        _one_line_error(capsys)
    assert not (docs / "notes.json").exists()
    assert pics.exists() and not (pics.parent / ".archive").exists()
    # a model folder in the root is no run either
    model = _model_folder(root / "minilm")
    assert main(["runs", "note", "minilm", "x"]) == 2 and "model folder" in _one_line_error(capsys)
    assert not (model / "notes.json").exists()


# --- 6. the trackers' folder linked out of the run ------------------------------------------------

def test_item6_a_linked_tensorboard_folder_is_refused_on_resume(tmp_path, monkeypatch, capsys):
    from tests.test_methods import TINY
    from xlviz.runs import package_versions
    from xlviz.transfer.config import TransferConfig

    root = tmp_path / "ck"
    outside = tmp_path / "outside"
    outside.mkdir()
    run = Run(root / "r")
    run.write_config({**TransferConfig.from_dict({**TINY, "methods": ["floor"]}).to_dict(), "versions": package_versions()})
    run.update_status(state="failed", stages_done=[], error="killed")
    (run.path / "tensorboard").symlink_to(outside, target_is_directory=True)
    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(root))
    assert main(["transfer", "--resume", str(run.path)]) == 2
    err = _one_line_error(capsys)
    assert "tensorboard" in err and "symbolic link" in err
    assert list(outside.iterdir()) == [], "nothing written through the link"
    assert run.status()["state"] == "failed" and run.status()["stages_done"] == []
    # a file linked out from inside a real tensorboard/ (hparams.yml) is refused alike
    from xlviz.training.tracking import check_tracker_folder

    (run.path / "tensorboard").unlink()
    (run.path / "tensorboard").mkdir()
    (run.path / "tensorboard" / "hparams.yml").symlink_to(outside / "hparams.yml")
    with pytest.raises(XlvizError, match="symbolic link"):
        check_tracker_folder(run.path)


# --- 11. a run killed by the system --------------------------------------------------------------

def test_item11_a_run_killed_by_the_system_reads_as_failed(tmp_path, monkeypatch):
    root = tmp_path / "ck"
    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(root))
    run = Run(root / "oom")
    run.write_config({"name": "oom", "seed": 0})
    code = ("import sys, time\nfrom xlviz.runs import Run\nrun = Run(sys.argv[1])\n"
            "with run.writer_lock():\n    run.update_status(state='running', stage='s1_pretrain')\n"
            "    print('running', flush=True)\n    time.sleep(120)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(run.path)], cwd=REPO, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.stdout.readline().strip() == "running"
    assert _wait(lambda: run.writer_pid() == proc.pid)
    assert jobs.effective_state(run.path) == "running"
    proc.send_signal(signal.SIGKILL)  # what the out-of-memory killer sends
    proc.wait()
    assert jobs.effective_state(run.path) == "failed" and jobs.can_resume(run.path)
    table = runs_view.run_table(list_runs(root))
    assert table.set_index("run").loc["oom", "state"] == "failed"
    assert run.status()["state"] == "running", "the file is what the run wrote; a reader derives, never rewrites"
    live = run.live_status()
    assert live["state"] == "failed" and live["killed"] and "the process ended without finishing (killed?" in live["error"]


# --- 13. a sweep's killed cell; finished jobs left as zombies --------------------------------------

def test_item13_a_killed_cell_job_is_failed_not_running_in_the_sweep_error_line(tmp_path, monkeypatch, capsys):
    from xlviz.transfer.sweep import Sweep

    def killed_jobs(self, cells, backend, parallel, slurm, states):
        """Each cell's job dies as a killed one does: status.json says running, the lock holder is gone."""
        for c in cells:
            run = self.cell_run(c)
            run.write_config({**c.config, "name": c.name})
            run.update_status(state="running", stage="s1_pretrain")
            run.lock_path.write_text("999999999 1\n")
            states[c.name] = self.state(c)  # what the real loop does when a job is done

    monkeypatch.setattr(Sweep, "_run_jobs", killed_jobs)
    root = tmp_path / "ck"
    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(root))
    assert main(["sweep", "--out", str(root / "sw"), "--grid", "seed=0,1", "--methods", "floor", "--backend", "debug"]) == 2
    err = _one_line_error(capsys)
    assert "2 of 2 cells did not complete" in err, err
    assert ": running" not in err and err.count("failed (the process ended without finishing: killed?)") == 2, err


def test_item13_finished_jobs_started_by_the_app_are_reaped(tmp_path, monkeypatch):
    monkeypatch.setattr(jobs, "command_argv", lambda argv: [sys.executable, "-c", "pass"])
    root = tmp_path / "ck"
    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(root))
    run_dir = root / "quick"
    pid = jobs.start_job([], run_dir)

    def state() -> str:
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
        except OSError:
            return "gone"

    assert _wait(lambda: state() in ("Z", "gone"))  # it has finished
    assert not jobs.is_alive(run_dir)  # what the app asks at every redraw
    assert pid not in jobs._CHILDREN and state() == "gone", "the finished job was reaped, not left a zombie"
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
