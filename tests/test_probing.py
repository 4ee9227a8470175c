"""Probing and whole-run analyses: the maths end to end on tiny models and a fake run.

Checks that hold whatever the (random) weights: a model compared with itself on identical
sentences retrieves every sentence and has CKA 1 at every layer; the agreement probe compares
exactly the masked LM's log-probabilities of the two forms (an MLM rigged to prefer one form
scores 100% / 0%); coverage follows the tokenizer; the WiC probe and the similarity measure
find signal where it was planted; the floor is the pipeline's floor.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from xlviz.analysis import probing, reports
from xlviz.errors import XlvizError
from xlviz.models import reference
from tests.analysis_fixtures import L2, make_analysis_run


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return make_analysis_run(tmp_path_factory.mktemp("probing") / "checkpoints")


@pytest.fixture(scope="module")
def en_mlm(run_dir):
    return reference.load_spec(reference.ModelSpec(str(run_dir / "s1_pretrain")), "mlm")


@pytest.fixture(scope="module")
def world(run_dir):
    from xlviz.data.world import load_world

    return load_world(run_dir / "world")


# --------------------------------------------------------------------------- minimal pairs
def test_minimal_pair_and_marvin_linzen_rows():
    p = probing.minimal_pair("the dogs bark", "the dogs barks", id="x", category="simple")
    assert (p["index"], p["good_word"], p["bad_word"], p["words"]) == (2, "bark", "barks", ["the", "dogs", "bark"])
    two = probing.minimal_pair("the dog barks loudly", "the dogs bark loudly")
    assert two["index"] is None and "2 words" in two["reason"]
    assert probing.minimal_pair("a b", "a b c")["index"] is None
    rows = [{"category": "simple_agrmt", "condition": "sing", "grammatical": "the author laughs",
             "ungrammatical": "the author laugh"}] * 2
    pairs = probing.marvin_linzen_pairs(rows)
    assert [p["id"] for p in pairs] == ["ml-simple_agrmt-00001", "ml-simple_agrmt-00002"]
    assert pairs[0]["condition"] == "sing" and pairs[0]["good_word"] == "laughs"


def test_spread_per_category_takes_both_ends():
    pairs = [{"category": "a", "n": i} for i in range(10)] + [{"category": "b", "n": i} for i in range(3)]
    kept = reports.spread_per_category(pairs, 4)
    assert [p["n"] for p in kept if p["category"] == "a"] == [0, 3, 6, 9]
    assert [p["n"] for p in kept if p["category"] == "b"] == [0, 1, 2]


# --------------------------------------------------------------------------- agreement
def _mask_logprobs(model, tok, sentence_words, index):
    import torch

    words = list(sentence_words)
    words[index] = tok.mask_token
    enc = tok(" ".join(words), return_tensors="pt")
    pos = enc["input_ids"][0].tolist().index(tok.mask_token_id)
    with torch.no_grad():
        logits = model(**{k: v for k, v in enc.items() if k != "token_type_ids"}).logits[0, pos]
    return torch.log_softmax(logits, -1).numpy()


def test_agreement_compares_the_two_forms_log_probabilities(en_mlm, world):
    model, tok = en_mlm
    pairs = world.agreement_pairs("en", n=12)
    calls = []
    res = probing.agreement_accuracy(model, tok, pairs, batch_size=5, progress=lambda d, t: calls.append((d, t)))
    assert res["n_total"] == 12 and res["n_scored"] == 12 and res["coverage"] == 1.0
    assert calls[-1] == (12, 12)
    for p, it in zip(pairs, res["items"]):
        lp = _mask_logprobs(model, tok, p["words"], p["index"])
        g, b = tok.convert_tokens_to_ids(p["good_word"]), tok.convert_tokens_to_ids(p["bad_word"])
        assert it["logp_good"] == pytest.approx(float(lp[g]), abs=1e-4)
        assert it["logp_bad"] == pytest.approx(float(lp[b]), abs=1e-4)
        assert it["correct"] == (it["logp_good"] > it["logp_bad"])
        assert it["masked"].split()[p["index"]] == tok.mask_token
    n_ok = sum(it["correct"] for it in res["items"])
    assert res["accuracy"] == pytest.approx(n_ok / 12)
    cats = {c["category"]: c for c in res["by_category"]}
    assert set(cats) == {"simple", "across_pp", "object_attractor"}
    assert sum(c["n_scored"] for c in cats.values()) == 12


def test_agreement_rigged_mlm_scores_all_or_nothing(run_dir, world):
    import torch

    model, tok = reference.load_spec(reference.ModelSpec(str(run_dir / "s1_pretrain")), "mlm")
    bias = model.cls.predictions.bias
    saved = bias.detach().clone()
    for p in world.agreement_pairs("en", n=6):
        for prefer, expected in (("good_word", True), ("bad_word", False)):
            with torch.no_grad():
                bias.copy_(saved)
                bias[tok.convert_tokens_to_ids(p[prefer])] += 100.0  # the decoder bias dominates every logit
            res = probing.agreement_accuracy(model, tok, [p])
            assert res["items"][0]["correct"] is expected and res["items"][0]["preferred"] == p[prefer]
            assert res["accuracy"] == float(expected)


def test_agreement_coverage_needs_single_tokens(en_mlm):
    model, tok = en_mlm
    vocab = tok.get_vocab()
    known = [w for w in ("the", "cat", "cats", "dog", "dogs") if w in vocab]
    assert len(known) >= 3, "the tiny vocabulary has whole words"
    pairs = [
        probing.minimal_pair("the cat sees", "the cat seeszq"),  # the bad form splits into pieces
        probing.minimal_pair("the cat sees the dog", "the cat sees the dogs"),
        probing.minimal_pair("the cat sees", "the cats see"),  # two words differ
    ]
    res = probing.agreement_accuracy(model, tok, pairs)
    got = [(it["covered"], it["reason"]) for it in res["items"]]
    assert got[0][0] is False and "not single tokens" in got[0][1]
    assert got[1] == (True, "")
    assert got[2][0] is False and "2 words" in got[2][1]
    assert res["coverage"] == pytest.approx(1 / 3) and res["n_scored"] == 1
    # unit="token" scores a pair whose tokenizations differ in one sub-word
    tok_pieces = tok.tokenize("seeszq")
    assert len(tok_pieces) > 1
    res_tok = probing.agreement_accuracy(model, tok, [probing.minimal_pair("the cat seeszq", "the cat seeszz")], unit="token")
    assert res_tok["items"][0]["covered"] == (tok.tokenize("seeszz")[:-1] == tok_pieces[:-1] and
                                              len(tok.tokenize("seeszz")) == len(tok_pieces))


def test_agreement_bad_input(en_mlm):
    model, tok = en_mlm
    with pytest.raises(XlvizError, match="unit"):
        probing.agreement_accuracy(model, tok, [], unit="char")
    with pytest.raises(XlvizError, match="index"):
        probing.agreement_accuracy(model, tok, [{"words": ["a"], "index": 3, "good_word": "a", "bad_word": "b"}])
    with pytest.raises(XlvizError, match="good_word"):
        probing.agreement_accuracy(model, tok, [{"words": ["a"], "index": 0}])
    assert probing.agreement_accuracy(model, tok, [])["accuracy"] is None


# --------------------------------------------------------------------------- word in context
def test_wic_probe_and_similarity_find_planted_signal():
    rng = np.random.default_rng(0)
    n, d = 80, 8
    y = np.array([0, 1] * (n // 2))
    U = rng.normal(size=(2, n, d))
    V = rng.normal(size=(2, n, d))
    V[1, y == 1] = U[1, y == 1] + 0.01 * rng.normal(size=(int(y.sum()), d))  # layer 1: same sense = same vector
    probe = probing.wic_probe(U, V, y, folds=4)
    acc = [r["accuracy"] for r in probe["layers"]]
    assert acc[1] >= 0.95 and acc[0] < 0.75
    assert probe["layers"][0]["majority"] == 0.5
    assert len(probe["predictions"]) == 2 and len(probe["predictions"][1]) == n
    sim = probing.contextual_similarity(U, V, y)
    assert sim["layers"][1]["auc"] == 1.0 and sim["layers"][1]["spearman"] > 0.8
    assert abs(sim["layers"][0]["spearman"]) < 0.35
    assert sim["layers"][1]["mean_cos_same"] > 0.99
    split = probing.wic_probe(U, V, y, test_fraction=0.25)
    assert sum(p is not None for p in split["predictions"][1]) == n // 4
    with pytest.raises(XlvizError, match="each class"):
        probing.wic_probe(U, V, np.ones(n, dtype=int))


def test_word_in_context_on_sense_pairs(en_mlm, world):
    model, tok = en_mlm
    pairs = world.sense_pairs("en", n=24)
    res = probing.word_in_context(model, tok, pairs, folds=3)
    L = model.config.num_hidden_layers + 1
    assert [r["layer"] for r in res["layers"]] == list(range(L))
    assert res["n_pairs"] == 24 and res["n_dropped"] == 0 and len(res["items"]) == 24
    it = res["items"][0]
    assert len(it["cosine"]) == L and len(it["predicted"]) == L
    U, V, y, kept = probing.sense_pair_vectors(model, tok, pairs)
    assert U.shape == (L, 24, model.config.hidden_size) and kept == list(range(24))
    assert y.tolist() == [int(p["same_sense"]) for p in pairs]
    # in English both contexts contain the same word form, so layer 0 (embeddings + position) can't tell
    # same sense from different; the cosine there is driven by position only
    for r in res["layers"]:
        assert 0.0 <= r["accuracy"] <= 1.0


# --------------------------------------------------------------------------- alignment end to end
def test_model_with_itself_on_identical_sentences_is_perfectly_aligned(en_mlm, world):
    model, tok = en_mlm
    pairs = world.parallel_pairs(L2, n=12)
    src = [p["src"] for p in pairs]
    assert len(set(src)) == len(src)
    gold = sorted({(w, w) for p in pairs for w in p["src_words"]})
    data = reports.ParallelData("en", "en", src, list(src), [p["id"] for p in pairs], "identical",
                                [p["src_words"] for p in pairs], [p["src_words"] for p in pairs], None, gold)
    for pooling in ("mean", "mean_no_special", "cls"):
        rows = reports.system_alignment(model, tok, model, tok, data, pooling=pooling, words=pooling == "mean")
        assert len(rows) == model.config.num_hidden_layers + 1
        for r in rows[1:] if pooling == "cls" else rows:  # layer 0 [CLS] is the same vector for every sentence
            assert r["retrieval_a_to_b"] == 1.0 and r["retrieval_b_to_a"] == 1.0
            assert r["cka"] == pytest.approx(1.0, abs=1e-6)
        if pooling == "mean":
            assert all(r["word_translation_a_to_b"] == 1.0 and r["word_translation_b_to_a"] == 1.0 for r in rows)
    # the orthogonal map fitted on identical sides is the identity once the training rows span the space
    # unique sentences: the world's skewed word choices repeat some, and duplicates tie in retrieval
    more = list(dict.fromkeys(p["src"] for p in world.parallel_pairs(L2, n=200)))[:60]
    assert len(more) == 60
    data = reports.ParallelData("en", "en", more, list(more), [str(i) for i in range(60)], "identical")
    rows = reports.system_alignment(model, tok, model, tok, data, center=True, train_fraction=0.75)
    assert all(r["retrieval_before"] == 1.0 and r["retrieval_after"] == 1.0 and r["n_test"] == 15 for r in rows)


def test_run_systems_and_floor_is_the_pipelines_floor(run_dir):
    import torch

    from xlviz.models.floor import make_l2_mlm

    systems = reports.run_systems(run_dir, L2)
    assert [s.name.split(" · ")[1] for s in systems] == ["transferred", "floor"]
    tr, fl = systems
    assert tr.a == fl.a and tr.a.path.endswith("s1_pretrain")
    assert tr.b.path.endswith(f"s2_transfer-{L2}") and tr.b.floor_seed is None
    assert fl.b.floor_seed == 1  # config seed 0 + 1, as the pipeline's floor
    floor, ftok = reference.load_spec(fl.b)
    l1, _ = reference.load_spec(fl.a, "mlm")
    l2tok = reference.load_tokenizer(run_dir / f"s2_transfer-{L2}")
    assert len(ftok) == len(l2tok)
    ref = make_l2_mlm(l1, len(l2tok), seed=1)
    assert torch.equal(floor.bert.embeddings.word_embeddings.weight, ref.bert.embeddings.word_embeddings.weight)
    assert torch.equal(floor.bert.encoder.layer[0].attention.self.query.weight, l1.bert.encoder.layer[0].attention.self.query.weight)
    with pytest.raises(XlvizError, match="no language 'xx'"):
        reports.run_systems(run_dir, "xx")
    models = reports.run_probe_models(run_dir)
    assert [(m.role, m.language) for m in models] == [("reference", "en"), ("transferred", L2), ("floor", L2)]


def test_run_alignment_rows(run_dir):
    seen = []
    res = reports.run_alignment(run_dir, L2, limit=10, train_fraction=0.5, progress=lambda f, t: seen.append(f))
    rows = res["rows"]
    assert {r["system"].split(" · ")[1] for r in rows} == {"transferred", "floor"}
    assert len(rows) == 2 * 3 and res["meta"]["n_pairs"] == 10
    for r in rows:
        for k in ("retrieval_a_to_b", "retrieval_b_to_a", "retrieval_before", "retrieval_after",
                  "word_translation_a_to_b", "word_translation_b_to_a"):
            assert 0.0 <= r[k] <= 1.0
        assert -1e-9 <= r["cka"] <= 1.0 + 1e-9
    assert seen == sorted(seen) and seen[-1] == 1.0


def test_translation_projection_and_aligned_words(run_dir):
    from xlviz.data.parallel.world import world_data

    data = world_data(run_dir, L2, limit=4)
    rng = np.random.default_rng(0)
    A, B = rng.normal(size=(4, 6)), rng.normal(size=(4, 6))
    rows = reports.translation_projection(A, B, data.src, data.tgt, "en", L2)
    assert len(rows) == 8 and [r["pair"] for r in rows] == [0, 1, 2, 3, 0, 1, 2, 3]
    assert {r["language"] for r in rows} == {"en", L2} and rows[4]["text"] == data.tgt[0]
    ra, rb, la, lb, pairs = reports.aligned_words(data, 2)
    n_a = len(data.src_words[0]) + len(data.src_words[1])
    assert ra == list(range(n_a)) and len(la) == n_a
    i, j = pairs[0]
    assert la[i].split()[0] == data.src_words[0][data.alignment[0][0][0]]
    assert lb[j].split()[0] == data.tgt_words[0][data.alignment[0][0][1]]
    with pytest.raises(XlvizError, match="one width"):
        reports.translation_projection(A, B[:, :3], data.src, data.tgt, "en", L2)


def test_parallel_data_sources(run_dir, tmp_path):
    w = reports.parallel_data("world", run_dir=run_dir, l2=L2, limit=5)
    assert len(w) == 5 and w.has_words and w.dictionary and w.lang_b == L2
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("one\ntwo\n\nfour\n")
    b.write_text("eins\nzwei\ndrei\nvier\n")
    f = reports.parallel_data("files", files=(str(a), str(b)), lang_a="en", lang_b="de")
    assert f.src == ["one", "two", "four"] and f.tgt == ["eins", "zwei", "vier"]
    up = reports.parallel_from_texts("x\ny\n", "X\nY", "en", "de")
    assert up.src == ["x", "y"] and up.tgt == ["X", "Y"]
    with pytest.raises(XlvizError, match="line-aligned"):
        reports.parallel_from_texts("x\ny", "X")
    with pytest.raises(XlvizError, match="unknown source"):
        reports.parallel_data("wiki")


def test_parallel_data_real_sources(shared_data):
    pud = reports.parallel_data("pud", lang_a="en", lang_b="de", limit=3, data_dir=shared_data / "pud")
    assert len(pud) == 3 and pud.ids[0].startswith("n") and pud.src[0] != pud.tgt[0]
    tat = reports.parallel_data("tatoeba", lang_a="en", lang_b="de", limit=3, data_dir=shared_data / "tatoeba")
    assert tat.lang_b == "de" and len(tat) == 3
    m30 = reports.parallel_data("multi30k", lang_a="en", lang_b="fr", limit=3, data_dir=shared_data / "multi30k")
    assert len(m30) == 3


def test_marvin_linzen_pairs_from_shared_data(shared_data):
    lang, pairs = reports.agreement_data("marvin-linzen", max_per_category=4,
                                         path=shared_data / "syneval" / "marvin_linzen.tsv.gz")
    assert lang == "en" and len(pairs) == 4 * len({p["category"] for p in pairs}) == 4 * 18
    conds = {p["condition"].split("_")[0] for p in pairs if p["category"] == "simple_agrmt"}
    assert conds == {"sing", "plur"}  # spread through the category, not its first rows
    assert sum(p["index"] is not None for p in pairs) >= 0.9 * len(pairs)


def test_run_probing_tables(run_dir):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = reports.run_probing(run_dir, max_per_category=4, n_senses=16, folds=2)
    agr = res["agreement"]
    assert {(r["role"], r["language"]) for r in agr} == {("reference", "en"), ("transferred", L2), ("floor", L2)}
    overall = [r for r in agr if r["category"] == "all"]
    assert all(r["n_total"] == 12 and r["coverage"] == 1.0 for r in overall)
    # word in context on English only (the L1 model x (2 layers + embeddings)): in the L2 a
    # homonym's two senses are two words, so its two models are named as not probed
    assert len(res["wic"]) == 3 and {r["language"] for r in res["wic"]} == {"en"}
    assert len(res["wic_skipped"]) == 2 and all(s.endswith(f"({L2})") for s in res["wic_skipped"])
    assert set(res["agreement_items"]) == {f"{r['model']}|{r['language']}" for r in overall}
