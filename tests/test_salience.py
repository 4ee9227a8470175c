"""Why this answer: integrated gradients of a QA answer (xlviz.analysis.salience), the world's
gold QA word alignment that links L1 and L2 salience, the notebook API and the XQuAD page."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from xlviz.analysis.salience import CONTEXT, QUESTION, SPECIAL, AlignedText, Salience, aligned_salience, integrated_gradients
from xlviz.errors import XlvizError

QUESTION_TEXT = "who sat on the mat?"
CONTEXT_TEXT = "the big cat sat on the red mat. the dog was in the house."


def _tiny_qa(arch: str, tmp_path: Path):
    from tests.tiny_models import make_tiny
    from xlviz.models.loading import load_model

    model, tok = load_model(make_tiny(arch, tmp_path / arch, task="qa", seed=3), task="qa")
    model.eval()
    return model, tok


def _pad_baseline_logits(model, tok, sal: Salience):
    """logit(baseline) computed here, independently of captum: every question and context
    token replaced by [PAD], special tokens, positions, segments and mask kept."""
    import torch

    from xlviz.models.surgery import first_position_row

    enc = tok(QUESTION_TEXT, CONTEXT_TEXT)
    ids = torch.tensor([enc["input_ids"]])
    assert tok.convert_ids_to_tokens(enc["input_ids"]) == sal.tokens  # one window: the whole input
    base = ids.clone()
    base[0, [i for i, s in enumerate(sal.segments) if s != SPECIAL]] = tok.pad_token_id
    kw = {k: torch.tensor([enc[k]]) for k in ("attention_mask", "token_type_ids") if k in enc and k in tok.model_input_names}
    kw["position_ids"] = first_position_row(model) + torch.arange(ids.shape[1]).unsqueeze(0)
    with torch.no_grad():
        out_in, out_base = model(input_ids=ids, **kw), model(input_ids=base, **kw)
    return (float(out_in.start_logits[0, sal.start_index]), float(out_in.end_logits[0, sal.end_index]),
            float(out_base.start_logits[0, sal.start_index]), float(out_base.end_logits[0, sal.end_index]))


@pytest.mark.parametrize("arch", ["bert", "roberta", "distilbert", "electra"])
def test_attributions_add_up_to_the_logit_difference(arch, tmp_path):
    """Completeness for both logits: Σ attributions = logit(input) − logit(baseline), with the
    baseline's logits computed here by a plain forward pass (RoBERTa's positions included)."""
    model, tok = _tiny_qa(arch, tmp_path)
    answer = (CONTEXT_TEXT.index("the big cat"), CONTEXT_TEXT.index("the big cat") + len("the big cat"))
    sal = integrated_gradients(model, tok, QUESTION_TEXT, CONTEXT_TEXT, answer=answer, n_steps=64, max_length=64, doc_stride=16)
    s_in, e_in, s_base, e_base = _pad_baseline_logits(model, tok, sal)
    assert sal.start_logit == pytest.approx(s_in, abs=1e-4) and sal.end_logit == pytest.approx(e_in, abs=1e-4)
    assert sal.start_baseline == pytest.approx(s_base, abs=1e-4) and sal.end_baseline == pytest.approx(e_base, abs=1e-4)
    for values, diff, delta in ((sal.start, s_in - s_base, sal.start_delta), (sal.end, e_in - e_base, sal.end_delta)):
        assert abs(diff) > 1e-3  # the check below is not 0 == 0
        assert float(values.sum()) == pytest.approx(diff, abs=0.02 * abs(diff) + 1e-3)
        # captum's delta is exactly that gap
        assert delta == pytest.approx(float(values.sum()) - diff, abs=1e-3)
        assert abs(delta) <= 0.02 * abs(diff) + 1e-3
    # the answer the model was asked about, in the window it reads
    assert sal.answer == "the big cat"
    assert sal.segments[sal.start_index] == CONTEXT and sal.end_index >= sal.start_index
    # special tokens stay in the baseline: exactly no attribution
    special = [i for i, s in enumerate(sal.segments) if s == SPECIAL]
    assert special and all(sal.start[i] == 0 and sal.end[i] == 0 for i in special)
    assert {QUESTION, CONTEXT} <= set(sal.segments)
    norm = sal.normalised()
    assert float(np.max(np.abs(norm))) == pytest.approx(1.0) and np.allclose(norm * np.max(np.abs(sal.total)), sal.total)


def test_more_steps_do_not_change_an_already_converged_attribution(tmp_path):
    """The steps setting changes the quadrature, not what is explained: 32 and 96 steps agree
    closely on a tiny model, and the model's own answer is used when none is given."""
    model, tok = _tiny_qa("bert", tmp_path)
    a = integrated_gradients(model, tok, QUESTION_TEXT, CONTEXT_TEXT, n_steps=32, max_length=64, doc_stride=16)
    b = integrated_gradients(model, tok, QUESTION_TEXT, CONTEXT_TEXT, n_steps=96, max_length=64, doc_stride=16)
    assert (a.start_index, a.end_index) == (b.start_index, b.end_index)
    assert np.allclose(a.start, b.start, atol=0.05 * float(np.abs(b.start).max()) + 1e-4)
    from xlviz.evaluation.qa_predict import predict_qa

    pred = predict_qa(model, tok, [{"id": "q", "question": QUESTION_TEXT, "context": CONTEXT_TEXT}], max_length=64,
                      doc_stride=16)["q"]
    assert a.answer_span == (pred["start"], pred["end"]) and a.answer == pred["text"]


