"""Active forgetting and WECHSEL: the reset schedule on a toy model (embeddings and their
AdamW state re-drawn exactly after updates K, 2K, ... and not otherwise), WECHSEL's
initialisation on a hand-computed toy, and, on a tiny run of the new systems, what each
stage trains and freezes and which L1 embeddings each initialisation reads."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertForMaskedLM

from xlviz.cli import main as cli
from xlviz.errors import XlvizError
from xlviz.methods import resolve
from xlviz.methods.forgetting import embedding_reset
from xlviz.methods.wechsel import VECTORS_DIR
from xlviz.models.monotrans import N_SPECIAL
from xlviz.models.surgery import word_embeddings
from xlviz.models.wechsel import neighbour_table, precision_at_1, wechsel_rows
from xlviz.training.forgetting import EmbeddingReset, reset_steps, scaled_every
from xlviz.training.loop import LoopConfig, make_accelerator, train
from xlviz.training.mlm import MaskedOnlyMLM
from xlviz.transfer.config import TransferConfig
from xlviz.transfer.pipeline import Pipeline

from tests.test_methods import TINY, ZERO_BY_CONSTRUCTION, gradients, training_stages


# --------------------------------------------------------------------------- the schedule
def test_k_is_the_step_2_budget_and_the_last_k_updates_keep_their_embeddings():
    from types import SimpleNamespace

    from xlviz.methods.forgetting import forget_every

    assert scaled_every(125_000) == 1000 and scaled_every(1000) == 8 and scaled_every(4) == 1  # the paper's ratio
    cfg = TransferConfig.from_dict({"transfer_steps": 320, "pretrain_steps": 1000})
    assert forget_every(SimpleNamespace(cfg=cfg)) == 320  # default: K = transfer_steps
    assert forget_every(SimpleNamespace(cfg=TransferConfig.from_dict({"forget_every": 8}))) == 8
    assert reset_steps(320, 1000) == [320, 640]  # not 960: the body ends with embeddings of 360 updates
    assert reset_steps(8, 1000) == list(range(8, 993, 8))  # the paper's ratio: 124 resets, the last 8 updates kept
    assert reset_steps(3, 9) == [3, 6]
    assert reset_steps(3, 7) == [3]  # 6 would leave the final embeddings one update
    assert reset_steps(3, 6) == [3]  # the last update is never followed by a reset
    assert reset_steps(0, 6) == []


def toy_mlm(vocab: int = 20) -> BertForMaskedLM:
    torch.manual_seed(0)
    config = BertConfig(vocab_size=vocab, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16,
                        max_position_embeddings=16)
    return BertForMaskedLM(config)


def toy_batches(vocab: int):
    g = torch.Generator().manual_seed(1)
    while True:
        ids = torch.randint(N_SPECIAL, vocab, (4, 10), generator=g)
        labels = torch.full_like(ids, -100)
        labels[:, 2:5] = ids[:, 2:5]
        yield {"input_ids": ids, "labels": labels}


def run_with_reset(mixed_precision: str, steps: int, every: int):
    """Train the toy with the reset and, after each update, a snapshot of what it touches."""
    model = toy_mlm()
    reset = embedding_reset(model, every, steps, seed=5)
    emb, bias = word_embeddings(model).weight, model.cls.predictions.bias
    body = model.bert.encoder.layer[0].attention.self.query.weight
    seen = {}

    def observe(step, optimizer, params):
        bias_before = bias.detach().clone()
        reset(step, optimizer, params)
        e, b = params[reset.name], params["model." + next(n for n, p in model.named_parameters() if p is body)]
        seen[step] = {"master": e.detach().clone(), "state": {k: v.clone() for k, v in optimizer.state[e].items()},
                      "body_step": float(optimizer.state[b]["step"]), "bias_before": bias_before}

    def snapshot_model(step):  # what the model holds once train() has refreshed it from the masters
        seen[step]["model"] = emb.detach().clone()
        seen[step]["bias_after"] = bias.detach().clone()

    class Recorder(MaskedOnlyMLM):
        """Its n-th forward pass (n >= 1) comes after update n: the model as update n left it."""

        calls = 0

        def forward(self, **batch):
            if self.calls:
                snapshot_model(self.calls)
            self.calls += 1
            return super().forward(**batch)

    acc = make_accelerator(mixed_precision)
    batches = toy_batches(model.config.vocab_size)
    train(Recorder(model), batches, LoopConfig(steps=steps, lr=1e-2, log_every=100), acc, after_step=observe)
    seen[steps]["model"] = emb.detach().clone()
    seen[steps]["bias_after"] = bias.detach().clone()
    return model, reset, seen


def test_embeddings_and_their_adam_state_are_redrawn_exactly_at_multiples_of_k():
    model, reset, seen = run_with_reset("no", steps=9, every=3)
    assert reset.done == [3, 6]
    shape = word_embeddings(model).weight.shape
    last_reset = 0
    for step in range(1, 10):
        s = seen[step]
        drawn = reset.draw(shape, step)
        assert s["body_step"] == step, "the body's Adam state is never reset"
        if step in (3, 6):
            last_reset = step
            assert torch.equal(s["model"], drawn), f"step {step}: embeddings re-drawn"
            assert torch.equal(model.cls.predictions.decoder.weight, word_embeddings(model).weight)  # tied: follows
            assert s["model"][0].abs().sum() == 0 and s["model"][1:].std() > 0  # padding row zero as at init
            assert float(s["state"]["step"]) == 0 and s["state"]["exp_avg"].abs().sum() == 0 \
                and s["state"]["exp_avg_sq"].abs().sum() == 0, f"step {step}: Adam moments and step zeroed"
            assert torch.equal(s["bias_after"], s["bias_before"]), "the output bias is not reset (as in the paper's code)"
        else:
            assert not torch.allclose(s["model"], drawn), f"step {step}: no reset"
            assert float(s["state"]["step"]) == step - last_reset, "the embeddings' Adam step counts from the last reset"
            assert s["state"]["exp_avg"].abs().sum() > 0
    # the reset values are the model's init: N(0, initializer_range^2)
    assert abs(reset.draw(shape, 3)[1:].std().item() - model.config.initializer_range) < 0.005


def test_reset_reaches_the_bf16_model_copy():
    """Under bf16 weights the optimizer steps float32 masters; the model must get the reset too."""
    model, reset, seen = run_with_reset("bf16", steps=4, every=2)
    assert reset.done == [2]
    drawn = reset.draw(word_embeddings(model).weight.shape, 2)
    assert torch.equal(seen[2]["master"], drawn)
    assert torch.equal(seen[2]["model"].float(), drawn.to(torch.bfloat16).float())


# --------------------------------------------------------------------------- WECHSEL
def test_wechsel_rows_on_a_hand_computed_toy():
    # L1 static space (2-d), subword ids 5, 6, 7: a = (1, 0), b = (0, 1), c = (1, 1).
    l1_static = np.zeros((8, 2))
    l1_static[5], l1_static[6], l1_static[7] = (1, 0), (0, 1), (1, 1)
    l1_known = np.zeros(8, dtype=bool)
    l1_known[5:] = True
    # L2 subwords x = (1, 0) (id 0), y = (0, 2) (id 1), z without a vector (id 2).
    l2_static = np.array([[1.0, 0.0], [0.0, 2.0], [0.0, 0.0]])
    l2_known = np.array([True, True, False])
    ids, w = neighbour_table(l2_static, l1_static, l2_known=l2_known, l1_known=l1_known, k=2, temperature=0.1)
    # x: cos(x, a) = 1, cos(x, c) = 1/sqrt(2), cos(x, b) = 0 -> neighbours a, c;
    # weights softmax([1, 0.7071] / 0.1) = e^10 / (e^10 + e^7.071) = 0.94926 and 0.05074.
    wa = math.exp(10) / (math.exp(10) + math.exp(10 / math.sqrt(2)))
    assert ids[0].tolist() == [5, 7] and ids[1].tolist() == [6, 7] and ids[2].tolist() == [-1, -1]
    assert w[0].tolist() == pytest.approx([wa, 1 - wa], abs=1e-6) and w[1].tolist() == pytest.approx([wa, 1 - wa], abs=1e-6)
    assert w[2].tolist() == [0.0, 0.0]
    # The model's L1 rows (3-d) and the L2 matrix another initialisation gave.
    l1_rows = torch.zeros(8, 3)
    l1_rows[5], l1_rows[6], l1_rows[7] = torch.tensor([2.0, 0, 0]), torch.tensor([0, 4.0, 0]), torch.tensor([0, 0, 6.0])
    base = torch.full((3, 3), 9.0)
    rows = wechsel_rows(l1_rows, ids, w, base)
    assert rows[0].tolist() == pytest.approx([2 * wa, 0.0, 6 * (1 - wa)], abs=1e-5)
    assert rows[1].tolist() == pytest.approx([0.0, 4 * wa, 6 * (1 - wa)], abs=1e-5)
    assert rows[2].tolist() == [9.0, 9.0, 9.0]  # no static vector: the other initialisation's row
    assert base[0].tolist() == [9.0, 9.0, 9.0]  # the input is not modified
    # k = 1 is a hard nearest neighbour; a very high temperature is the plain mean of the k rows.
    ids1, w1 = neighbour_table(l2_static, l1_static, l2_known=l2_known, l1_known=l1_known, k=1)
    assert wechsel_rows(l1_rows, ids1, w1, base)[0].tolist() == [2.0, 0.0, 0.0]
    ids3, w3 = neighbour_table(l2_static, l1_static, l2_known=l2_known, l1_known=l1_known, k=3, temperature=1e6)
    assert wechsel_rows(l1_rows, ids3, w3, base)[0].tolist() == pytest.approx([2 / 3, 4 / 3, 2.0], abs=1e-4)
    assert precision_at_1(ids, {0: 5, 1: 7}) == 0.5


def test_plastic_settings_are_validated():
    for field, value in (("wechsel_dictionary", "muse"), ("forget_every", -1), ("wechsel_neighbours", 0),
                         ("wechsel_temperature", 0), ("wechsel_seed_size", True)):
        with pytest.raises(XlvizError) as e:
            TransferConfig.from_dict({field: value})
        assert e.value.field == field
    assert resolve("wechsel") == ["monotrans+wechsel", "wechsel-only", "monotrans+forgetting+wechsel"]
    assert resolve("forgetting") == ["monotrans+forgetting"]


# --------------------------------------------------------------------------- a tiny run
@pytest.fixture(scope="module")
def plastic_run(tmp_path_factory) -> Pipeline:
    root = tmp_path_factory.mktemp("plastic")
    config = root / "tiny.json"
    config.write_text(json.dumps({**TINY, "pretrain_steps": 6, "forget_every": 2, "wechsel_dictionary": "seed",
                                  "wechsel_seed_size": 20, "methods": ["monotrans", "forgetting", "wechsel"]}))
    assert cli(["transfer", "--config", str(config), "--run-dir", str(root / "run")]) == 0
    return Pipeline.resume(root / "run")


def trainable(model) -> set[str]:
    return {n for n, p in model.named_parameters() if p.requires_grad}


@pytest.mark.slow
def test_each_new_stage_trains_and_freezes_what_it_should(plastic_run):
    table = plastic_run.stage_table()
    step2 = {"bert.embeddings.word_embeddings.weight", "cls.predictions.bias"}
    for name in ("s2_forgetting-svo", "s2_wechsel-sov", "s2_forgetting-wechsel-svo"):
        model = table[name].build(plastic_run)
        assert trainable(model) == step2, name
        grad = gradients(model)["bert.embeddings.word_embeddings.weight"].abs().sum(1)
        assert grad[:N_SPECIAL].sum() == 0 and grad[N_SPECIAL:].sum() > 0, f"{name}: special rows stay L1's"
    s1 = table["s1_forgetting"].build(plastic_run)
    assert trainable(s1) == {n for n, _ in s1.named_parameters()}
    s3 = table["s3_forgetting"].build(plastic_run)
    grads = gradients(s3)
    assert "qa_outputs.weight" in trainable(s3) and grads["bert.encoder.layer.0.attention.self.query.weight"].abs().sum() > 0
    rows = grads["bert.embeddings.word_embeddings.weight"].abs().sum(1)
    assert rows[N_SPECIAL:].sum() == 0 and rows[2] > 0, "step 3: the L1 token rows stay frozen but the special ones"
    assert "wechsel-only" not in {s.name for s in table.values()}  # no stage of its own: no step 2


@pytest.mark.slow
def test_new_stages_train_exactly_what_they_declare(plastic_run):
    """tests/test_methods.py's check, on the new systems' own stages: the parameters that get
    gradient are the declared ones, and the declared rows."""
    mine = [s for s in training_stages(plastic_run) if "forgetting" in s.name or "wechsel" in s.name]
    assert {s.name for s in mine} == {"s1_forgetting", "s3_forgetting"} | {
        f"s2_{kind}-{lang}" for kind in ("forgetting", "wechsel", "forgetting-wechsel") for lang in ("svo", "sov")}
    for stage in mine:
        grads = gradients(stage.build(plastic_run))
        declared = [re.compile(p) for p in stage.trains]
        trained = {n for n, g in grads.items() if g is not None and (g.abs().sum() > 0 or ZERO_BY_CONSTRUCTION.fullmatch(n))}
        should = {n for n in grads if any(p.fullmatch(n) for p in declared)}
        assert trained == should, f"{stage.name}: {sorted(trained ^ should)}"
        rows = grads["bert.embeddings.word_embeddings.weight"].abs().sum(1)
        if stage.rows == "special":
            assert rows[N_SPECIAL:].sum() == 0 and rows[2] > 0, stage.name
        elif stage.rows == "all but special":
            assert rows[:N_SPECIAL].sum() == 0 and rows[N_SPECIAL:].sum() > 0, stage.name
        else:
            assert rows.sum() > 0, stage.name


@pytest.mark.slow
def test_wechsel_starts_from_the_rows_of_its_own_step_1(plastic_run):
    """monotrans+wechsel mixes s1_pretrain's L1 rows, the forgetting combination s1_forgetting's;
    wechsel-only scores exactly those rows (never trained)."""
    from safetensors.torch import load_file

    from xlviz.methods.common import load_mlm
    from xlviz.methods.wechsel import Wechsel

    table = plastic_run.stage_table()
    t = load_file(str(plastic_run.path(VECTORS_DIR, "sov.safetensors")))
    known = t["neighbours"][:, 0] >= 0
    assert known.sum() > 10 and not known[:N_SPECIAL].any()
    for stage, s1 in (("s2_wechsel-sov", "s1_pretrain"), ("s2_forgetting-wechsel-sov", "s1_forgetting")):
        start = word_embeddings(table[stage].build(plastic_run)).weight.detach()
        l1 = word_embeddings(load_mlm(plastic_run, s1)).weight.detach()
        expected = (t["weights"][known].unsqueeze(-1) * l1[t["neighbours"][known]]).sum(1)
        assert torch.allclose(start[known], expected, atol=1e-6), stage
        assert torch.equal(start[:N_SPECIAL], l1[:N_SPECIAL])
    only, _ = Wechsel("wechsel", ()).encoder(plastic_run, "wechsel-only", "sov")
    assert torch.equal(word_embeddings(only).weight, word_embeddings(table["s2_wechsel-sov"].build(plastic_run)).weight)
    report = json.loads(plastic_run.path(VECTORS_DIR, "report.json").read_text())
    assert report["dictionary"] == "seed" and report["languages"]["sov"]["pairs"] <= 20
    rows = plastic_run.run.results()
    by = {(r["system"], r["language"]): r for r in rows}
    for system in ("monotrans+forgetting", "monotrans+wechsel", "wechsel-only", "monotrans+forgetting+wechsel"):
        assert (system, "sov") in by and (system, "svo") in by
    assert by[("wechsel-only", "sov")]["wechsel_dictionary"] == "seed" and by[("wechsel-only", "sov")]["wechsel_seed_size"] == 20
    assert "wechsel_dictionary" not in by[("monotrans+forgetting", "sov")]
    log = plastic_run.path("log.txt").read_text()
    assert re.search(r"re-drawn after 2 of 6 updates \(every 2\)", log)
