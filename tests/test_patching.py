"""Patching across languages: patching every position with the English run's states gives the
English logits; patching nothing changes nothing; the world's questions map word to word."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """A tiny QA model ("English") and the same body with other word embeddings ("L2", as a
    MONOTRANS L2 model is), one tokenizer."""
    import torch

    from tests.tiny_models import make_tiny
    from xlviz.models.loading import load_model

    folder = make_tiny("bert", tmp_path_factory.mktemp("patch") / "qa", task="qa", seed=3, num_hidden_layers=3)
    en, tok = load_model(folder, task="qa")
    l2, _ = load_model(folder, task="qa")
    with torch.no_grad():
        emb = l2.get_input_embeddings().weight
        emb.copy_(torch.randn(emb.shape, generator=torch.Generator().manual_seed(7)) * 0.5)
    return en.eval(), l2.eval(), tok


QUESTION, CONTEXT = "who reads the book", "the man reads the book in the house . the cat sat on the mat ."


def test_patching_every_position_recovers_the_english_logits(pair):
    from xlviz.analysis.patching import encode, hidden_and_logits, qa_logits

    en, l2, tok = pair
    enc = encode(tok, QUESTION, CONTEXT)
    hidden, s_en, e_en = hidden_and_logits(en, enc.inputs)
    s0, e0 = qa_logits(l2, enc.inputs)
    assert not np.allclose(s0[0].numpy(), s_en.numpy(), atol=1e-3)  # the two runs differ to begin with
    everything = list(range(enc.inputs["input_ids"].shape[1]))
    for layer in range(hidden.shape[0]):
        s, e = qa_logits(l2, enc.inputs, layer, [(everything, everything)], hidden[layer])
        np.testing.assert_allclose(s[0].numpy(), s_en.numpy(), rtol=0, atol=1e-5)
        np.testing.assert_allclose(e[0].numpy(), e_en.numpy(), rtol=0, atol=1e-5)
        # nothing patched: the L2 run as it was
        s, e = qa_logits(l2, enc.inputs, layer, [([], [])], hidden[layer])
        np.testing.assert_allclose(s[0].numpy(), s0[0].numpy(), rtol=0, atol=1e-5)


def test_patch_question_scores_restored_share(pair):
    from xlviz.analysis.patching import GROUPS, aggregate, encode, patch_question

    en, l2, tok = pair
    enc = encode(tok, QUESTION, CONTEXT)
    n = enc.inputs["input_ids"].shape[1]
    answer = enc.tokens_of(1, (CONTEXT.index("the man"), CONTEXT.index("the man") + 7))
    groups = {t: "question" for t, q in enumerate(enc.sequence) if q == 0}
    groups.update({t: "answer" for t in answer})
    p = patch_question(en, l2, enc, enc, {t: t for t in range(n)}, groups, (answer[0], answer[-1]), (answer[0], answer[-1]),
                       qid="q", paragraph="p")
    r = p.restored()
    assert r.shape == (4, len(GROUPS))  # embeddings + 3 layers
    np.testing.assert_allclose(r[:, GROUPS.index("all")], 1.0, atol=1e-4)  # every position: the English score
    assert p.n_positions["verb"] == 0 and np.allclose(r[:, GROUPS.index("verb")], 0.0)  # nothing to patch
    rows = aggregate([p, p], n_resamples=50)
    got = {(x["layer"], x["group"]): x for x in rows}
    assert got[(0, "all")]["restored"] == pytest.approx(1.0, abs=1e-4)
    assert got[(2, "answer")]["restored"] == pytest.approx(r[2, GROUPS.index("answer")], abs=1e-4)


def test_world_items_align_words_and_mark_the_answer():
    from xlviz.analysis.patching import world_items
    from xlviz.data.world import World, WorldConfig

    world = World(WorldConfig(seed=0, qa_test_paragraphs=3))
    items = world_items(world, "sov")
    assert items and len({it["id"] for it in items}) == len(items)
    for it in items:
        (_, ctx_b, ans_b) = it["l2"]
        answer_spans = [s for s, g in zip(it["context_spans_b"], it["context_groups"]) if g == "answer"]
        start = ans_b["answer_start"]
        # the answer group's words are exactly the gold answer's words
        assert answer_spans[0][0] == start and answer_spans[-1][1] == start + len(ans_b["text"])
        assert sum(g == "verb" for g in it["context_groups"]) == 1
        (_, ctx_a, _) = it["en"]
        assert all(0 <= a[0] < a[1] <= len(ctx_a) and 0 <= b[0] < b[1] <= len(ctx_b) for a, b in it["context_pairs"])


def test_analyse_patching_stores_once_and_the_view_reads_it(tmp_path, capsys):
    import xlviz.views as xv
    from tests.app_fixtures import make_run
    from xlviz.cli import main as cli
    from xlviz.runs import artefacts

    path = make_run(tmp_path, "r")
    assert cli(["analyse", "patching", str(path), "--language", "sov", "--limit", "6"]) == 0
    out = capsys.readouterr().out
    assert "monotrans (6 questions;" in out and "written to" in out
    assert sorted(a.path.rsplit(".", 1)[1] for a in artefacts(path, "analysis")) == ["csv", "json"]
    assert cli(["analyse", "patching", str(path), "--language", "sov", "--limit", "6"]) == 0
    assert "read from" in capsys.readouterr().out
    view = xv.patching(path, "sov", limit=6)
    assert set(view.rows["group"]) == {"question", "answer", "verb", "rest", "all"}
    assert list(view.matrix("monotrans").index) == [0, 1, 2]  # embeddings + the tiny models' two layers
    assert len(view.curve().data) == 1 and len(view.figure().data) == 1
    assert cli(["analyse", "patching", str(path), "--language", "sov", "--systems", "nosuch"]) != 0
    assert "nosuch" in capsys.readouterr().err


@pytest.mark.parametrize("arch", ["roberta", "distilbert", "electra"])
def test_every_architecture_patches_exactly(arch, tmp_path):
    """The hooks find each architecture's layers (ELECTRA's first is its embeddings' projection)."""
    import torch

    from tests.tiny_models import make_tiny
    from xlviz.analysis.patching import encode, hidden_and_logits, qa_logits
    from xlviz.models.loading import load_model

    folder = make_tiny(arch, tmp_path / arch, task="qa")
    en, tok = load_model(folder, task="qa")
    l2, _ = load_model(folder, task="qa")
    with torch.no_grad():
        l2.get_input_embeddings().weight.mul_(0.3)
    enc = encode(tok, "who reads the book", "the man reads the book in the house .")
    hidden, s_en, _ = hidden_and_logits(en.eval(), enc.inputs)
    every = list(range(enc.inputs["input_ids"].shape[1]))
    for layer in range(hidden.shape[0]):
        s, _ = qa_logits(l2.eval(), enc.inputs, layer, [(every, every)], hidden[layer])
        np.testing.assert_allclose(s[0].numpy(), s_en.numpy(), rtol=0, atol=1e-5)