class _LinearQA:
    """A QA "model" linear in its word embeddings: start_logits[j] = Σ_t e_t · Ws[j, t] (end
    likewise), so integrated gradients equal (e_t − e_pad) · Ws[j, t] exactly, for any steps."""

    def __new__(cls, vocab: int, dim: int = 8, length: int = 64):
        import torch
        from torch import nn

        class Linear(nn.Module):
            def __init__(self):
                super().__init__()
                g = torch.Generator().manual_seed(0)
                self.emb = nn.Embedding(vocab, dim)
                with torch.no_grad():
                    self.emb.weight.copy_(torch.randn(vocab, dim, generator=g))
                self.ws = nn.Parameter(torch.randn(length, length, dim, generator=g))
                self.we = nn.Parameter(torch.randn(length, length, dim, generator=g))

            def get_input_embeddings(self):
                return self.emb

            def forward(self, input_ids, attention_mask=None, token_type_ids=None):
                e = self.emb(input_ids)  # [b, n, d]
                n = e.shape[1]
                start = torch.einsum("btd,jtd->bj", e, self.ws[:n, :n])
                end = torch.einsum("btd,jtd->bj", e, self.we[:n, :n])
                return {"start_logits": start, "end_logits": end}

        return Linear()


def test_integrated_gradients_of_a_linear_model_is_input_times_weight():
    import torch

    from tests.tiny_models import make_tokenizer
    from transformers import AutoTokenizer

    slow = make_tokenizer("bert")
    tok = AutoTokenizer.from_pretrained(_save(slow))
    model = _LinearQA(len(tok))
    answer = (CONTEXT_TEXT.index("cat"), CONTEXT_TEXT.index("cat") + 3)
    sal = integrated_gradients(model, tok, QUESTION_TEXT, CONTEXT_TEXT, answer=answer, n_steps=2, max_length=64, doc_stride=16)
    ids = torch.tensor(tok(QUESTION_TEXT, CONTEXT_TEXT)["input_ids"])
    e, e0 = model.emb.weight[ids], model.emb.weight[tok.pad_token_id]
    keep = torch.tensor([s != SPECIAL for s in sal.segments]).unsqueeze(1)
    diff = torch.where(keep, e - e0, torch.zeros_like(e))  # special tokens are the same in the baseline
    n = len(ids)
    hand_start = (diff * model.ws[sal.start_index, :n]).sum(-1).detach().numpy()
    hand_end = (diff * model.we[sal.end_index, :n]).sum(-1).detach().numpy()
    assert np.allclose(sal.start, hand_start, atol=1e-4) and np.allclose(sal.end, hand_end, atol=1e-4)
    assert abs(sal.start_delta) < 1e-3 and abs(sal.end_delta) < 1e-3
    assert sal.answer == "cat"


