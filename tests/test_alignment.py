"""Alignment maths against hand-computed values: CKA, retrieval, Procrustes, lexicon induction."""

from __future__ import annotations

import numpy as np
import pytest

from xlviz.analysis.alignment import (
    cka_matrix,
    layerwise_alignment,
    linear_cka,
    procrustes,
    retrieval_accuracy,
    word_translation_accuracy,
)
from xlviz.analysis.projection import project
from xlviz.errors import XlvizError


def _rotation(d: int, seed: int) -> np.ndarray:
    q, r = np.linalg.qr(np.random.default_rng(seed).normal(size=(d, d)))
    return q * np.sign(np.diag(r))


# ---------------------------------------------------------------- CKA


def test_cka_invariances():
    X = np.random.default_rng(0).normal(size=(50, 6))
    assert linear_cka(X, X) == pytest.approx(1.0)
    assert linear_cka(X, X @ _rotation(6, 1)) == pytest.approx(1.0)
    assert linear_cka(X, 3.7 * X) == pytest.approx(1.0)
    assert linear_cka(X, X + 5.0) == pytest.approx(1.0)  # features are centred
    # different feature widths are allowed: X padded with zero columns is the same representation
    assert linear_cka(X, np.hstack([X, np.zeros((50, 3))])) == pytest.approx(1.0)
    # Gram form (n < d) gives the same value as the feature form
    Z = np.random.default_rng(3).normal(size=(5, 20))
    W = np.random.default_rng(4).normal(size=(5, 20))
    feat = np.linalg.norm((W - W.mean(0)).T @ (Z - Z.mean(0))) ** 2 / (
        np.linalg.norm((Z - Z.mean(0)).T @ (Z - Z.mean(0))) * np.linalg.norm((W - W.mean(0)).T @ (W - W.mean(0)))
    )
    assert linear_cka(Z, W) == pytest.approx(feat)


def test_cka_independent_is_small():
    rng = np.random.default_rng(0)
    assert linear_cka(rng.normal(size=(500, 5)), rng.normal(size=(500, 5))) < 0.1


def test_cka_hand_examples():
    # One feature each: linear CKA is the squared Pearson correlation.
    # x = [1,2,3] -> centred [-1,0,1]; y = [1,0,2] -> centred [0,-1,1]; x.y = 1, |x|^2 = |y|^2 = 2.
    # CKA = 1^2 / (2 * 2) = 0.25
    assert linear_cka([[1.0], [2.0], [3.0]], [[1.0], [0.0], [2.0]]) == pytest.approx(0.25)
    # Two features (columns already have mean 0):
    # X = [[1,0],[0,1],[-1,-1]], Y = [[1,0],[0,0],[-1,0]]
    # Y^T X = [[2,1],[0,0]] -> ||.||^2 = 5;  X^T X = [[2,1],[1,2]] -> ||.|| = sqrt(10);  Y^T Y = [[2,0],[0,0]] -> 2
    # CKA = 5 / (2 sqrt(10))
    X = [[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0]]
    Y = [[1.0, 0.0], [0.0, 0.0], [-1.0, 0.0]]
    assert linear_cka(X, Y) == pytest.approx(5.0 / (2.0 * np.sqrt(10.0)))
    # 2x2: after centring two rows are x and -x, so any two non-constant 2-row inputs give 1
    assert linear_cka([[1.0, 2.0], [3.0, 5.0]], [[0.0, 1.0], [7.0, -2.0]]) == pytest.approx(1.0)
    # a constant representation has no variance: CKA undefined
    assert np.isnan(linear_cka(np.ones((4, 2)), np.eye(4)[:, :2]))


# ---------------------------------------------------------------- retrieval


def test_retrieval_identical_and_permuted():
    X = np.random.default_rng(0).normal(size=(30, 8))
    assert retrieval_accuracy(X, X) == (1.0, 1.0)
    # well separated one-hot rows; Y is a cyclic shift, so no row's nearest neighbour is itself
    E = np.eye(6)
    assert retrieval_accuracy(E, np.roll(E, 1, axis=0)) == (0.0, 0.0)
    assert retrieval_accuracy(E, E[[0, 1, 2, 4, 3, 5]]) == pytest.approx((4 / 6, 4 / 6))


def test_retrieval_centering_removes_shared_offset():
    # signals with mean 0; language a carries a large offset along the first axis
    s = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0]])
    X = s + np.array([100.0, 0.0])
    Y = s.copy()
    # uncentred, every X row points along (1, 0) so all retrieve Y row 0: only row 0 is right
    acc_xy, _ = retrieval_accuracy(X, Y)
    assert acc_xy == pytest.approx(1 / 3)
    assert retrieval_accuracy(X, Y, center=True) == (1.0, 1.0)


def test_retrieval_bad_input():
    with pytest.raises(XlvizError):
        retrieval_accuracy(np.zeros((3, 2)), np.zeros((4, 2)))
    with pytest.raises(XlvizError, match="NaN"):
        retrieval_accuracy(np.array([[np.nan, 1.0]]), np.array([[1.0, 1.0]]))


# ---------------------------------------------------------------- Procrustes


