"""Stage verdicts and the NaN-loss stop: the entropy arithmetic on hand-computed values, the
thresholds, a loss that turns NaN, and a planted degenerate stage (a pair model trained at a
learning rate of zero) refused by every consumer: results.json, the CLI table, ``xlviz
report``, the Runs, XQuAD and Probing pages, ``xlviz analyse probing``, ``--strict``."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from xlviz.cli import main as cli
from xlviz.errors import XlvizError
from xlviz.runs import Run
from xlviz.training.verdicts import StageMonitor, conditional_entropy, entropy, mlm_verdict, plateau_loss, qa_verdict

LN2 = math.log(2)
APP = str(Path(__file__).resolve().parent.parent / "app.py")


# --------------------------------------------------------------------------- arithmetic
def test_entropy_of_hand_counted_tokens():
    # tokens a a b c: p = 1/2, 1/4, 1/4 -> H = 1/2 ln 2 + 2 * 1/4 ln 4 = 1.5 ln 2
    assert entropy([2, 1, 1]) == pytest.approx(1.5 * LN2)
    assert entropy([5]) == 0.0
    assert entropy([3, 0, 3]) == pytest.approx(LN2)  # zeros ignored
    assert math.isnan(entropy([]))
    # H(Y|X): x=0 -> y in {1, 2} equally (ln 2), x=1 -> always y=3 (0); p(x=0) = 1/2
    assert conditional_entropy({(0, 1): 1, (0, 2): 1, (1, 3): 2}) == pytest.approx(0.5 * LN2)


def test_monitor_counts_targets_and_their_left_neighbours():
    # one block [CLS] 7 8 7 9 [SEP]; targets at positions 2, 3, 4 (labels 8, 7, 9), inputs masked there
    ids = torch.tensor([[2, 7, 4, 4, 9, 3]])
    labels = torch.tensor([[-100, -100, 8, 7, 9, -100]])
    m = StageMonitor()
    m.batch({"input_ids": ids, "labels": labels})
    # a streamed corpus batch (xlviz.training.streamed) carries its share of the global batch's targets
    m.batch({"input_ids": torch.tensor([[2, 8, 4, 3]]), "labels": torch.tensor([[-100, -100, 8, -100]]),
             "denominator": torch.tensor(1.0)})
    assert m.mlm and m.targets == 4
    # targets 8, 7, 9, 8: p = 1/2, 1/4, 1/4
    assert m.unigram_entropy() == pytest.approx(1.5 * LN2)
    # (previous original token, target): (7, 8), (8, 7), (7, 9), (8, 8): x=7 -> {8, 9}, x=8 -> {7, 8}
    assert m.bigram_entropy() == pytest.approx(LN2)
    m.losses = [5.0] * 10 + [3.0] * 10  # the last tenth: 2 steps
    assert m.final_loss() == pytest.approx(3.0)
    m.batch({"input_ids": ids, "start_positions": torch.tensor([1])})
    assert not m.mlm  # a QA batch: the stage is no masked-LM stage


def test_monitor_entropy_per_language_group():
    # ids 5-6 are language 0, 7-8 language 1; each row uses one language, each target uniform
    # over its language's two tokens: H(T | language) = ln 2, the mixture's unigram entropy ln 4
    m = StageMonitor()
    m.id_groups = torch.tensor([-1, -1, -1, -1, -1, 0, 0, 1, 1])
    m.batch({"input_ids": torch.tensor([[2, 4, 4, 3], [2, 4, 4, 3]]),
             "labels": torch.tensor([[-100, 5, 6, -100], [-100, 7, 8, -100]])})
    assert m.unigram_entropy() == pytest.approx(LN2)
    m.id_groups = None
    m2 = StageMonitor()
    m2.batch({"input_ids": torch.tensor([[2, 4, 4, 3], [2, 4, 4, 3]]),
              "labels": torch.tensor([[-100, 5, 6, -100], [-100, 7, 8, -100]])})
    assert m2.unigram_entropy() == pytest.approx(2 * LN2)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (the batch on a GPU, the counts on the CPU)")
def test_monitor_counts_a_batch_on_the_gpu():
    m = StageMonitor()
    m.id_groups = torch.tensor([-1, -1, -1, -1, -1, 0, 0, 1, 1])
    m.batch({"input_ids": torch.tensor([[2, 4, 4, 3]], device="cuda"), "labels": torch.tensor([[-100, 5, 6, -100]], device="cuda")})
    assert m.targets == 2 and m.unigram_entropy() == pytest.approx(LN2)


def test_the_loop_hands_the_monitor_the_batch_before_it_moves_to_the_device(monkeypatch):
    """The monitor's counts live on the CPU: it sees the batch as the stage yielded it, not
    the copy on the device. On a CPU ``.to(device)`` returns the tensor itself, so here every
    ``Tensor.to`` returns a copy, as a move to a GPU does."""
    from xlviz.training.loop import LoopConfig, make_accelerator, train

    to = torch.Tensor.to

    def copying_to(self, *args, **kwargs):
        out = to(self, *args, **kwargs)
        return out.clone() if out is self else out

    monkeypatch.setattr(torch.Tensor, "to", copying_to)

    seen = []

    class Recorder(StageMonitor):
        def batch(self, batch):
            seen.append(batch["input_ids"])
            super().batch(batch)

    yielded = [torch.tensor([[2, 5, 4, 3]]) for _ in range(2)]
    labels = torch.tensor([[-100, -100, 6, -100]])

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(1))

        def forward(self, input_ids, labels):
            return (self.w * input_ids.float().sum() * 0.0 + self.w).sum()

    cfg = LoopConfig(steps=2, lr=1e-3, log_every=1, monitor=Recorder())
    train(Model(), iter({"input_ids": y, "labels": labels} for y in yielded), cfg, make_accelerator("no"))
    assert [t is y for t, y in zip(seen, yielded)] == [True, True] and cfg.monitor.targets == 2


def test_verdict_thresholds():
    assert mlm_verdict(2.9, 4.0, 1.8, margin=1.0)["verdict"] == "ok"
    assert mlm_verdict(3.0, 4.0, 1.8, margin=1.0)["verdict"] == "ok"  # exactly the margin
    bad = mlm_verdict(3.7, 4.01, 1.75, margin=1.0)  # the plateau of docs/world.md
    assert bad["verdict"] == "degenerate" and bad["unigram_entropy"] == 4.01 and "0.310 nats below" in bad["reason"]
    assert "above" in mlm_verdict(4.5, 4.0, 1.8)["reason"]
    assert mlm_verdict(float("nan"), 4.0, 1.8)["verdict"] == "degenerate"
    assert qa_verdict(30.0, 15.0, margin=10)["verdict"] == "ok"
    assert qa_verdict(24.9, 15.0, margin=10)["verdict"] == "degenerate"
    assert qa_verdict(float("nan"), 0.0, margin=-100)["verdict"] == "degenerate"


def test_plateau_loss_by_hand():
    """A frequency-only model at 80/10/10 masking: H at a [MASK] (0.8); at a visible target it
    bets half on the token it sees (unchanged or random, one tenth each): ln 2, plus H when
    the token was random. 0.8 * 4 + 0.2 * (ln 2 + 2) = 3.7386 for H = 4 nats."""
    assert plateau_loss(4.0) == pytest.approx(0.8 * 4 + 0.2 * (math.log(2) + 2.0))
    assert plateau_loss(4.01) == pytest.approx(3.748, abs=1e-3)  # plateau models ended at 3.73-3.82
    assert plateau_loss(4.0, mask=1.0, random=0.0) == 4.0  # every target masked: the unigram entropy
    assert plateau_loss(4.0, mask=0.8, random=0.2) == pytest.approx(4.0)  # nothing unchanged: no bet helps
    assert plateau_loss(4.0, mask=0.8, random=0.0) == pytest.approx(3.2)  # every visible target is itself
    assert mlm_verdict(5.4, 5.9, 3.4)["plateau_loss"] == pytest.approx(plateau_loss(5.9), abs=1e-4)
    assert "frequencies ends near 5.449" in mlm_verdict(5.4, 5.9, 3.4)["reason"]
    # masked without random tokens (90% [MASK], 10% unchanged): 0.9 H
    assert mlm_verdict(5.4, 5.9, 3.4, random_share=0.0)["plateau_loss"] == pytest.approx(0.9 * 5.9, abs=1e-4)


def test_first_words_baseline_is_the_best_k():
    from xlviz.transfer.tasks.qa import first_words_baseline

    data = {"data": [{"paragraphs": [
        {"context": "red fox jumps high", "qas": [{"id": "a", "question": "who?", "answers": [{"text": "red fox", "answer_start": 0}]},
                                                 {"id": "b", "question": "how?", "answers": [{"text": "high", "answer_start": 14}]}]}]}]}
    # k=1: "red" -> F1 2/3 and 0 -> 33.3; k=2: "red fox" -> 100 and 0 -> 50; k=3: 80 and 0 -> 40;
    # k=4: the whole context -> 2/3 (against "red fox") and 2/5 (against "high") -> 53.3
    f1, k = first_words_baseline(data, 3)
    assert (k, f1) == (2, pytest.approx(50.0))
    f1, k = first_words_baseline(data, 4)
    assert (k, f1) == (4, pytest.approx(100 * (2 / 3 + 2 / 5) / 2))


# --------------------------------------------------------------------------- tiny runs
TINY = {
    "model_size": "tiny", "vocab_size": 200, "batch_size": 8, "mlm_batch_size": 32, "pretrain_steps": 40, "transfer_steps": 4,
    "finetune_steps": 6, "log_every": 5, "mixed_precision": "no", "methods": ["jointpair-disjoint"], "tasks": ["qa", "probing"],
    # Judged at the test's budget: 40 steps bring a pair model from ln(~400) ~ 6.0 to within
    # ~0.9 nats of the unigram entropy (3.9); at lr 0 it stays at ~6.0. A real run's margin is
    # +1.0 (at least 1 nat below). The QA check is tested on numbers above (6 steps learn no QA).
    "verdict_mlm_margin": -1.5, "verdict_qa_margin": -100.0,
    "world": {"corpus_documents": 120, "qa_train_paragraphs": 20, "qa_dev_paragraphs": 3, "qa_test_paragraphs": 4,
              "parallel_pairs": 20, "agreement_pairs": 9, "sense_pairs": 6},
}
PLANTED = "s1_jointpair-disjoint-sov"


def write_config(path: Path, **overrides) -> Path:
    cfg = json.loads(json.dumps(TINY))
    cfg.update(overrides)
    path.write_text(json.dumps(cfg))
    return path


LOOPS: dict[str, object] = {}  # stage -> the warm-up kind it asked its loop for (planted run)


def plant_zero_lr(monkeypatch, stage: str = PLANTED) -> None:
    """Train ``stage`` at a learning rate of zero (every other stage as configured)."""
    from xlviz.training.staged import StagedRun

    real = StagedRun.loop

    def loop(self, name, steps, lr, **kw):
        LOOPS[name] = kw.get("pretraining", False)
        return real(self, name, steps, 0.0 if name == stage else lr, **kw)

    monkeypatch.setattr(StagedRun, "loop", loop)


@pytest.fixture(scope="module")
def planted_run(tmp_path_factory) -> Run:
    mp = pytest.MonkeyPatch()
    try:
        root = tmp_path_factory.mktemp("verdicts")
        plant_zero_lr(mp)
        config = write_config(root / "tiny.json")
        assert cli(["transfer", "--config", str(config), "--run-dir", str(root / "checkpoints" / "planted")]) == 0
    finally:
        mp.undo()
    return Run(root / "checkpoints" / "planted")


@pytest.mark.slow
def test_planted_stage_is_degenerate_and_its_healthy_twin_ok(planted_run):
    v = planted_run.verdicts()
    bad, good = v[PLANTED], v["s1_jointpair-disjoint-svo"]
    assert bad["verdict"] == "degenerate" and good["verdict"] == "ok", (bad, good)
    assert bad["loss"] > good["loss"] + 1.0  # lr 0 stays near ln(vocabulary); the twin learned
    for rec in (bad, good):
        assert 0 < rec["bigram_entropy"] < rec["unigram_entropy"] < rec["loss"] + 3
    assert v["s3_jointpair-disjoint-svo"]["kind"] == "qa" and "dev_f1" in v["s3_jointpair-disjoint-svo"]
    rows = {r["language"]: r for r in planted_run.results()}
    assert rows["sov"]["verdict"] == "degenerate" and rows["sov"]["degenerate_stages"] == [PLANTED]
    assert rows["en"]["verdict"] == "ok" and rows["svo"]["verdict"] == "ok"  # the svo pair model scores en and svo
    assert "DEGENERATE" in planted_run.log_tail(200)


@pytest.mark.slow
def test_report_refuses_degenerate_rows(planted_run, capsys, tmp_path):
    import shutil

    from xlviz.transfer.report import results_table

    table = results_table(planted_run.results())
    sov = next(line for line in table.splitlines() if " sov " in line)
    assert "degenerate" in sov and PLANTED in sov and not any(c.isdigit() for c in sov.split("(")[0].replace("jointpair", ""))
    # a second seed with the same rows (the report refuses one run given twice, and one seed counted twice)
    twin = tmp_path / "twin"
    twin.mkdir()
    for name in ("results.json", "verdicts.json", "manifest.json"):
        if (planted_run.path / name).exists():
            shutil.copy(planted_run.path / name, twin / name)
    (twin / "config.json").write_text(json.dumps({**planted_run.config(), "seed": planted_run.config()["seed"] + 1}))
    assert cli(["report", str(planted_run.path), str(twin)]) == 0
    out = capsys.readouterr().out
    head = [c.strip() for c in next(l for l in out.splitlines() if l.startswith("| system")).strip().strip("|").split("|")]
    cells = [c.strip() for c in next(l for l in out.splitlines() if l.startswith("| jointpair-disjoint")).strip().strip("|").split("|")]
    assert cells[head.index("sov")] == "—" and cells[head.index("svo")] != "—"  # no mean of the degenerate rows
    assert out.count("left out: jointpair-disjoint sov") == 2 and PLANTED in out


@pytest.mark.slow
def test_app_pages_show_degenerate_not_a_number(planted_run, monkeypatch):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(planted_run.path.parent))
    at = AppTest.from_file(APP, default_timeout=120).run()
    assert not at.exception
    home = at.dataframe[0].value
    assert int(home.loc[home["run"] == "planted", "degenerate rows"].iloc[0]) == 1
    at.switch_page("pages/runs.py").run()
    assert not at.exception, [e.message for e in at.exception]
    verdicts = next(d.value for d in at.dataframe if "verdict" in d.value.columns and "why" in d.value.columns)
    assert dict(zip(verdicts["stage"], verdicts["verdict"]))[PLANTED] == "degenerate"
    results = next(d.value for d in at.dataframe if "sov · F1" in d.value.columns and "parallel pairs" in d.value.columns)
    assert results.loc["jointpair-disjoint", "sov · F1"] == "degenerate" and results.loc["jointpair-disjoint", "sov · EM"] == "degenerate"
    assert results.loc["jointpair-disjoint", "svo · F1"] not in ("degenerate", None)
    at = AppTest.from_file(APP, default_timeout=120)
    at.session_state["xlviz_models"] = ["run:planted:export:jointpair-disjoint"]
    at.session_state["xlviz_languages"] = ["en", "svo", "sov"]
    at.run()
    at.switch_page("pages/xquad.py").run()
    assert not at.exception, [e.message for e in at.exception]
    f1 = next(d.value for d in at.dataframe if "sov" in getattr(d.value, "columns", []))
    assert (f1["sov"] == "degenerate").all() and not (f1["svo"] == "degenerate").any()


def test_compare_table_blanks_ratio_and_mean_of_degenerate_rows():
    import pandas as pd

    from xlviz.views.runs import compare_table, seed_summary

    long = pd.DataFrame([
        {"run": r, "setting": "zero-shot", "system": "s", "language": lang, "exact_match": f1 - 5, "f1": f1, "parallel_pairs": 0,
         "l1_f1": None, "l1": "en", "verdict": "degenerate" if (r, lang) == ("b", "sov") else None}
        for r, lang, f1 in [("a", "en", 80.0), ("a", "sov", 40.0), ("b", "en", 70.0), ("b", "sov", 69.0)]])
    wide = compare_table(long).set_index("run")
    assert wide.loc["b", "F1 sov"] == "degenerate" and wide.loc["b", "EM sov"] == "degenerate"
    assert pd.isna(wide.loc["b", "F1 sov/L1"]) and wide.loc["a", "F1 sov/L1"] == pytest.approx(0.50)
    summary = seed_summary(long, [["a", "b"]]).set_index("language")
    assert summary.loc["sov", "n"] == 1 and summary.loc["sov", "F1 mean"] == pytest.approx(40.0)


# --------------------------------------------------------------------------- the recipe's settings
def test_warmup_and_beta2_reach_the_optimizer_and_are_checked(monkeypatch):
    """The plateau-fix candidates are run settings: the staged loop builds AdamW with the
    config's beta2 and its warm-up share; a value outside [0, 1) is one line naming the field."""
    import xlviz.training.loop as loop
    from xlviz.transfer.config import TransferConfig

    seen = {}
    real = loop.make_optimizer

    def spy(model, lr, weight_decay, beta2=0.999):
        opt = real(model, lr, weight_decay, beta2)
        seen["betas"] = opt.param_groups[0]["betas"]
        return opt

    monkeypatch.setattr(loop, "make_optimizer", spy)
    module = torch.nn.Linear(2, 1)
    batches = iter(lambda: {"x": torch.ones(2)}, None)

    class Wrap(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = module

        def forward(self, x):
            return self.m(x).sum() ** 2

    lrs = []
    cfg = loop.LoopConfig(steps=10, lr=1.0, warmup_ratio=0.5, adam_beta2=0.98)
    loop.train(Wrap(), batches, cfg, loop.make_accelerator("no"), desc="s1_x")
    assert seen["betas"] == (0.9, 0.98)
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    sched = loop.linear_schedule(opt, 10, 0.5)
    for _ in range(6):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert lrs == pytest.approx([0.2, 0.4, 0.6, 0.8, 1.0, 1.0])  # 5 warm-up updates of 10, then linear decay from 1
    assert TransferConfig().adam_beta2 == 0.999 and TransferConfig().warmup_ratio == 0.06  # the recipe before, unchanged
    for field, bad in (("adam_beta2", 1.0), ("warmup_ratio", -0.1)):
        with pytest.raises(XlvizError, match=field):
            TransferConfig.from_dict({field: bad}, path="config.json")


def test_each_stage_asks_for_its_warmup(planted_run):
    """In a real run of the pair models: each pair model warms up as a joint pre-training, its
    QA fine-tuning as any other stage."""
    assert LOOPS["s1_jointpair-disjoint-svo"] == LOOPS["s1_jointpair-disjoint-sov"] == "joint"
    assert LOOPS["s3_jointpair-disjoint-svo"] is False


def test_l2_bodies_ask_for_their_own_warmup(monkeypatch):
    """MONOTRANS's step 1 warms up as a one-language pre-training, an L2's own body
    (``s1_pretrain-<l2>``: mono-L2, the xx→en bodies) over ``l2_body_warmup_ratio``."""
    from types import SimpleNamespace

    from xlviz.methods import common

    seen = {}

    def fake_train_mlm(ctx, model, target, name, steps, lr, pretraining=False, **kw):
        seen[name] = pretraining
        raise StopIteration  # nothing to save

    monkeypatch.setattr(common, "train_mlm", fake_train_mlm)
    world = SimpleNamespace(l1="en")
    ctx = SimpleNamespace(cfg=SimpleNamespace(pretrain_steps=1, pretrain_lr=1e-3), world=world, data=world)
    for lang in (None, "sov"):
        with pytest.raises(StopIteration):
            common.pretrain_stage(lang).train(ctx, None)
    assert seen == {"s1_pretrain": True, "s1_pretrain-sov": "l2_body"}


def test_pretraining_has_its_own_warmup_and_old_runs_keep_theirs():
    """``pretrain_warmup_ratio`` reaches the loops of one-language pre-trainings,
    ``joint_warmup_ratio`` those of models pre-trained on several languages, ``warmup_ratio``
    every other stage's; the world's pre-trainings warm up over a quarter of their updates (the
    plateau fix), corpus sources keep the warm-up they were measured with; a run recorded before
    a setting existed reads back with the warm-up it ran with."""
    from types import SimpleNamespace

    from xlviz.training.staged import StagedRun
    from xlviz.transfer.config import TransferConfig

    cfg = TransferConfig.from_dict({"warmup_ratio": 0.1, "pretrain_warmup_ratio": 0.2, "joint_warmup_ratio": 0.3,
                                    "l2_body_warmup_ratio": 0.4})
    owner = SimpleNamespace(cfg=cfg)
    seen = [StagedRun.loop(owner, "s", 100, 1e-3, pretraining=kind)[0].warmup_ratio for kind in (True, "joint", "l2_body", False)]
    assert seen == [0.2, 0.3, 0.4, 0.1]
    default = TransferConfig()
    assert (default.warmup_ratio, default.pretrain_warmup_ratio, default.joint_warmup_ratio,
            default.l2_body_warmup_ratio) == (0.06, 0.25, 0.25, 0.25)
    corpus = TransferConfig.from_dict({"source": "multi30k"})
    assert (corpus.pretrain_warmup_ratio, corpus.joint_warmup_ratio) == (0.06, 0.06)
    recorded = {**cfg.to_dict(), "versions": {"torch": "x"}}
    for key in ("pretrain_warmup_ratio", "joint_warmup_ratio", "l2_body_warmup_ratio"):
        recorded.pop(key)
    back = TransferConfig.from_dict(recorded)
    # everything warmed up over warmup_ratio
    assert (back.pretrain_warmup_ratio, back.joint_warmup_ratio, back.l2_body_warmup_ratio) == (0.1, 0.1, 0.1)
    recorded["pretrain_warmup_ratio"] = 0.25  # recorded while one setting covered every pre-training
    assert TransferConfig.from_dict(recorded).joint_warmup_ratio == TransferConfig.from_dict(recorded).l2_body_warmup_ratio == 0.25
    recorded["l2_body_warmup_ratio"] = 0.06  # recorded with its own setting: kept
    assert TransferConfig.from_dict(recorded).l2_body_warmup_ratio == 0.06
    for field in ("pretrain_warmup_ratio", "joint_warmup_ratio", "l2_body_warmup_ratio"):
        with pytest.raises(XlvizError, match=field):
            TransferConfig.from_dict({field: 1.5}, path="config.json")


# --------------------------------------------------------------------------- NaN and strict
def test_loop_stops_at_the_first_non_finite_loss():
    from xlviz.training.loop import LoopConfig, NonFiniteLoss, make_accelerator, train

    class Blows(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(2))
            self.calls = 0

        def forward(self, x):
            self.calls += 1
            return (self.w * x).sum() * (float("nan") if self.calls == 4 else 1.0)

    module = Blows()
    batches = iter(lambda: {"x": torch.ones(2)}, None)
    with pytest.raises(NonFiniteLoss, match=r"stage s1_x: the loss became nan at step 4 of 10 \(learning rate 0.5\)"):
        train(module, batches, LoopConfig(steps=10, lr=0.5), make_accelerator("no"), desc="s1_x")
    assert module.calls == 4 and bool(torch.isfinite(module.w).all())  # the NaN never reached the weights
    assert issubclass(NonFiniteLoss, XlvizError)


@pytest.mark.slow
def test_nan_loss_stops_the_run_with_one_line_and_resume_works(tmp_path, monkeypatch, capsys):
    from xlviz.training import mlm

    real = mlm.MaskedOnlyMLM.forward
    calls = {"n": 0}

    def forward(self, *a, **kw):
        calls["n"] += 1
        loss = real(self, *a, **kw)
        return loss * float("nan") if calls["n"] >= 12 else loss  # the absurd learning rate's effect, on cue

    monkeypatch.setattr(mlm.MaskedOnlyMLM, "forward", forward)
    config = write_config(tmp_path / "c.json", pretrain_steps=20, pretrain_lr=0.01, log_every=5)
    run = Run(tmp_path / "checkpoints" / "nan")
    assert cli(["transfer", "--config", str(config), "--run-dir", str(run.path)]) == 2
    lines = capsys.readouterr().err.replace("\r", "\n").splitlines()
    err = [l for l in lines if "error" in l or "Traceback" in l]  # (the rest is the progress bars)
    assert len(err) == 1 and err[0].startswith("xlviz transfer: error: ") and "Traceback" not in err[0], err
    assert "the loss became nan at step 12 of 20" in err[0] and "learning rate 0.01" in err[0], err
    status = run.status()
    assert status["state"] == "failed" and "step 12" in status["error"]
    stage = "s1_jointpair-disjoint-svo"
    assert stage in status["error"] and "world" in status["stages_done"] and stage not in status["stages_done"]
    steps = [m["step"] for m in run.metrics() if m["stage"] == stage]
    assert steps == [5, 10]  # every row up to the step, none after
    assert not (run.path / stage).exists() and (run.path / "world" / "tokenizers").is_dir()
    monkeypatch.setattr(mlm.MaskedOnlyMLM, "forward", real)
    cfg = json.loads(run.config_path.read_text())
    cfg["pretrain_lr"] = 2e-3  # lowered, as the message says
    run.config_path.write_text(json.dumps(cfg))
    assert cli(["transfer", "--resume", str(run.path)]) == 0
    assert run.status()["state"] == "completed" and len(run.results()) == 3


@pytest.mark.slow
def test_strict_stops_at_the_first_degenerate_stage(tmp_path, monkeypatch, capsys):
    plant_zero_lr(monkeypatch)
    config = write_config(tmp_path / "c.json")
    run = Run(tmp_path / "checkpoints" / "strict")
    assert cli(["transfer", "--config", str(config), "--run-dir", str(run.path), "--strict"]) == 2
    err = capsys.readouterr().err
    assert f"stage {PLANTED} is degenerate" in err and "strict" in err
    status = run.status()
    assert status["state"] == "failed" and PLANTED not in status["stages_done"]
    assert run.verdicts()[PLANTED]["verdict"] == "degenerate"
    assert not run.results()  # stopped before any system was scored


@pytest.mark.slow
def test_stage_workers_send_verdicts_to_the_runs_writer(tmp_path):
    """With stages at once, workers judge their stages and send the verdicts as JSON lines; the
    lock holder writes verdicts.json (and marks the rows) as for a one-process run."""
    config = write_config(tmp_path / "c.json", workers=2)
    run = Run(tmp_path / "checkpoints" / "workers")
    assert cli(["transfer", "--config", str(config), "--run-dir", str(run.path)]) == 0
    v = run.verdicts()
    assert {k: v[k]["kind"] for k in v} == {"s1_jointpair-disjoint-svo": "mlm", "s1_jointpair-disjoint-sov": "mlm",
                                            "s3_jointpair-disjoint-svo": "qa", "s3_jointpair-disjoint-sov": "qa"}
    assert all(v[k]["verdict"] == "ok" for k in v), v  # both pair models learn at the test's margins
    assert {r["verdict"] for r in run.results()} == {"ok"}


def test_rows_depend_on_the_model_that_scores_them(tmp_path):
    """A pair model's row depends on its own pair's stages (so one stuck pair model does not
    void the other pair's rows); a single-model system's rows on all its stages."""
    from xlviz.methods import method_of
    from xlviz.transfer.config import TransferConfig
    from xlviz.transfer.pipeline import Pipeline

    systems = ["monotrans", "jointpair-disjoint", "mono-l2-supervised", "veco", "jointmulti"]
    p = Pipeline(TransferConfig.from_dict({**TINY, "methods": systems}), tmp_path / "r")

    def deps(system, lang):
        return set(method_of(system).row_stages(p, system, lang)) - {"world"}

    assert deps("jointpair-disjoint", "sov") == {"s1_jointpair-disjoint-sov", "s3_jointpair-disjoint-sov"}
    assert deps("jointpair-disjoint", "en") == {"s1_jointpair-disjoint-svo", "s3_jointpair-disjoint-svo"}  # the first pair
    assert deps("mono-l2-supervised", "svo") == {"s1_pretrain-svo", "s3_supervised-svo"}
    assert deps("veco", "sov") and all(s.endswith("-sov") for s in deps("veco", "sov"))
    assert deps("monotrans", "sov") >= {"s1_pretrain", "s2_transfer-sov", "s3_finetune"}
    assert deps("jointmulti", "sov") >= {"s1_jointmulti", "s3_jointmulti"}


def test_an_encoder_depends_on_the_stages_its_weights_come_from(tmp_path):
    """What the probes judge an encoder by: its body and its own language's transfer, never a
    QA fine-tuning or another language's transfer; an xx→en model's L1 side on its L2's body."""
    from xlviz.methods import method_of
    from xlviz.transfer.config import TransferConfig
    from xlviz.transfer.pipeline import Pipeline

    systems = ["monotrans", "floor", "jointpair-disjoint", "monotrans-into-l1", "mono-l2"]
    p = Pipeline(TransferConfig.from_dict({**TINY, "methods": systems}), tmp_path / "r")

    def deps(system, lang, pair=None):
        return set(method_of(system).encoder_stages(p, system, lang, pair)) - {"world"}

    assert deps("monotrans", "sov") == {"s1_pretrain", "s2_transfer-sov"}
    assert deps("monotrans", "en") == {"s1_pretrain"} and deps("floor", "sov") == {"s1_pretrain"}
    assert deps("monotrans-into-l1", "en") == {"s1_pretrain-svo", "s2_into_l1-svo"}  # the first L2's body
    assert deps("monotrans-into-l1", "en", pair="sov") == {"s1_pretrain-sov", "s2_into_l1-sov"}
    assert deps("monotrans-into-l1", "sov") == {"s1_pretrain-sov"}
    assert deps("jointpair-disjoint", "en", pair="sov") >= {"s1_jointpair-disjoint-sov"}
    assert "s1_jointpair-disjoint-svo" not in deps("jointpair-disjoint", "en", pair="sov")
    assert deps("mono-l2", "sov") >= {"s1_pretrain-sov"} and "s1_pretrain-svo" not in deps("mono-l2", "sov")


@pytest.mark.slow
def test_probes_refuse_an_encoder_built_on_a_degenerate_stage(planted_run, capsys):
    """The Probing analyses (``run_probe_models``, ``xlviz analyse probing``) list the planted
    pair model's encoder as degenerate and never probe it; its healthy twin is probed."""
    from xlviz.analysis.reports import run_probe_models, run_probing

    entries = {e["path"]: e for e in json.loads(planted_run.manifest_path.read_text())["artefacts"]}
    assert PLANTED in entries["encoders/jointpair-disjoint-sov"]["depends_on"]
    assert PLANTED not in entries["encoders/jointpair-disjoint-svo"]["depends_on"]
    models = {m.language: m for m in run_probe_models(planted_run.path, ["svo", "sov"], floor=False)}
    assert models["sov"].degenerate == (PLANTED,) and PLANTED in models["sov"].degenerate_reason
    assert models["svo"].degenerate == () and models["en"].degenerate == ()
    res = run_probing(planted_run.path, ["svo", "sov"], tasks=("agreement",), max_per_category=2, floor=False)
    assert {r["language"] for r in res["agreement"]} == {"en", "svo"}  # no number for the sov encoder
    assert [(r["language"], r["degenerate_stages"]) for r in res["degenerate"]] == [("sov", [PLANTED])]
    out = tmp = planted_run.path.parent / "probing.json"
    assert cli(["analyse", "probing", "--run", str(planted_run.path), "--l2", "sov", "--tasks", "agreement",
                "--max-per-category", "2", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "not probed, DEGENERATE: planted · jointpair-disjoint (sov)" in printed and PLANTED in printed
    assert json.loads(tmp.read_text())["degenerate"][0]["verdict"] == "degenerate"
    # the run's own agreement task (--tasks probing) scored the healthy encoders only
    rows = {r["language"]: r for r in planted_run.results()}
    assert rows["sov"]["agreement"] is None and rows["sov"]["agreement_verdict"] == "degenerate"
    assert rows["sov"]["agreement_degenerate_stages"] == [PLANTED]
    assert "agreement_verdict" not in rows["svo"] and rows["svo"]["agreement_total"] > 0


@pytest.mark.slow
def test_alignment_refuses_a_system_built_on_a_degenerate_stage(planted_run, monkeypatch, capsys):
    """The Alignment page and ``xlviz analyse alignment --run`` leave out the planted pair
    model's system and say why; its healthy twin is compared."""
    from streamlit.testing.v1 import AppTest

    from xlviz.analysis.reports import run_systems

    (sov,) = run_systems(planted_run.path, "sov")
    (svo,) = run_systems(planted_run.path, "svo")
    assert sov.degenerate == (PLANTED,) and PLANTED in sov.degenerate_reason and svo.degenerate == ()
    out = planted_run.path.parent / "alignment.json"
    assert cli(["analyse", "alignment", "--run", str(planted_run.path), "--l2", "svo", "--limit", "8",
                "--out", str(out)]) == 0
    assert "DEGENERATE" not in capsys.readouterr().out and json.loads(out.read_text())["rows"]
    assert cli(["analyse", "alignment", "--run", str(planted_run.path), "--l2", "sov", "--limit", "8"]) == 2
    err = capsys.readouterr()
    assert "not compared, DEGENERATE: planted · jointpair-disjoint" in err.out and "degenerate stage" in err.err

    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(planted_run.path.parent))
    at = AppTest.from_file(APP, default_timeout=180)
    at.run()
    at.switch_page("pages/alignment.py")
    at.session_state["al_run"] = "planted"
    at.session_state["al_l2"] = "sov"
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    warning = " ".join(w.value for w in at.warning)
    assert "Not offered, built on a degenerate stage" in warning and "planted · jointpair-disjoint" in warning and PLANTED in warning
    offered = at.multiselect(key="al_systems").options
    assert not any("planted" in o for o in offered), offered
    at.session_state["al_l2"] = "svo"  # the healthy twin is offered and picked
    at.run()
    assert not at.exception and "planted · jointpair-disjoint" in at.multiselect(key="al_systems").options
    assert at.multiselect(key="al_systems").value == ["run:planted:jointpair-disjoint"]


@pytest.mark.slow
def test_a_run_without_recorded_dependencies_refuses_every_encoder_if_a_stage_is_degenerate(planted_run, tmp_path):
    """A run written before encoders recorded their stages: any degenerate stage refuses its
    encoders (which ones it touches is unknown), saying why; step 1's own verdict still decides
    the L1 model. ``xlviz runs dependencies`` records them afterwards."""
    import shutil

    from xlviz.analysis.reports import run_probe_models

    copy = Path(shutil.copytree(planted_run.path, tmp_path / "legacy"))
    data = json.loads((copy / "manifest.json").read_text())
    for e in data["artefacts"]:
        e.pop("depends_on", None)
    (copy / "manifest.json").write_text(json.dumps(data))
    models = {m.language: m for m in run_probe_models(copy, ["svo", "sov"], floor=False)}
    assert models["svo"].degenerate == (PLANTED,) and "does not record" in models["svo"].degenerate_reason
    assert models["sov"].degenerate == (PLANTED,)
    # `xlviz runs dependencies` rebuilds them from the run's config: what the run itself recorded
    assert cli(["runs", "dependencies", "--out", str(copy.parent), str(copy)]) == 0
    rebuilt = {e["path"]: e.get("depends_on") for e in json.loads((copy / "manifest.json").read_text())["artefacts"]}
    original = {e["path"]: e.get("depends_on") for e in json.loads(planted_run.manifest_path.read_text())["artefacts"]}
    assert rebuilt == original and rebuilt["encoders/jointpair-disjoint-svo"]
    models = {m.language: m for m in run_probe_models(copy, ["svo", "sov"], floor=False)}
    assert models["svo"].degenerate == () and models["sov"].degenerate == (PLANTED,)


@pytest.mark.slow
def test_the_probing_page_lists_a_degenerate_encoder_and_probes_the_rest(planted_run, monkeypatch):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(planted_run.path.parent))
    at = AppTest.from_file(APP, default_timeout=180)
    at.run()
    at.switch_page("pages/probing.py")
    at.session_state["pr_run"] = "planted"
    at.session_state["pr_agr_max"] = 2
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    warning = " ".join(w.value for w in at.warning)
    assert "Not probed, built on a degenerate stage" in warning and "jointpair-disjoint · sov" in warning and PLANTED in warning
    rows = next(d.value for d in at.dataframe if "direction" in getattr(d.value, "columns", []))
    verdict = dict(zip(rows["model"] + " " + rows["language"], rows["verdict"]))
    assert verdict["planted · jointpair-disjoint sov"] == f"degenerate: {PLANTED}"
    assert verdict["planted · jointpair-disjoint svo"] == "ok"
    grid = next(d.value for d in at.dataframe if getattr(d.value, "index", None) is not None
                and d.value.index.name == "model · language")
    assert "planted · jointpair-disjoint · svo" in grid.index and "planted · jointpair-disjoint · sov" not in grid.index


def test_shared_vocabulary_ids_go_to_the_language_that_uses_them_most():
    from types import SimpleNamespace

    from xlviz.methods.joint import language_groups

    ids = {"a": 5, "b": 6, "c": 7}

    def tok(texts, add_special_tokens=False):
        return {"input_ids": [[ids[w] for w in t.split()] for t in texts]}

    corpora = {"en": ["a a b"], "xx": ["c c", "b b"]}
    reader = SimpleNamespace(disjoint=False, langs=["en", "xx"], toks={"en": tok, "xx": tok}, size=9)
    from xlviz.data.sources.world import WorldData

    world = SimpleNamespace(corpus=corpora.__getitem__)
    groups = language_groups(reader, SimpleNamespace(world=world, data=WorldData(world)))
    # a: en only; b: 1/3 of en's tokens, 1/2 of xx's -> xx; c: xx; specials and unseen ids: -1
    assert groups.tolist() == [-1, -1, -1, -1, -1, 0, 1, 1, -1]


def test_reading_verdicts_and_the_method_registry_imports_no_torch():
    """The pages judge a run's encoders by its verdicts and list the method registry's stages;
    neither may import torch (2.4 s of a cold Alignment page, docs/results.md, "How fast do the
    pages open?"). Only a training loop fills a StageMonitor."""
    import subprocess
    import sys

    code = ("import sys\n"
            "from xlviz.training.verdicts import degenerate_encoder_stages, mlm_verdict\n"
            "import xlviz.methods.base, xlviz.analysis.reports\n"
            "assert degenerate_encoder_stages(['s1'], {'s1': mlm_verdict(4.5, 4.0, 1.8)}) == ['s1']\n"
            "print('torch' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "False"