def _save(tok) -> str:
    import tempfile

    folder = tempfile.mkdtemp(prefix="xlviz-sal-tok-")
    tok.save_pretrained(folder)
    return folder


def test_bad_requests_are_one_clear_line(tmp_path):
    model, tok = _tiny_qa("bert", tmp_path)
    with pytest.raises(XlvizError, match="not inside the context"):
        integrated_gradients(model, tok, QUESTION_TEXT, CONTEXT_TEXT, answer=(5, 500), max_length=64, doc_stride=16)
    with pytest.raises(XlvizError, match="n_steps"):
        integrated_gradients(model, tok, QUESTION_TEXT, CONTEXT_TEXT, n_steps=0, max_length=64, doc_stride=16)
    with pytest.raises(XlvizError, match="context is empty"):
        integrated_gradients(model, tok, QUESTION_TEXT, "", max_length=64, doc_stride=16)


def test_a_long_context_is_explained_in_the_window_holding_the_answer(tmp_path):
    model, tok = _tiny_qa("bert", tmp_path)
    context = " ".join(["the dog was in the house."] * 8) + " the big cat sat on the red mat."
    start = context.index("the big cat")
    sal = integrated_gradients(model, tok, QUESTION_TEXT, context, answer=(start, start + 11), n_steps=8, max_length=32,
                               doc_stride=8)
    assert sal.n_windows > 1 and sal.window > 0 and sal.answer == "the big cat"
    from xlviz.views.salience import salience_html

    page = salience_html(sal)
    assert f"window {sal.window + 1} of {sal.n_windows}" in page and "opacity:.45" in page  # text outside greyed


# --------------------------------------------------------------------------- linking languages
def _sal(question: str, context: str, q_values: list[float], c_values: list[float]) -> Salience:
    """A Salience over whitespace words (one token each) with given values (start; end 0)."""
    tokens, segments, offsets, values = ["[CLS]"], [SPECIAL], [None], [0.0]
    for seg, text, vals in ((QUESTION, question, q_values), (CONTEXT, context, c_values)):
        pos = 0
        for w, v in zip(text.split(" "), vals):
            a = text.index(w, pos)
            tokens.append(w), segments.append(seg), offsets.append((a, a + len(w))), values.append(v)
            pos = a + len(w)
        tokens.append("[SEP]"), segments.append(SPECIAL), offsets.append(None), values.append(0.0)
    v = np.array(values)
    return Salience(tokens, segments, offsets, v, np.zeros_like(v), 1, 1, 0, 0, 0, 0, 0, 0, 4, question=question,
                    context=context)


def _aligned(a: str, b: str, pairs) -> AlignedText:
    def spans(t):
        out, pos = [], 0
        for w in t.split(" "):
            i = t.index(w, pos)
            out.append((i, i + len(w)))
            pos = i + len(w)
        return out
    return AlignedText(a.split(" "), spans(a), b.split(" "), spans(b), list(pairs))


