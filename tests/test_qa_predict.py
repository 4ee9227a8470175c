"""Answer spans from logits: forced logits give the expected character span; spans stay in context."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest
import torch
from torch import nn
from transformers import BertConfig, BertForQuestionAnswering, BertTokenizerFast

from xlviz.cli import main
from xlviz.data.squad import QAExample
from xlviz.errors import XlvizError
from xlviz.evaluation.qa_predict import predict_qa, predictions_to_text

WORDS = "the cat sat on mat a dog ran in park who what where did my big red house".split()
CONTEXT = "the cat sat on the mat . the dog ran in the park . my big red house ."
LONG = "the cat sat on the mat . " * 4 + "my big red house . " + "the dog ran in the park . " * 4


@pytest.fixture()
def tok(tmp_path) -> BertTokenizerFast:
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", "?", ","] + WORDS
    vocab += list("abcdefghijklmnopqrstuvwxyz") + ["##" + c for c in "abcdefghijklmnopqrstuvwxyz"]
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(vocab) + "\n", encoding="utf-8")
    return BertTokenizerFast(vocab=str(path))


class PeakModel(nn.Module):
    """Start/end logits that peak at tokens with given ids (weights per id); records its calls."""

    def __init__(self, start: dict[int, float], end: dict[int, float]):
        super().__init__()
        self.start, self.end = start, end
        self.anchor = nn.Parameter(torch.zeros(1))
        self.calls = []

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        self.calls.append(
            {"training": self.training, "grad": torch.is_grad_enabled(), "device": input_ids.device,
             "batch": input_ids.shape[0], "keys": {k for k, v in
                                                   (("attention_mask", attention_mask), ("token_type_ids", token_type_ids))
                                                   if v is not None}}
        )
        start = torch.zeros(input_ids.shape)
        end = torch.zeros(input_ids.shape)
        for tid, w in self.start.items():
            start[input_ids == tid] = w
        for tid, w in self.end.items():
            end[input_ids == tid] = w
        return SimpleNamespace(start_logits=start, end_logits=end)


def _ids(tok, *words):
    return [tok.convert_tokens_to_ids(w) for w in words]


def _example(qid="q", context=CONTEXT, question="what house ?"):
    return QAExample(qid, "t", context, question, [])


def test_forced_logits_give_the_char_span(tok):
    big, house = _ids(tok, "big", "house")
    # the CLS, SEP and question tokens get even higher logits: they must never be chosen
    cls, sep, what = _ids(tok, "[CLS]", "[SEP]", "what")
    model = PeakModel(start={big: 10.0, cls: 50.0, what: 40.0}, end={house: 8.0, sep: 50.0, what: 40.0})
    model.train()
    preds = predict_qa(model, tok, [_example()], max_length=48, doc_stride=8, batch_size=4)
    start = CONTEXT.index("big red house")
    assert preds == {"q": {"text": "big red house", "start": start, "end": start + len("big red house"), "score": 18.0}}
    assert predictions_to_text(preds) == {"q": "big red house"}
    # ran in eval mode without gradients, then the training mode came back
    assert model.calls and all(not c["training"] and not c["grad"] for c in model.calls)
    assert model.training
    assert all(c["keys"] == {"attention_mask", "token_type_ids"} for c in model.calls)


def test_best_span_over_several_windows(tok):
    big, house, cat = _ids(tok, "big", "house", "cat")
    model = PeakModel(start={big: 10.0, cat: 3.0}, end={house: 10.0})
    done = []
    preds = predict_qa(
        model, tok, [_example("long", LONG), _example("short", CONTEXT)],
        max_length=24, doc_stride=6, batch_size=3, progress=lambda d, t: done.append((d, t)),
    )
    n_windows = done[-1][1]
    assert n_windows > 3 and done[-1] == (n_windows, n_windows)
    assert [d for d, _ in done] == sorted(d for d, _ in done)
    assert max(c["batch"] for c in model.calls) == 3
    start = LONG.index("big red house")
    assert preds["long"] == {"text": "big red house", "start": start, "end": start + 13, "score": 20.0}
    assert preds["short"]["text"] == "big red house"


def test_max_answer_length_and_fallback(tok):
    cat, house = _ids(tok, "cat", "house")
    # cat ... house is 17 tokens: too long for max_answer_length=5
    model = PeakModel(start={cat: 9.0}, end={house: 10.0})
    p = predict_qa(model, tok, [_example()], max_length=48, doc_stride=8, max_answer_length=5)["q"]
    assert p["text"].endswith("house") and len(tok.tokenize(p["text"])) <= 5
    assert CONTEXT[p["start"] : p["end"]] == p["text"]
    # with n_best=1 the only candidate pair ends before it starts: the full search still answers
    model = PeakModel(start={house: 10.0}, end={cat: 10.0})
    p = predict_qa(model, tok, [_example()], max_length=48, doc_stride=8, n_best=1)["q"]
    assert p["text"] and CONTEXT[p["start"] : p["end"]] == p["text"] and p["score"] == 10.0


def test_forward_hook_on_real_bert_forces_span(tok):
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=32, max_position_embeddings=64)
    torch.manual_seed(0)
    model = BertForQuestionAnswering(cfg)
    dog, park = _ids(tok, "dog", "park")
    seen = {}

    def keep_ids(module, args, kwargs):
        seen["ids"] = kwargs["input_ids"]

    def force(module, args, output):
        out = output.clone()
        out[..., 0] += 100.0 * (seen["ids"] == dog)
        out[..., 1] += 100.0 * (seen["ids"] == park)
        return out

    model.register_forward_pre_hook(keep_ids, with_kwargs=True)
    model.qa_outputs.register_forward_hook(force)
    preds = predict_qa(model, tok, [_example()], max_length=32, doc_stride=8)
    start = CONTEXT.index("dog ran in the park")
    assert (preds["q"]["text"], preds["q"]["start"], preds["q"]["end"]) == ("dog ran in the park", start, start + 19)


def test_random_model_spans_stay_inside_context(tok):
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=32, max_position_embeddings=64)
    torch.manual_seed(1)
    model = BertForQuestionAnswering(cfg)
    contexts = [CONTEXT, LONG, "my house .", "red"]
    examples = [_example(f"q{i}", c, q) for i, c in enumerate(contexts) for q in ("what house ?", "who ran in the park ?")]
    examples = [QAExample(f"{e.id}-{j}", e.title, e.context, e.question, []) for j, e in enumerate(examples)]
    preds = predict_qa(model, tok, examples, max_length=24, doc_stride=6, batch_size=5, max_answer_length=4)
    assert set(preds) == {e.id for e in examples}
    for e in examples:
        p = preds[e.id]
        assert 0 <= p["start"] < p["end"] <= len(e.context)
        assert e.context[p["start"] : p["end"]] == p["text"]
        assert len(tok.tokenize(p["text"])) <= 4
        assert math.isfinite(p["score"])


def test_bad_input(tok):
    with pytest.raises(XlvizError, match="duplicate example id"):
        predict_qa(PeakModel({}, {}), tok, [_example("a"), _example("a")], max_length=32, doc_stride=8)
    with pytest.raises(XlvizError, match="batch_size"):
        predict_qa(PeakModel({}, {}), tok, [_example("a")], max_length=32, doc_stride=8, batch_size=0)
    assert predict_qa(PeakModel({}, {}), tok, [], max_length=32, doc_stride=8) == {}


def test_predict_qa_cli_writes_official_predictions(tok, tmp_path, capsys):
    # one row per id (the tokenizer's largest id is past vocab_size; load_model refuses a misfit)
    cfg = BertConfig(vocab_size=max(tok.get_vocab().values()) + 1, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=32, max_position_embeddings=64)
    torch.manual_seed(2)
    model_dir = tmp_path / "qa-model"
    BertForQuestionAnswering(cfg).save_pretrained(model_dir)
    tok.save_pretrained(model_dir)
    assert (model_dir / "model.safetensors").exists()

    data = {"version": "1.1", "data": [{"title": "t", "paragraphs": [
        {"context": CONTEXT, "qas": [
            {"id": "a", "question": "what house ?", "answers": [{"text": "my big red house", "answer_start": CONTEXT.index("my")}]},
            {"id": "b", "question": "who ran ?", "answers": [{"text": "the dog", "answer_start": CONTEXT.index("the dog")}]}]},
        {"context": LONG, "qas": [
            {"id": "c", "question": "what house ?", "answers": [{"text": "house", "answer_start": LONG.index("house")}]}]},
    ]}]}
    data_file = tmp_path / "data.json"
    data_file.write_text(json.dumps(data), encoding="utf-8")
    out = tmp_path / "pred.json"
    rc = main(["predict-qa", "--model", str(model_dir), "--data", str(data_file), "--out", str(out),
               "--max-length", "32", "--doc-stride", "8", "--batch-size", "2", "--device", "cpu"])
    assert rc == 0
    preds = json.loads(out.read_text(encoding="utf-8"))
    assert set(preds) == {"a", "b", "c"}
    assert preds["a"] in CONTEXT and preds["b"] in CONTEXT and preds["c"] in LONG
    assert "wrote 3 predictions" in capsys.readouterr().err

    assert main(["evaluate-qa", str(data_file), str(out)]) == 0
    scores = json.loads(capsys.readouterr().out)
    assert set(scores) == {"exact_match", "f1"} and 0 <= scores["f1"] <= 100

    assert main(["predict-qa", "--model", str(tmp_path / "nope"), "--data", str(data_file), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "nope" in err and "model folder not found" in err
    (model_dir / "model.safetensors").unlink()
    assert main(["predict-qa", "--model", str(model_dir), "--data", str(data_file), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "qa-model" in err and "safetensors" in err and "Traceback" not in err


def test_vectorised_windows_pick_the_loops_spans():
    """The page-speed rewrite keeps the answers: every window's best n-best pair is the
    per-window loop's (same pairs, same order, first maximum on ties), with ties and
    question/padding tokens among the top logits."""
    import numpy as np

    from xlviz.evaluation.qa_predict import _best_in_window, _best_in_windows

    rng = np.random.default_rng(0)
    for n_best, answer in ((20, 30), (3, 2), (1, 1), (60, 5)):
        start = np.round(rng.normal(size=(300, 40)), 1).astype(np.float32)  # rounding: many ties
        end = np.round(rng.normal(size=(300, 40)), 1).astype(np.float32)
        context = rng.random((300, 40)) < 0.6
        context[:5] = False  # windows with no context token
        found, score, s, e = _best_in_windows(start, end, context, n_best, answer, block=64)
        for w in range(300):
            offsets = [(t, t + 1) if c else None for t, c in enumerate(context[w])]
            ref = _best_in_window(start[w], end[w], offsets, n_best, answer)
            assert found[w] == (ref is not None)
            if ref is not None:
                assert (float(score[w]), int(s[w]), int(e[w])) == ref