def test_a_page_finds_the_current_stored_table_of_a_system(tmp_path, capsys):
    """Any stored table holding the system is read (the one of most questions), never one whose
    exports changed; the heatmap draws its matrix, the curve its `all` rows."""
    import json
    import shutil

    from tests.app_fixtures import make_run
    from xlviz.analysis.patching import GROUPS
    from xlviz.analysis.patching_report import find_current
    from xlviz.cli import main as cli
    from xlviz.views.patching import PatchingView
    import pandas as pd

    path = make_run(tmp_path, "r")
    assert find_current(path, "sov") is None
    for limit in ("3", "5"):
        assert cli(["analyse", "patching", str(path), "--language", "sov", "--limit", limit, "--quiet"]) == 0
    table, where = find_current(path, "sov", "monotrans")
    assert table["request"]["limit"] == 5 and where.suffix == ".json"
    assert find_current(path, "sov", "floor") is None and find_current(path, "svo") is None
    view = PatchingView(pd.DataFrame(table["rows"]))
    fig = view.heatmap("monotrans")
    z = [[None if v != v else v for v in row] for row in fig.data[0].z]
    by = {(r["layer"], r["group"]): r["restored"] for r in table["rows"]}
    assert list(fig.data[0].x) == list(GROUPS)
    assert z == [[by.get((layer, g)) for g in GROUPS] for layer in fig.data[0].y]
    curve = view.curve("all", {"monotrans": "#123456"})
    assert list(curve.data[0].y) == [by[(layer, "all")] for layer in sorted({l for l, _ in by})]
    assert curve.data[0].line.color == "#123456"
    # the English export changes: both stored tables are stale
    cfg = path / "export" / "monotrans-en" / "config.json"
    cfg.write_text(json.dumps({**json.loads(cfg.read_text()), "xlviz_note": 1}))
    assert find_current(path, "sov") is None
    shutil.rmtree(path)