def test_aligned_salience_by_hand():
    """The top-k words of A by magnitude, each with its gold translation's salience under B."""
    qa_, qb = "who sleeps", "sleeps who"
    ca, cb = "nina sleeps here", "here nina sleeps"
    a = _sal(qa_, ca, [0.5, -0.1], [2.0, -1.0, 0.2])
    b = _sal(qb, cb, [0.3, 0.0], [0.1, 4.0, -0.8])
    q = _aligned(qa_, qb, [(0, 1), (1, 0)])
    c = _aligned(ca, cb, [(0, 1), (1, 2), (2, 0)])
    assert q.fits(qa_, qb) and c.fits(ca, cb) and not c.fits(ca, "here nina slept")
    rows = aligned_salience(a, b, q, c, k=3)
    assert [(r["where"], r["a word"], r["b word"]) for r in rows] == [
        ("context", "nina", "nina"), ("context", "sleeps", "sleeps"), ("question", "who", "who")]
    assert [r["a rank"] for r in rows] == [1, 2, 3]
    assert [r["a share"] for r in rows] == [1.0, -0.5, 0.25]
    # B: nina 4.0 (rank 1), sleeps -0.8 (rank 2), who (question) 0.0 (rank 5 of 5)
    assert [r["b salience"] for r in rows] == [4.0, -0.8, 0.0]
    assert [r["b share"] for r in rows] == [1.0, -0.2, 0.0]
    assert [r["b rank"] for r in rows] == [1, 2, 5]
    # a word without a translation keeps its row with no B word
    rows = aligned_salience(a, b, _aligned(qa_, qb, []), c, k=5)
    who = next(r for r in rows if r["a word"] == "who")
    assert who["b word"] is None and who["b salience"] is None and who["b rank"] is None
    from xlviz.views.salience import links_html

    table = links_html(rows + [{**rows[0], "a word": "<img src=x>"}], "en", "sov")
    assert table.count("<tr>") == 1 + len(rows) + 1 and "(no translation)" in table and "#1" in table
    assert "<img" not in table and "&lt;img src=x&gt;" in table


def test_world_qa_alignment_links_the_qa_test_texts():
    """The world's gold alignment of every test question and context lies on the texts of
    World.qa (what the XQuAD page reads) and joins each English noun, name and adjective to its
    dictionary translation."""
    from xlviz.data.world import World, WorldConfig

    world = World(WorldConfig(seed=0, qa_test_paragraphs=4, parallel_pairs=12, corpus_documents=50))
    l2 = world.languages[-1]

    def by_id(lang):
        return {q["id"]: (q["question"], p["context"]) for a in world.qa("test", lang)["data"]
                for p in a["paragraphs"] for q in p["qas"]}

    en, other = by_id("en"), by_id(l2)
    links = world.qa_alignment("test", l2)
    assert set(links) == set(en) == set(other)
    # nouns, names and adjectives (a verb's number can differ between the two questions' forms)
    dictionary = {(r["en"], r[l2]) for r in world.dictionary(l2) if r["pos"].split(".")[0] in ("noun", "name", "adj")}
    content = 0
    for qid, d in links.items():
        q, c = AlignedText.from_dict(d["question"]), AlignedText.from_dict(d["context"])
        assert q.fits(en[qid][0], other[qid][0]) and c.fits(en[qid][1], other[qid][1])
        assert q.pairs and c.pairs
        for t in (q, c):
            for i, j in t.pairs:
                if any(t.words_a[i] == e for e, _ in dictionary):
                    content += 1
                    assert (t.words_a[i], t.words_b[j]) in dictionary, (t.words_a[i], t.words_b[j])
    assert content > 50
    with pytest.raises(XlvizError, match="unknown language"):
        world.qa_alignment("test", "xx")


# --------------------------------------------------------------------------- notebook API
def test_views_salience_returns_html_with_raw_values(tmp_path):
    import xlviz.views as xv
    from tests.tiny_models import make_tiny

    folder = make_tiny("bert", tmp_path / "qa", task="qa", seed=3)
    context = "the cat sat on the <b>mat</b> & the dog."
    start = context.index("the cat")
    out = xv.salience(folder, QUESTION_TEXT, context, answer=(start, start + 7), n_steps=8)
    assert "salience" in xv.__all__ and isinstance(out, xv.HTML) and out._repr_html_() == str(out)
    sal = out.salience
    assert sal.answer == "the cat" and sal.n_steps == 8
    assert str(out).count('class="xlviz-sal"') == sum(1 for s, o in zip(sal.segments, sal.offsets)
                                                      if s != SPECIAL and o is not None and o[1] > o[0])
    assert "<b>" not in str(out) and "&lt;" in str(out) and "&amp;" in str(out)  # data is text, never markup
    assert "Σ attributions" in str(out) and "8 steps" in str(out)
    start_only = xv.salience(folder, QUESTION_TEXT, context, answer=(start, start + 7), n_steps=8, target="start")
    assert "salience of the start logit" in str(start_only)
    with pytest.raises(XlvizError, match="salience target"):
        xv.salience(folder, QUESTION_TEXT, context, answer=(start, start + 7), n_steps=8, target="middle")


