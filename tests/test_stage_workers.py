"""Stages at once (``workers``): the same bytes as one after the other, the stages' ``needs``
enforced, one writer, and a killed parallel run that resumes.

The runs use the tiny world and model and one torch thread per stage on both sides (a stage's
bytes depend on its thread count, see TransferConfig.workers)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from xlviz.errors import XlvizError
from xlviz.runs import Run, process_alive
from xlviz.training.stage_workers import THREADS_ENV
from xlviz.transfer.config import TransferConfig
from xlviz.transfer.pipeline import Pipeline

TINY = {
    "model_size": "tiny", "vocab_size": 200, "batch_size": 8, "mlm_batch_size": 8, "pretrain_steps": 4, "transfer_steps": 2,
    "finetune_steps": 2, "log_every": 1, "mixed_precision": "no",
    "world": {"corpus_documents": 120, "qa_train_paragraphs": 20, "qa_dev_paragraphs": 3, "qa_test_paragraphs": 4,
              "parallel_pairs": 20, "agreement_pairs": 9, "sense_pairs": 6, "parallel_train_pairs": 40},
}
METHODS = ["monotrans", "floor", "jointpair-disjoint"]


def digest(run_dir: Path) -> dict[str, str]:
    """sha256 of every weight file, prediction file and results.json of a run."""
    files = sorted(p for p in run_dir.rglob("*") if p.is_file() and (p.suffix == ".safetensors" or "predictions" in p.parts))
    out = {str(p.relative_to(run_dir)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}
    out["results"] = json.dumps(sorted(Run(run_dir).results(), key=lambda r: (r["system"], r["language"])), sort_keys=True)
    return out


def run(run_dir: Path, workers: int) -> Pipeline:
    p = Pipeline(TransferConfig.from_dict({**TINY, "methods": METHODS, "workers": workers}), run_dir)
    with p.run.writer_lock():
        p.run_all()
    return p


@pytest.fixture(scope="module")
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    old = os.environ.get(THREADS_ENV)
    os.environ[THREADS_ENV] = "1"
    yield
    torch.set_num_threads(threads)
    os.environ.pop(THREADS_ENV) if old is None else os.environ.__setitem__(THREADS_ENV, old)


def test_two_workers_give_the_same_bytes_as_one(tmp_path, one_thread):
    one = run(tmp_path / "one", 1)
    two = run(tmp_path / "two", 2)
    a, b = digest(one.run.path), digest(two.run.path)
    assert len(a) > 20 and a == b
    # the workers' stage folders are in the manifest the run's owner wrote, as in the one-process run
    manifest = two.run.manifest_path.read_bytes()
    assert manifest == one.run.manifest_path.read_bytes()
    assert {e["path"] for e in json.loads(manifest)["artefacts"] if e["kind"] == "stage"} >= {"s1_pretrain", "s2_transfer-sov"}
    status = two.run.status()
    assert status["state"] == "completed" and status["stages_done"] and set(status["stages_done"]) == set(two.plan())
    # each stage's wall time is recorded, in one process and with workers alike
    for r in (one, two):
        seconds = r.run.stage_seconds()
        assert set(seconds) == set(r.plan()) and all(v >= 0 for v in seconds.values())
    log = two.run.log_path.read_text()
    assert "running up to 2 stages at once" in log and "s1_jointpair-disjoint-sov done" in log
    # the pair models' pre-trainings overlapped: the second started before the first was done
    lines = log.splitlines()
    start = next(i for i, line in enumerate(lines) if line.endswith(": s1_jointpair-disjoint-sov"))
    done_svo = next(i for i, line in enumerate(lines) if "s1_jointpair-disjoint-svo done" in line)
    assert start < done_svo
    metrics = {(m["stage"], m["step"]) for m in two.run.metrics()}
    assert ("s1_jointpair-disjoint-sov", TINY["pretrain_steps"]) in metrics and ("s1_pretrain", TINY["pretrain_steps"]) in metrics


def test_needs_are_what_the_stages_read(tmp_path):
    p = Pipeline(TransferConfig.from_dict({**TINY, "methods": ["monotrans", "jointpair-disjoint", "veco"],
                                           "veco_init": "jointpair-disjoint"}), tmp_path / "r")
    # the two pair models and step 1 wait for the data only: they can run at once
    assert p.needs("s1_jointpair-disjoint-svo") == {"world"}
    assert p.needs("s1_pretrain") == {"world"}
    # VECO from jointpair-disjoint: same phase, declared
    assert {"s1_jointpair-disjoint-svo", "s1_veco-ca-from-jointpair-disjoint-svo"} <= p.all_needs("s1_veco-from-jointpair-disjoint-svo")
    assert "s1_jointpair-disjoint-sov" not in p.all_needs("s1_veco-from-jointpair-disjoint-svo")
    assert {"s2_transfer-svo", "s3_finetune", "s1_pretrain"} <= p.all_needs("s4_monotrans")
    # reading a stage one may not wait for fails, whatever the number of workers
    p._current = "s1_jointpair-disjoint-sov"
    with pytest.raises(RuntimeError, match="s1_jointpair-disjoint-svo"):
        p.path("s1_jointpair-disjoint-svo", "joint")
    assert p.path("world", "tokenizers", "en") == p.run.path / "world" / "tokenizers" / "en"
    assert p.path("s1_jointpair-disjoint-sov") == p.run.path / "s1_jointpair-disjoint-sov"  # its own folder


def test_workers_setting_is_validated():
    for bad in (-1, 1.5, True, "2", 65):
        with pytest.raises(XlvizError, match="workers"):
            TransferConfig.from_dict({**TINY, "workers": bad})
    assert TransferConfig.from_dict({**TINY, "workers": 0}).workers == 0


def _children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]


@pytest.mark.slow
def test_killed_parallel_run_leaves_no_worker_and_resumes_to_the_same_bytes(tmp_path, one_thread):
    root = tmp_path / "ck"
    cfg = tmp_path / "tiny.json"
    cfg.write_text(json.dumps({**TINY, "methods": METHODS, "pretrain_steps": 120}))  # long enough to be killed with two stages running
    env = {**os.environ, "XLVIZ_CHECKPOINTS": str(root), "PYTHONUNBUFFERED": "1", THREADS_ENV: "1"}
    args = [sys.executable, "-m", "xlviz", "transfer", "--config", str(cfg), "--workers", "2"]
    proc = subprocess.Popen(args + ["--run-dir", str(root / "killed")], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    run_dir = root / "killed"
    end = time.monotonic() + 300
    workers: list[int] = []
    while time.monotonic() < end:
        try:
            running = Run(run_dir).status().get("running") or []
        except XlvizError:
            running = []
        if len(running) == 2 and any(s.startswith("s1_") for s in running):
            workers = _children(proc.pid)
            break
        assert proc.poll() is None, proc.stderr.read()[-2000:]
        time.sleep(0.05)
    assert len(workers) == 2, "two stages never ran at once"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 30
    while any(process_alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(process_alive(w) for w in workers), "a worker outlived its killed parent"
    done_before = set(Run(run_dir).status()["stages_done"])
    assert "s4_monotrans" not in done_before
    resumed = subprocess.run([sys.executable, "-m", "xlviz", "transfer", "--resume", str(run_dir)], env=env,
                             capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    clean = subprocess.run(args + ["--run-dir", str(root / "clean")], env=env, capture_output=True, text=True, timeout=600)
    assert clean.returncode == 0, clean.stderr[-2000:]
    assert digest(run_dir) == digest(root / "clean")
    assert not list(run_dir.rglob(".*.tmp"))


def test_runs_page_names_every_running_stage():
    from xlviz.views.runs import stage_text

    assert stage_text({"stage": "s1_pretrain", "running": ["s1_pretrain", "s1_jointpair-disjoint-svo"]}, "running") == \
        "s1_pretrain + s1_jointpair-disjoint-svo"
    assert stage_text({"stage": "s1_pretrain", "running": ["s1_pretrain", "x"]}, "cancelled") == "s1_pretrain"
    assert stage_text({"stage": "s2_transfer-svo"}, "running") == "s2_transfer-svo"
    assert stage_text({"running": [3]}, "running") == ""  # a malformed status.json: nothing, no crash
