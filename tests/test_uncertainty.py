"""xlviz.evaluation.uncertainty: the paragraph (cluster) bootstrap, seed intervals and paired
tests, against values computed by hand and planted effects (fixed seeds)."""

from __future__ import annotations

import numpy as np
import pytest

from xlviz.errors import XlvizError
from xlviz.evaluation.uncertainty import (
    cluster_bootstrap, cluster_draws, paired_test, paired_test_seed_blocks, paragraph_ids, question_bootstrap, resample_means,
    score_intervals, seed_interval, sign_flip_p, two_level_bootstrap)

# three paragraphs: P0 two questions (100, 100), P1 three (0, 0, 100), P2 one (50)
SCORES = [100.0, 100.0, 0.0, 0.0, 100.0, 50.0]
PARAS = ["p0", "p0", "p1", "p1", "p1", "p2"]


def test_resample_means_by_hand():
    sums, counts = np.array([200.0, 100.0, 50.0]), np.array([2.0, 3.0, 1.0])
    draws = np.array([[0, 0, 2], [1, 1, 1], [0, 1, 2], [2, 2, 2]])
    # (200+200+50)/5, 300/9, 350/6, 50: a question-level mean, a paragraph weighing its questions
    assert resample_means(sums, counts, draws).tolist() == pytest.approx([90.0, 100 / 3, 350 / 6, 50.0])


def test_each_resample_draws_whole_paragraphs():
    draws = cluster_draws(3, 500, seed=4)
    assert draws.shape == (500, 3) and draws.min() == 0 and draws.max() == 2
    sums, counts = np.array([200.0, 100.0, 50.0]), np.array([2.0, 3.0, 1.0])
    members = {0: [0, 1], 1: [2, 3, 4], 2: [5]}
    fast = resample_means(sums, counts, draws)
    for b in (0, 1, 77, 499):  # the same resample spelled out: every question of each drawn paragraph
        questions = [q for c in draws[b] for q in members[int(c)]]
        assert fast[b] == pytest.approx(np.mean([SCORES[q] for q in questions]))
    out = cluster_bootstrap(SCORES, PARAS, n_resamples=500, seed=4)
    assert out.mean == pytest.approx(350 / 6)  # the question mean, not the mean of paragraph means (50)
    assert (out.n_questions, out.n_paragraphs, out.n_resamples, out.method) == (6, 3, 500, "paragraph bootstrap")
    assert (out.low, out.high) == pytest.approx(tuple(np.quantile(fast, [0.025, 0.975])))


def test_paragraph_interval_wider_than_question_interval_by_hand():
    # two paragraphs of four questions, each paragraph all right or all wrong
    scores, paras = [0.0] * 4 + [100.0] * 4, ["a"] * 4 + ["b"] * 4
    # paragraph resamples: means 0, 50, 100 with chances 1/4, 1/2, 1/4 -> the 95% interval is [0, 100]
    para = cluster_bootstrap(scores, paras, n_resamples=4000, seed=0)
    assert (para.low, para.high) == (0.0, 100.0)
    # question resamples of 8: mean 0 has chance 1/256, mean <= 12.5 has 9/256 > 2.5% -> [12.5, 87.5]
    q = question_bootstrap(scores, n_resamples=4000, seed=0)
    assert (q.low, q.high) == (12.5, 87.5)
    flat = cluster_bootstrap([40.0] * 5, ["x", "x", "y", "z", "z"])
    assert (flat.low, flat.mean, flat.high) == (40.0, 40.0, 40.0)


def test_planted_correlated_questions_on_the_generated_test_set():
    """On the world's own test set (its paragraphs), scores planted so a paragraph's questions
    go together: the paragraph bootstrap interval is wider than the question bootstrap's."""
    from xlviz.data.world import LanguageSpec, WorldConfig, generate_world

    world = generate_world(WorldConfig(seed=1, corpus_documents=20, qa_test_paragraphs=40, languages=[LanguageSpec("svo")]))
    data = world.qa("test", "svo")
    para = paragraph_ids(data)
    ids = list(para)
    sizes = np.bincount(np.unique(list(para.values()), return_inverse=True)[1])
    assert len(sizes) == 40 and sizes.min() >= 2  # questions do share paragraphs
    rng = np.random.default_rng(0)
    understood = {p: rng.random() < 0.5 for p in set(para.values())}
    rows = [{"id": q, "exact_match": 100.0 * understood[para[q]], "f1": 100.0 * understood[para[q]]} for q in ids]
    wide = cluster_bootstrap([r["f1"] for r in rows], [para[q] for q in ids], seed=0)
    narrow = question_bootstrap([r["f1"] for r in rows], seed=0)
    assert wide.high - wide.low > 1.2 * (narrow.high - narrow.low)
    fields = score_intervals(rows, para)
    assert fields["n_paragraphs"] == 40 and fields["n_questions"] == len(ids) and fields["ci_method"] == "paragraph bootstrap"
    assert fields["f1_ci_low"] == pytest.approx(wide.low, abs=1e-4) and fields["f1_ci_high"] == pytest.approx(wide.high, abs=1e-4)


