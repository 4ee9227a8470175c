"""Scale-out: training commands run unchanged under ``accelerate launch`` on two CPU processes
(torch gloo backend), and two processes give the same step 2 as one process on the same
global batches.

``accelerate launch --cpu --num_processes 2`` starts a single process (its multi-CPU path
expects mpirun), so the tests launch with ``--multi_gpu --num_processes 2``, which on a
machine without GPUs runs two CPU processes that join a gloo process group.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from xlviz.cli import main as cli
from xlviz.runs import Run
from xlviz.training.loop import run_precision

try:
    from world_files import write_world_corpora
except ImportError:
    from tests.world_files import write_world_corpora

REPO = Path(__file__).resolve().parents[1]
LAUNCH = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
          "--mixed_precision", "no", "--dynamo_backend", "no"]


def launch_env() -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1")
    env["CUDA_VISIBLE_DEVICES"] = ""  # CPU processes with gloo, also on a machine with GPUs
    return env


def run_launched(args: list[str], cwd: Path, timeout: int = 240) -> subprocess.CompletedProcess:
    proc = subprocess.run(LAUNCH + args, cwd=cwd, env=launch_env(), capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"accelerate launch failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    return proc


@pytest.mark.slow
def test_two_process_step2_matches_one_process(tmp_path):
    files = write_world_corpora(tmp_path / "corpora")
    one, two = tmp_path / "one", tmp_path / "two"
    args = ["transfer-corpus", "--l1", "en", "--l2", "svo", "--l1-corpus", str(files["en"]), "--l2-corpus", str(files["svo"]),
            "--model-size", "tiny", "--vocab-size", "200", "--block-size", "32", "--batch-size", "8", "--shuffle-buffer", "16",
            "--pretrain-steps", "3", "--transfer-steps", "8", "--transfer-lr", "0.01", "--log-every", "1", "--mixed-precision", "no"]
    assert cli(args + ["--run-dir", str(one), "--stop-after", "s1_pretrain"]) == 0
    assert Run(one).status()["state"] == "cancelled" and Run(one).status()["stages_done"] == ["world", "s1_pretrain"]
    shutil.copytree(one, two)  # the same vocabularies and step-1 model for both runs

    assert cli(["transfer-corpus", "--resume", str(one)]) == 0  # 1 process x 8 blocks
    run_launched(["-m", "xlviz", "transfer-corpus", "--resume", str(two)], cwd=tmp_path)  # 2 processes x 4 blocks
    for run, n in ((Run(one), 1), (Run(two), 2)):
        assert run.status()["state"] == "completed" and run.status()["num_processes"] == n

    a = load_file(one / "s2_transfer-svo" / "model.safetensors")
    b = load_file(two / "s2_transfer-svo" / "model.safetensors")
    s1 = load_file(one / "s1_pretrain" / "model.safetensors")
    emb = "bert.embeddings.word_embeddings.weight"
    assert a.keys() == b.keys()
    moved = (a[emb][5:] - b[emb][5:]).abs().max().item()
    assert torch.allclose(a[emb], b[emb], atol=2e-5, rtol=1e-4), f"L2 embeddings differ by up to {moved}"
    for name in a:
        vocab_part = "word_embeddings" in name or "decoder" in name or name.endswith("predictions.bias")
        if not vocab_part and name in s1:
            assert torch.equal(a[name], b[name]) and torch.equal(a[name], s1[name]), f"{name}: the body stays L1's in both runs"
    curve = lambda run: [m["loss"] for m in run.metrics() if m["stage"] == "s2_transfer-svo"]  # noqa: E731
    la, lb = curve(Run(one)), curve(Run(two))
    assert len(la) == len(lb) == 8
    assert max(abs(x - y) for x, y in zip(la, lb)) < 1e-3, (la, lb)
    assert la[-1] < la[0], "step 2 learns"


@pytest.mark.slow
def test_generated_world_transfer_runs_on_two_processes(tmp_path):
    """``xlviz transfer`` (the demo pipeline, step 1 included) unchanged under accelerate launch."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import json, os, sys\n"
        "from xlviz.cli import main\n"
        "rc = main(sys.argv[1:])\n"
        "from accelerate import PartialState\n"
        "s = PartialState()\n"
        "open(os.path.join(os.environ['XLVIZ_PROBE'], f'rank{s.process_index}.json'), 'w').write(json.dumps({'n': s.num_processes, 'rc': rc}))\n"
        "sys.exit(rc)\n"
    )
    env_dir = tmp_path / "ranks"
    env_dir.mkdir()
    os.environ["XLVIZ_PROBE"] = str(env_dir)
    try:
        run_launched([str(probe), "transfer", "--run-dir", str(tmp_path / "run"), "--model-size", "tiny", "--vocab-size", "200",
                      "--pretrain-steps", "4", "--transfer-steps", "2", "--finetune-steps", "2", "--batch-size", "4",
                      "--mlm-batch-size", "4", "--corpus-documents", "80", "--qa-train-paragraphs", "12", "--qa-test-paragraphs", "3",
                      "--languages", "svo", "--mixed-precision", "bf16"], cwd=tmp_path)  # bf16 weights under DDP
    finally:
        del os.environ["XLVIZ_PROBE"]
    ranks = sorted(json.loads(p.read_text())["n"] for p in env_dir.glob("rank*.json"))
    assert ranks == [2, 2], "both processes ran the command to the end"
    run = Run(tmp_path / "run")
    assert run.status()["state"] == "completed" and run.status()["mixed_precision"] == run_precision("bf16")  # unless the suite forces one
    assert "s1_pretrain" in run.status()["stages_done"] and (run.path / "s1_pretrain" / "model.safetensors").is_file()
    assert {m["stage"] for m in run.metrics()} >= {"s1_pretrain", "s2_transfer-svo", "s3_finetune"}
    assert {(r["system"], r["language"]) for r in run.results()} == {(s, l) for s in ("monotrans", "floor", "dictionary-oracle") for l in ("en", "svo")}