def test_procrustes_recovers_rotation():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 7))
    Q = _rotation(7, 5)
    Y = X @ Q
    W = procrustes(X, Y)
    assert np.allclose(W, Q, atol=1e-8)
    assert np.allclose(W.T @ W, np.eye(7), atol=1e-10)
    assert retrieval_accuracy(X @ W, Y) == (1.0, 1.0)


def test_layerwise_alignment_with_held_out_procrustes():
    rng = np.random.default_rng(1)
    A = rng.normal(size=(3, 80, 8))
    Q = _rotation(8, 2)
    B = A @ Q + 0.01 * rng.normal(size=A.shape)
    rows = layerwise_alignment(A, B, train_fraction=0.5, seed=0)
    assert [r["layer"] for r in rows] == [0, 1, 2]
    for r in rows:
        assert r["n_train"] == 40 and r["n_test"] == 40
        assert r["cka"] == pytest.approx(1.0, abs=1e-3)
        assert r["retrieval_after"] == 1.0 and r["retrieval_after_b_to_a"] == 1.0
        assert r["retrieval_before"] < 0.5  # a random rotation scrambles cosine neighbours
    plain = layerwise_alignment(A, A)
    assert all(r["retrieval_a_to_b"] == 1.0 and r["retrieval_b_to_a"] == 1.0 for r in plain)
    assert "retrieval_before" not in plain[0]
    # different widths: CKA only
    wide = layerwise_alignment(A, np.concatenate([A, A], axis=2))
    assert wide[0]["retrieval_a_to_b"] is None and wide[0]["cka"] == pytest.approx(1.0)
    with pytest.raises(XlvizError):
        layerwise_alignment(A, B, train_fraction=1.0)
    with pytest.raises(XlvizError):
        layerwise_alignment(A, B[:, :10])
    M = cka_matrix(A, B[:2])
    assert M.shape == (3, 2) and M[0, 0] == pytest.approx(1.0, abs=1e-3)


# ---------------------------------------------------------------- word translation


def test_word_translation_accuracy():
    src_words = ["cat", "dog", "cat", "bird"]
    src = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.2], [np.nan, np.nan]])  # bird truncated away
    tgt_words = ["chat", "chien", "voiture"]
    tgt = np.array([[1.0, 0.1], [0.9, 0.2], [0.0, 1.0]])
    gold = [("cat", "chat"), ("dog", "chien"), ("bird", "oiseau"), ("cat", "chat")]
    res = word_translation_accuracy(src, tgt, src_words, tgt_words, gold)
    # cat -> mean (1, 0.1) -> nearest chat (exactly parallel): correct
    # dog -> (0, 1) -> nearest voiture: wrong
    assert res["accuracy"] == 0.5
    assert res["n_evaluated"] == 2
    assert res["n_skipped_pairs"] == 1  # bird has no vector (and oiseau is not a target)
    by = {r["src"]: r for r in res["per_word"]}
    assert by["cat"]["predicted"] == "chat" and by["cat"]["correct"]
    assert by["cat"]["similarity"] == pytest.approx(1.0)
    assert by["dog"]["predicted"] == "voiture" and not by["dog"]["correct"]
    assert by["dog"]["gold"] == ["chien"]
    with pytest.raises(XlvizError):
        word_translation_accuracy(src, tgt, src_words, tgt_words, [("bird", "oiseau")])


# ---------------------------------------------------------------- projection


def test_pca_projection():
    t = np.linspace(-1, 1, 9)
    line = np.stack([t, 2 * t, np.zeros_like(t)], axis=1) + 3.0
    P = project(line, "pca")
    assert P.shape == (9, 2) and P.dtype == np.float32
    assert np.allclose(P[:, 1], 0.0, atol=1e-6)
    assert np.allclose(np.abs(P[:, 0]), np.abs(t) * np.sqrt(5), atol=1e-5)
    assert np.array_equal(P, project(line, "pca"))
    assert project(np.ones((1, 4)), "pca").shape == (1, 2)
    with pytest.raises(XlvizError):
        project(np.ones((3, 2)), "tsne")
    with pytest.raises(XlvizError, match="pca"):
        project(np.ones((3, 2)), "umap")  # too few points: a clear message, no umap import needed


@pytest.mark.slow
def test_umap_projection():
    X = np.random.default_rng(0).normal(size=(25, 6))
    P = project(X, "umap", seed=0)
    assert P.shape == (25, 2) and np.all(np.isfinite(P))
    assert project(X[:6], "umap", n_neighbors=15).shape == (6, 2)  # n_neighbors lowered to n - 1


def test_coinciding_systems_are_grouped():
    """Two names for one encoder (same vectors in both languages) are reported, so the page can
    say why only one of their lines shows; a system equal in one language only is not."""
    from xlviz.ui.analysis import coinciding

    rng = np.random.default_rng(0)
    a, b, c = (rng.normal(size=(3, 5, 4)) for _ in range(3))
    vectors = {"ppa": {"a": a, "b": b}, "jointpair": {"a": a, "b": c}, "ppa-codeswitch": {"a": a.copy(), "b": b.copy()}}
    assert coinciding(vectors) == [["ppa", "ppa-codeswitch"]]
    assert coinciding({"x": {"a": a, "b": b}, "y": {"a": a[:, :2], "b": b}}) == []