def test_seed_interval_by_hand():
    out = seed_interval([70.0, 80.0, 90.0])
    # sd 10, t(0.975, 2) = 4.302652729911275: half-width 4.3027 * 10 / sqrt(3)
    half = 4.302652729911275 * 10 / 3 ** 0.5
    assert (out.mean, out.n_seeds) == (80.0, 3)
    assert (out.low, out.high) == pytest.approx((80 - half, 80 + half))
    one = seed_interval([61.2])
    assert (one.low, one.high, one.n_seeds) == (61.2, 61.2, 1)


def test_two_level_bootstrap_resamples_seeds():
    # within-seed scores constant: only the seed draw matters -> seed means 0 / 50 / 100 at 1/4, 1/2, 1/4
    runs = [([0.0] * 4, ["a", "a", "b", "b"]), ([100.0] * 4, ["a", "a", "b", "b"])]
    out = two_level_bootstrap(runs, n_resamples=4000, seed=0)
    assert (out.mean, out.low, out.high, out.n_seeds) == (50.0, 0.0, 100.0, 2)
    # one seed: the paragraph spread alone
    single = two_level_bootstrap([([0.0, 0.0, 100.0, 100.0], ["a", "a", "b", "b"])], n_resamples=4000, seed=0)
    assert (single.low, single.high) == (0.0, 100.0)


def test_exact_sign_flip_p_by_hand():
    # block sums 30, 10, -10 (|observed| 30): the 8 sign patterns (+++, ++-, +-+, +--, -++, -+-, --+, ---)
    # give |sum| 30, 50, 10, 30, 30, 10, 50, 10 -> 6 of 8 are >= 30
    p, how = sign_flip_p(np.array([30.0, 10.0, -10.0]), 1.0)
    assert p == 6 / 8 and how.startswith("exact")
    assert sign_flip_p(np.zeros(4), 1.0)[0] == 1.0


def _planted(effect: float, seed: int):
    rng = np.random.default_rng(seed)
    paras = [f"p{i}" for i in range(60) for _ in range(3)]
    base = rng.random(60)  # a paragraph's difficulty: its questions go together
    b = [100.0 * (rng.random() < base[i // 3]) for i in range(180)]
    a = [100.0 * (rng.random() < min(1.0, base[i // 3] + effect)) for i in range(180)]
    return a, b, paras


def test_paired_test_finds_a_planted_difference():
    a, b, paras = _planted(0.3, seed=11)
    r = paired_test(a, b, paras, seed=0)
    assert r.p_value < 0.05 and r.low > 0 and r.difference > 0
    assert (r.n_paragraphs, r.n_questions) == (60, 180)


def test_paired_test_does_not_find_a_null_one():
    a, b, paras = _planted(0.0, seed=11)
    r = paired_test(a, b, paras, seed=0)
    assert r.p_value > 0.05 and r.low < 0 < r.high


def test_former_paired_test_over_seeds_is_kept_for_the_calibration_suite():
    """Not shown to users (tests/test_calibration.py shows why); it still computes what it did."""
    runs = [_planted(0.3, seed=s) for s in (1, 2, 3)]
    r = paired_test_seed_blocks(runs, seed=0, n_resamples=1000)
    assert r.n_seeds == 3 and r.p_value < 0.05 and r.low > 0
    null = paired_test_seed_blocks([_planted(0.0, seed=s) for s in (1, 2, 3)], seed=0, n_resamples=1000)
    assert null.p_value > 0.05 and null.low < 0 < null.high


def test_bad_input_is_one_clear_error():
    with pytest.raises(XlvizError, match="one cluster per score"):
        cluster_bootstrap([1.0, 2.0], ["a"])
    with pytest.raises(XlvizError, match="same questions"):
        paired_test([1.0, 2.0], [1.0], ["a", "b"])
    with pytest.raises(XlvizError, match="finite"):
        cluster_bootstrap([float("nan")], ["a"])