# --------------------------------------------------------------------------- the XQuAD page
APP = str(Path(__file__).resolve().parents[1] / "app.py")


@pytest.fixture(scope="module")
def fake_root(tmp_path_factory) -> Path:
    from tests.app_fixtures import make_run

    root = tmp_path_factory.mktemp("salience-app") / "checkpoints"
    make_run(root, "demo-run")
    return root


def _xquad(root: Path, monkeypatch, state: dict | None = None):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(root))
    at = AppTest.from_file(APP, default_timeout=180)
    for k, v in (state or {}).items():
        at.session_state[k] = v
    at.run()
    at.switch_page("pages/xquad.py").run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def _html(at) -> str:
    return "\n".join(h.proto.body for h in at.get("html"))


def test_xquad_page_explains_an_answer_only_when_opened(fake_root, monkeypatch):
    from xlviz.analysis import salience as analysis

    calls = []
    real = analysis.integrated_gradients

    def spy(*a, **kw):
        calls.append(kw.get("n_steps"))
        return real(*a, **kw)

    monkeypatch.setattr(analysis, "integrated_gradients", spy)
    import streamlit as st

    st.cache_data.clear()
    at = _xquad(fake_root, monkeypatch)
    labels = [e.label for e in at.get("expander")]
    assert sum("Why this answer" in l for l in labels) == 2  # one model, two language cards
    assert 'class="xlviz-salience"' not in _html(at) and calls == []  # closed: nothing computed
    assert "gold translations (the world's word alignment)" in "\n".join(c.value for c in at.caption)
    at.number_input(key="xq_ig_steps").set_value(10).run()
    at.session_state["xq_why_sov_0"] = True  # the user opens the sov card's expander
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    page = _html(at)
    assert page.count('class="xlviz-salience"') == 1 and "10 steps" in page
    assert calls == [10, 10]  # the sov answer and, for the link, the same system's en answer
    links = [h for h in page.split("\n") if 'class="xlviz-links"' in h]
    assert len(links) == 1 and links[0].count("<tr>") == 1 + 5  # header + the top 5 en words
    assert ">en word</th>" in links[0] and ">sov translation</th>" in links[0]
    assert [f"#{r}" in links[0] for r in range(1, 6)] == [True] * 5
    assert links[0].count("(no translation)") < 5  # some words are linked
    raw = next(d.value for d in at.dataframe if "normalised" in d.value.columns)
    assert {"token", "start", "end", "total"} <= set(raw.columns) and raw["normalised"].abs().max() == pytest.approx(1.0)
    at.run()  # a rerun reads the cache
    assert calls == [10, 10]


def test_xquad_page_says_real_data_has_no_gold_alignment(fake_root, tmp_path, monkeypatch):
    from tests.app_fixtures import make_qa_folder

    monkeypatch.setenv("XLVIZ_MODELS", str(tmp_path))
    at = _xquad(fake_root, monkeypatch, {"xq_source": "folder", "xq_folder": str(make_qa_folder(tmp_path)),
                                         "xq_why_sov_0": True})
    assert not at.error, [e.value for e in at.error]
    assert "have no gold word alignment" in "\n".join(c.value for c in at.caption)
    assert 'class="xlviz-salience"' in _html(at)  # the salience itself still shows
    assert 'class="xlviz-links"' not in _html(at)


def test_salience_view_needs_no_streamlit():
    """The notebook draws the page's salience HTML without Streamlit installed."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    code = ("import sys; sys.modules['streamlit'] = None\n"
            "import xlviz.views as xv, xlviz.views.salience, xlviz.analysis.salience\n"
            "assert xv.salience.__doc__\nprint('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