@pytest.mark.slow
def test_finetune_qa_on_two_processes_gathers_predictions(tmp_path):
    """QA fine-tuning and sharded evaluation under accelerate launch: every question is scored."""
    try:
        from test_real_transfer import write_world_qa
    except ImportError:
        from tests.test_real_transfer import write_world_qa
    from tests.tiny_models import make_tiny

    qa_dir = write_world_qa(tmp_path / "qa")
    model = make_tiny("bert", tmp_path / "bert", task="mlm", max_position_embeddings=128)
    run_launched(["-m", "xlviz", "finetune-qa", "--model", str(model), "--train", str(qa_dir / "qa.en.json"),
                  "--train-paragraphs", "6", "--eval-dir", str(qa_dir), "--steps", "3", "--batch-size", "4",
                  "--max-length", "64", "--doc-stride", "24", "--run-dir", str(tmp_path / "run")], cwd=tmp_path)
    run = Run(tmp_path / "run")
    assert run.status()["num_processes"] == 2 and run.status()["state"] == "completed"
    split = json.loads((run.path / "qa_split.json").read_text())
    total = sum(len(p["qas"]) for a in json.loads((qa_dir / "qa.en.json").read_text())["data"] for p in a["paragraphs"])
    for row in run.results():
        preds = json.loads((run.path / "predictions" / f"{row['system']}-{row['language']}.json").read_text())
        assert row["n_questions"] == total - len(split["train_ids"]) == len(preds), "predictions of both shards gathered"
        assert not set(preds) & set(split["train_ids"])


@pytest.mark.slow
def test_veco_and_ppa_run_on_two_processes(tmp_path):
    """VECO (CA-MLM pre-training, plug-out and plug-in fine-tuning) and PPA (MoCo + TLM with
    keys gathered across processes, code-switched fine-tuning) through the whole bench run,
    unchanged under accelerate launch; ``workers`` falls back to one stage at a time there
    (the processes share each stage instead)."""
    cfg = tmp_path / "tiny.json"
    cfg.write_text(json.dumps({
        "model_size": "tiny", "vocab_size": 200, "batch_size": 8, "mlm_batch_size": 8, "pretrain_steps": 4, "transfer_steps": 2,
        "finetune_steps": 2, "log_every": 1, "mixed_precision": "no", "workers": 2,
        "methods": ["veco", "veco-plugin", "ppa", "ppa-codeswitch"],
        "ppa_steps": 3, "ppa_batch_size": 8, "ppa_queue_size": 16,
        "world": {"languages": [{"code": "sov", "order": "sov", "script": "cyrillic"}], "corpus_documents": 100,
                  "qa_train_paragraphs": 12, "qa_dev_paragraphs": 2, "qa_test_paragraphs": 3, "parallel_pairs": 10,
                  "agreement_pairs": 3, "sense_pairs": 3, "parallel_train_pairs": 40}}))
    run_launched(["-m", "xlviz", "transfer", "--config", str(cfg), "--run-dir", str(tmp_path / "run")], cwd=tmp_path, timeout=480)
    run = Run(tmp_path / "run")
    status = run.status()
    assert status["state"] == "completed" and status["num_processes"] == 2
    assert {"s1_veco-sov", "s2_ppa-sov", "s3_veco-plugin-sov", "s3_ppa-codeswitch-sov"} <= set(status["stages_done"])
    assert "running up to" not in run.log_path.read_text()  # one stage at a time under accelerate launch
    steps = {(m["stage"], m["step"]) for m in run.metrics()}
    assert ("s1_veco-sov", 4) in steps and ("s2_ppa-sov", 3) in steps
    rows = {(r["system"], r["language"]): r for r in run.results()}
    assert set(rows) >= {("veco", "en"), ("veco", "sov"), ("veco-plugin", "sov"), ("ppa", "sov"), ("ppa-codeswitch", "sov")}
    assert rows[("ppa", "sov")]["parallel_pairs"] == 40 and rows[("ppa", "sov")]["l2_labels"] is False
    assert rows[("veco-plugin", "sov")]["l2_labels"] is True
