"""Every result row states its setting (zero-shot, translate-train, translate-test), declared by
its method; only a translate-test system may read the test set's translation; VECO's plug-in
model unplugged at test time reads no translation."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from xlviz.errors import XlvizError
from xlviz.methods import method_of
from xlviz.methods.base import SETTINGS, TRANSLATE_TEST, TRANSLATE_TRAIN, ZERO_SHOT, setting_of


def test_each_system_declares_its_setting():
    expect = {"monotrans": ZERO_SHOT, "floor": ZERO_SHOT, "jointpair-disjoint": ZERO_SHOT, "veco": ZERO_SHOT,
              "veco-plugin": TRANSLATE_TEST, "veco-plugin-out": TRANSLATE_TRAIN, "mono-l2-supervised": TRANSLATE_TRAIN,
              "ppa": ZERO_SHOT, "ppa-codeswitch": TRANSLATE_TRAIN}
    for system, setting in expect.items():
        assert method_of(system).setting(system) == setting, system
    assert SETTINGS == (ZERO_SHOT, TRANSLATE_TRAIN, TRANSLATE_TEST)
    assert setting_of({"l2_labels": True, "translate_test": True}) == TRANSLATE_TEST
    assert setting_of({}) == ZERO_SHOT


def test_only_a_translate_test_system_reads_the_test_translation():
    from xlviz.transfer.config import TransferConfig
    from xlviz.transfer.pipeline import Pipeline

    world = SimpleNamespace(l1="en", qa=lambda split, lang: {"split": split, "lang": lang})
    run = SimpleNamespace(cfg=TransferConfig(), world=world)
    assert Pipeline.test_translation(run, "veco-plugin", "sov") == {"split": "test", "lang": "en"}
    for system in ("veco", "veco-plugin-out", "monotrans", "mono-l2-supervised"):
        with pytest.raises(XlvizError, match="translate-test"):
            Pipeline.test_translation(run, system, "sov")


def test_plug_out_at_test_time_reads_no_translation():
    from transformers import BertForQuestionAnswering

    from xlviz.models.monotrans import bert_config
    from xlviz.models.veco import CROSS, VecoForQuestionAnswering, plug_out_qa, veco_config

    torch.manual_seed(0)
    qa = VecoForQuestionAnswering(veco_config(bert_config(60, "tiny", max_position_embeddings=64))).eval()
    out = plug_out_qa(qa)
    assert type(out) is BertForQuestionAnswering and not any(CROSS in n for n, _ in out.named_parameters())
    x = torch.randint(5, 60, (2, 9), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        h = qa.bert.self_stream(x)
        # without the cross-attention the cross stream is the self stream: the head reads [h ; h]
        start, end = qa.qa_outputs(torch.cat([h, h], -1)).split(1, dim=-1)
        got = out(input_ids=x)
    assert torch.allclose(got.start_logits, start.squeeze(-1), atol=1e-5)
    assert torch.allclose(got.end_logits, end.squeeze(-1), atol=1e-5)
    with pytest.raises(XlvizError, match="plug-in VECO QA"):
        plug_out_qa(out)


@pytest.mark.slow
def test_tiny_veco_run_rows_state_setting_and_intervals(tmp_path):
    from tests.test_methods import TINY
    from xlviz.cli import main as cli
    from xlviz.runs import Run

    config = tmp_path / "tiny.json"
    world = {**TINY["world"], "languages": [{"code": "sov", "order": "sov", "script": "cyrillic"}], "parallel_train_pairs": 40}
    config.write_text(json.dumps({**TINY, "world": world, "methods": ["veco", "veco-plugin", "veco-plugin-out"]}))
    assert cli(["transfer", "--config", str(config), "--run-dir", str(tmp_path / "run")]) == 0
    rows = {(r["system"], r["language"]): r for r in Run(tmp_path / "run").results()}
    assert rows[("veco", "sov")]["setting"] == ZERO_SHOT
    assert rows[("veco-plugin", "sov")]["setting"] == TRANSLATE_TEST and rows[("veco-plugin", "sov")]["translate_test"] is True
    out = rows[("veco-plugin-out", "sov")]
    assert out["setting"] == TRANSLATE_TRAIN and out["translate_test"] is False and out["l2_labels"] is True
    assert ("veco-plugin-out", "en") in rows and "l1_f1" in out  # its own en model (the unplugged L1 slice)
    assert json.loads((tmp_path / "run" / "export" / "veco-plugin-out-sov" / "config.json").read_text())["model_type"] == "bert"
    for r in rows.values():
        assert r["ci_method"] == "paragraph bootstrap" and r["n_paragraphs"] == 4 and r["n_questions"] >= 4
        assert r["f1_ci_low"] <= r["f1"] <= r["f1_ci_high"] and r["exact_match_ci_low"] <= r["exact_match"] <= r["exact_match_ci_high"]
