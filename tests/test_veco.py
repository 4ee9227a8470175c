"""VECO (issue 15): the cross-attention reads the paired sentence's last layer and nothing else,
padding of the pair is masked, plug-out leaves a plain encoder computing the self stream,
CA-MLM has its four terms (both directions), and a tiny run of both systems writes rows that
say what they used."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import AutoModel, AutoModelForMaskedLM, AutoModelForQuestionAnswering, BertForMaskedLM

from xlviz.cli import main as cli
from xlviz.errors import XlvizError
from xlviz.models.monotrans import bert_config
from xlviz.models.veco import (CROSS, VecoForMaskedLM, VecoForQuestionAnswering, cross_attention_parameters, has_cross_attention,
                               plug_in, plug_out, plugin_qa, veco_config)
from xlviz.runs import Run
from xlviz.training.veco import VecoPretraining, partners, pretrain_batches
from xlviz.transfer.config import TransferConfig

from tests.test_methods import TINY

V = 60


@pytest.fixture(scope="module")
def model() -> VecoForMaskedLM:
    torch.manual_seed(0)
    return VecoForMaskedLM(veco_config(bert_config(V, "tiny", max_position_embeddings=64))).eval()


def ids(rows: int, width: int, seed: int) -> torch.Tensor:
    x = torch.randint(5, V, (rows, width), generator=torch.Generator().manual_seed(seed))
    x[:, 0], x[:, -1] = 2, 3
    return x


def test_cross_attention_shapes_and_keys_from_the_pair_only(model):
    x, y = ids(2, 7, 0), ids(2, 11, 1)
    h, s, probs = model.bert.streams(x, None, None, y, None, output_attentions=True)
    assert h.shape == s.shape == (2, 7, model.config.hidden_size)
    assert len(probs) == model.config.num_hidden_layers
    assert probs[0].shape == (2, model.config.num_attention_heads, 7, 11)  # x's tokens over y's
    assert torch.allclose(probs[-1].sum(-1), torch.ones(2, model.config.num_attention_heads, 7), atol=1e-5)
    # the self stream ignores the pair; the cross stream does not
    y2 = ids(2, 11, 2)
    h2, s2, _ = model.bert.streams(x, None, None, y2, None)
    assert torch.equal(h, h2) and not torch.allclose(s, s2)
    # keys are the pair's LAST layer: the cross stream equals cross_stream over h^L_y
    last = model.bert.self_stream(y)
    s3, _ = model.bert.cross_stream(x, torch.ones_like(x), None, last, torch.ones_like(y))
    assert torch.allclose(s, s3, atol=1e-6)


def test_padding_of_the_pair_is_masked(model):
    x, y = ids(2, 7, 0), ids(2, 9, 1)
    mask = torch.ones_like(y)
    mask[0, 6:] = 0  # row 0's pair has 6 real tokens
    pair = model.bert.self_stream(y, mask)
    s, probs = model.bert.cross_stream(x, torch.ones_like(x), None, pair, mask, output_attentions=True)
    assert float(probs[0][0, :, :, 6:].detach().abs().max()) == 0.0 and float(probs[0][1, :, :, 6:].detach().min()) > 0
    changed = pair.clone()
    changed[0, 6:] += 100.0  # a padded key's value changes: nothing changes
    s2, _ = model.bert.cross_stream(x, torch.ones_like(x), None, changed, mask)
    assert torch.allclose(s[0], s2[0], atol=1e-6)
    changed[0, 2] += 1.0  # a real key changes: the output changes (so the check above can fail)
    s3, _ = model.bert.cross_stream(x, torch.ones_like(x), None, changed, mask)
    assert not torch.allclose(s[0], s3[0], atol=1e-4)


def test_plug_out_leaves_a_plain_encoder_that_reloads(model, tmp_path):
    assert cross_attention_parameters(model) and has_cross_attention(model)
    plain = plug_out(model)
    assert type(plain) is BertForMaskedLM and not cross_attention_parameters(plain) and not has_cross_attention(plain)
    assert not any(CROSS in k for k in plain.state_dict())
    plain.save_pretrained(tmp_path / "out")
    assert (tmp_path / "out" / "model.safetensors").exists()
    assert json.loads((tmp_path / "out" / "config.json").read_text())["model_type"] == "bert"
    again = AutoModelForMaskedLM.from_pretrained(tmp_path / "out").eval()
    base = AutoModel.from_pretrained(tmp_path / "out").eval()
    x = ids(2, 7, 0)
    mask = torch.ones_like(x)
    expected = model.bert.self_stream(x, mask)
    assert torch.allclose(again.bert(x, attention_mask=mask).last_hidden_state, expected, atol=1e-6)
    assert torch.allclose(base(x, attention_mask=mask).last_hidden_state, expected, atol=1e-6)
    assert torch.allclose(again(x).logits, model(input_ids=x).logits, atol=1e-5)
    # the VECO model itself reloads as its registered type, cross-attention included
    model.save_pretrained(tmp_path / "veco")
    assert type(AutoModelForMaskedLM.from_pretrained(tmp_path / "veco")) is VecoForMaskedLM
    qa = plugin_qa(model)
    qa.save_pretrained(tmp_path / "qa")
    assert type(AutoModelForQuestionAnswering.from_pretrained(tmp_path / "qa")) is VecoForQuestionAnswering
    # plug-in from a plain model keeps every plain weight
    back = plug_in(plain)
    assert torch.equal(back.bert.self_stream(x, mask), plain.bert(x, attention_mask=mask).last_hidden_state)


def test_ca_mlm_has_four_terms_and_stops_gradient_at_the_pair(model):
    m = VecoForMaskedLM(model.config).train()
    x, y = ids(3, 7, 0), ids(3, 9, 1)
    xl, yl = torch.full_like(x, -100), torch.full_like(y, -100)
    xl[:, 2], yl[:, 3] = x[:, 2], y[:, 3]
    out = m(input_ids=x, labels=xl, pair_input_ids=y, pair_labels=yl)
    assert set(out.loss_terms) == {"h_x", "s_x", "h_y", "s_y"}
    assert torch.allclose(out.loss, sum(out.loss_terms.values()))
    # the s_x term: gradient to the cross-attention, none through the pair's h^L (stop-gradient)
    m.zero_grad()
    out.loss_terms["s_x"].backward()
    cross = [p.grad for n, p in m.named_parameters() if CROSS in n and p.dim() > 1]
    assert all(g is not None and g.abs().sum() > 0 for g in cross)
    m.zero_grad()
    out = m(input_ids=x, labels=xl, pair_input_ids=y, pair_labels=yl)
    out.loss_terms["h_y"].backward()  # y's self stream: no cross-attention
    assert all(p.grad is None or p.grad.abs().sum() == 0 for n, p in m.named_parameters() if CROSS in n)
    with pytest.raises(XlvizError):
        m(input_ids=x, labels=xl, pair_input_ids=y)


def test_pretraining_batches_alternate_and_tlm_concatenates(model):
    mono = iter([ids(4, 12, k) for k in range(10)])
    pairs = [([2, 10 + k, 11, 3], [2, 30 + k, 31, 32, 3]) for k in range(5)]
    gen = pretrain_batches(mono, pairs, 2, mask_id=4, vocab_size=V, prob=0.3, seed=0)
    first, second = next(gen), next(gen)
    assert "tlm_input_ids" not in first and first["input_ids"].shape == (2, 7) and first["pair_input_ids"].shape == (2, 7)
    assert second["tlm_input_ids"].shape[1] == 4 + 5 - 1  # [CLS] x [SEP] y [SEP]
    assert torch.isfinite(VecoPretraining(model)(**second))
    assert partners([0, 0, 1], [0, 1, 1, 1]) == [0, 0, 1]  # window k of an example -> its k-th (or last) partner


def test_pretraining_is_judged_on_its_self_stream_masked_lm(model):
    """VECO's objective sums four CA-MLM terms (and TLM on parallel steps), so the stage's verdict
    compares the mean of the two self-stream terms (a plain masked LM of each sentence) with the
    unigram entropy of both sentences' targets; the TLM pair's targets are not counted."""
    from xlviz.training.loop import LoopConfig, make_accelerator, train
    from xlviz.training.verdicts import StageMonitor

    mono = iter([ids(4, 12, k) for k in range(10)])
    pairs = [([2, 10 + k, 11, 3], [2, 30 + k, 31, 32, 3]) for k in range(5)]
    batches = list(zip(range(4), pretrain_batches(mono, pairs, 2, mask_id=4, vocab_size=V, prob=0.3, seed=0)))
    monitor = StageMonitor()
    m = VecoForMaskedLM(model.config)
    m.config.hidden_dropout_prob = m.config.attention_probs_dropout_prob = 0.0
    m = VecoForMaskedLM(m.config)
    expected = []
    with torch.no_grad():
        for _, b in batches:
            terms = m(**{k: v for k, v in b.items() if not k.startswith("tlm_")}).loss_terms
            expected.append(float((terms["h_x"] + terms["h_y"]) / 2))
    train(VecoPretraining(m), iter(b for _, b in batches), LoopConfig(steps=4, lr=0.0, log_every=100, monitor=monitor),
          make_accelerator("no"))
    assert monitor.mlm, "VECO's batches are masked-LM batches for the verdict"
    assert monitor.losses == pytest.approx(expected, abs=1e-5)  # not the summed objective (about 4x that)
    targets = sum(int((b["labels"] != -100).sum() + (b["pair_labels"] != -100).sum()) for _, b in batches)
    assert monitor.targets == targets  # both sentences' targets; the TLM pair's are not counted


def test_settings_are_validated():
    with pytest.raises(XlvizError, match="veco_init"):
        TransferConfig.from_dict({"veco_init": "xlmr"})
    with pytest.raises(XlvizError, match="veco_ca_steps"):
        TransferConfig.from_dict({"veco_ca_steps": 0})


@pytest.mark.slow
def test_tiny_run_of_both_systems(tmp_path):
    config = tmp_path / "tiny.json"
    world = {**TINY["world"], "parallel_train_pairs": 40}
    config.write_text(json.dumps({**TINY, "world": world, "methods": ["veco", "veco-plugin"]}))
    assert cli(["transfer", "--config", str(config), "--run-dir", str(tmp_path / "run")]) == 0
    rows = {(r["system"], r["language"]): r for r in Run(tmp_path / "run").results()}
    assert {("veco", "en"), ("veco", "svo"), ("veco", "sov"), ("veco-plugin", "svo"), ("veco-plugin", "sov")} <= set(rows)
    for (system, _), r in rows.items():
        assert r["method"] == "veco" and r["parallel_pairs"] == 40 and r["l2_labels"] == (system == "veco-plugin")
    # exports: veco is a plain BERT, veco-plugin the registered type
    assert json.loads((tmp_path / "run" / "export" / "veco-sov" / "config.json").read_text())["model_type"] == "bert"
    assert json.loads((tmp_path / "run" / "export" / "veco-plugin-sov" / "config.json").read_text())["model_type"] == "xlviz_veco"
    assert json.loads((tmp_path / "run" / "encoders" / "veco-plugin-en" / "config.json").read_text())["model_type"] == "xlviz_veco"
    # every VECO pre-training is judged against the unigram entropy of its targets
    verdicts = Run(tmp_path / "run").verdicts()
    for l2 in ("svo", "sov"):
        v = verdicts[f"s1_veco-{l2}"]
        assert v["kind"] == "mlm" and v["verdict"] in ("ok", "degenerate") and 0 < v["loss"] < 10 and v["unigram_entropy"] > 0


@pytest.mark.slow
def test_start_from_jointpair_trains_the_cross_attention_alone_first(tmp_path):
    """veco_init jointpair-disjoint: the pair model, then the cross-attention alone, then
    everything; each stage trains exactly what it declares (as tests/test_methods.py checks
    for the default systems)."""
    import re

    from tests.test_methods import gradients
    from xlviz.transfer.pipeline import Pipeline

    config = tmp_path / "tiny.json"
    world = {**TINY["world"], "languages": [{"code": "sov", "order": "sov", "script": "cyrillic"}], "parallel_train_pairs": 30}
    config.write_text(json.dumps({**TINY, "world": world, "methods": ["veco"], "veco_init": "jointpair-disjoint", "veco_ca_steps": 2}))
    assert cli(["transfer", "--config", str(config), "--run-dir", str(tmp_path / "run")]) == 0
    run = Pipeline.resume(tmp_path / "run")
    table = run.stage_table()
    assert list(table)[:4] == ["world", "s1_jointpair-disjoint-sov", "s1_veco-ca-from-jointpair-disjoint-sov",
                               "s1_veco-from-jointpair-disjoint-sov"]
    for stage in (s for s in table.values() if s.build is not None):
        model = stage.build(run)
        grads = gradients(model)
        trained = {n for n, g in grads.items() if g is not None and g.abs().sum() > 0}
        should = {n for n in grads if any(re.fullmatch(p, n) for p in stage.trains)}
        assert trained == should, stage.name
    ca = table["s1_veco-ca-from-jointpair-disjoint-sov"].build(run)
    assert all((CROSS in n) == p.requires_grad for n, p in ca.named_parameters())
    rows = Run(tmp_path / "run").results()
    assert {r["language"] for r in rows} == {"en", "sov"} and all(r["parallel_pairs"] == 30 for r in rows)
