"""Trackers through accelerate: a tiny run's TensorBoard event files hold the values of its
metrics.jsonl (stage workers included: the lock holder logs what they send), ``--log-with``
is validated and recorded, and a tracker that is not installed is skipped with a note."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_methods import TINY
from xlviz.cli import main as cli
from xlviz.runs import Run


def _scalars(run_dir: Path) -> dict[tuple[str, int], float]:
    """Every scalar of the run's event files as ``{(tag, step): value}``."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out: dict[tuple[str, int], float] = {}
    files = sorted((run_dir / "tensorboard").rglob("events.out.tfevents.*"))
    assert files, "no TensorBoard event files in the run folder"
    for f in files:
        acc = EventAccumulator(str(f), size_guidance={"scalars": 0})
        acc.Reload()
        for tag in acc.Tags()["scalars"]:
            for e in acc.Scalars(tag):
                out[(tag, e.step)] = e.value
    return out


MISSING: list[str] = []  # a tracker not installed here, when there is one (set by tracked_run)


@pytest.fixture(scope="module")
def tracked_run(tmp_path_factory, request) -> Path:
    """A tiny run with two stage workers (metrics reach the files through the lock holder)."""
    pytest.importorskip("tensorboard")
    from xlviz.training.tracking import TRACKERS, available

    root = tmp_path_factory.mktemp("trackers")
    _, missing = available(list(TRACKERS))
    MISSING[:] = missing[:1]  # for the test of the note (not pytest's cache: it may be disabled)
    config = root / "tiny.json"
    config.write_text(json.dumps({**TINY, "workers": 2}))
    argv = ["transfer", "--config", str(config), "--run-dir", str(root / "run"),
            "--log-with", ",".join(["tensorboard"] + missing[:1])]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XLVIZ_CHECKPOINTS", str(root))  # the CLI confines run folders to the checkpoints root
        assert cli(argv) == 0
    return root / "run"


def test_tensorboard_holds_the_metrics_jsonl_values(tracked_run):
    rows = Run(tracked_run).metrics(all_attempts=True)
    assert len(rows) >= 4 and {"s1_pretrain", "s3_finetune"} <= {r["stage"] for r in rows}
    scalars = _scalars(tracked_run)
    for r in rows:
        for key in ("loss", "elapsed"):
            assert scalars[(f"{r['stage']}/{key}", r["step"])] == pytest.approx(r[key], rel=1e-6, abs=1e-6), (r, key)
    # nothing in the event files that metrics.jsonl does not have
    expected = {(f"{r['stage']}/{k}", r["step"]) for r in rows for k, v in r.items()
                if k not in ("stage", "step") and isinstance(v, (int, float))}
    assert set(scalars) == expected


def test_log_with_is_recorded_and_a_missing_tracker_is_a_note(tracked_run, request):
    cfg = json.loads((tracked_run / "config.json").read_text())
    missing = list(MISSING)
    assert cfg["log_with"] == ",".join(["tensorboard"] + missing)
    log = (tracked_run / "log.txt").read_text()
    assert "completed" in log
    if missing:
        assert f"tracker(s) {missing[0]} not installed here: skipped" in log


def test_log_with_none_writes_no_event_files_and_bad_names_are_one_line(tmp_path, monkeypatch, capsys):
    from xlviz.transfer.config import TransferConfig
    from xlviz.errors import XlvizError

    with pytest.raises(XlvizError, match="unknown tracker 'tensorbored'") as e:
        TransferConfig.from_dict({**TINY, "log_with": "tensorbored"})
    assert e.value.field == "log_with"
    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(tmp_path))
    config = tmp_path / "tiny.json"
    config.write_text(json.dumps({**TINY, "pretrain_steps": 2, "finetune_steps": 2, "methods": ["floor"]}))
    assert cli(["transfer", "--config", str(config), "--run-dir", str(tmp_path / "bad"), "--log-with", "nope"]) == 2
    assert "log_with" in capsys.readouterr().err
    assert cli(["transfer", "--config", str(config), "--run-dir", str(tmp_path / "run"), "--log-with", "none"]) == 0
    assert not (tmp_path / "run" / "tensorboard").exists() and Run(tmp_path / "run").metrics()


def test_dev_scores_during_fine_tuning_reach_metrics_and_tensorboard(tracked_run):
    """QA fine-tuning logs dev EM/F1 (at the last step with TINY's 2 steps and eval_every 300)."""
    rows = [r for r in Run(tracked_run).metrics() if r["stage"] == "s3_finetune"]
    last = rows[-1]
    assert {"dev_exact_match", "dev_f1"} <= set(last) and 0 <= last["dev_f1"] <= 100
    scalars = _scalars(tracked_run)
    assert scalars[("s3_finetune/dev_f1", last["step"])] == pytest.approx(last["dev_f1"], rel=1e-6, abs=1e-6)


def test_evaluating_during_training_changes_no_weight():
    """``on_eval`` runs at every eval_every-th step and the last, its values join that step's
    log row, and the trained weights are bit-identical to a run without it."""
    import torch

    from xlviz.training.loop import LoopConfig, make_accelerator, train

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)
            self.drop = torch.nn.Dropout(0.5)  # draws random numbers in training mode only

        def forward(self, x):
            return self.drop(self.lin(x)).pow(2).mean()

    def batches():
        g = torch.Generator().manual_seed(1)
        while True:
            yield {"x": torch.randn(3, 4, generator=g)}

    def fit(with_eval: bool):
        torch.manual_seed(0)
        model, logged, evaluated = Tiny(), [], []

        def on_eval(step, module):
            assert not module.training
            evaluated.append(step)
            _ = module(torch.ones(2, 4))  # a forward pass, as a dev evaluation does
            return {"dev_f1": float(step)}

        cfg = LoopConfig(steps=7, lr=0.1, log_every=2, eval_every=3)
        out = train(model, batches(), cfg, make_accelerator("no"), desc="t",
                    on_log=lambda step, loss, elapsed, **dev: logged.append((step, dev)),
                    on_eval=on_eval if with_eval else None)
        return out, logged, evaluated

    a, logged_a, evaluated = fit(True)
    b, logged_b, _ = fit(False)
    assert evaluated == [3, 6, 7]
    assert [s for s, _ in logged_a] == [2, 3, 4, 6, 7] and dict(logged_a)[3] == {"dev_f1": 3.0}
    assert [s for s, _ in logged_b] == [2, 4, 6, 7]
    assert all(torch.equal(p, q) for p, q in zip(a.state_dict().values(), b.state_dict().values()))
