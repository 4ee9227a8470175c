"""How well two languages' representations line up: retrieval, linear CKA, Procrustes.

Why: MONOTRANS-style transfer (Artetxe et al. 2020) and post-hoc alignment of independently
trained models (Wu et al. 2020) are judged by whether translations sit near each other in
representation space. Everything here is plain numpy on arrays (rows = items), so it can be
tested against hand-computed values and reused on any embeddings (sentence or word level).

Conventions: row ``i`` of ``X`` is the translation of row ``i`` of ``Y``; accuracies are
fractions in [0, 1] (multiply by 100 for a table in percent).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from xlviz.errors import XlvizError

_BLOCK = 1024  # rows of the similarity matrix computed at once, so n x n never sits in memory


def _as_matrix(a, name: str) -> np.ndarray:
    """float64 2-D array with finite values, or a clear error naming the argument."""
    arr = np.asarray(a, dtype=np.float64)
    if arr.ndim != 2:
        raise XlvizError(f"expected a 2-D array [n, d], got shape {arr.shape}", field=name)
    if not np.all(np.isfinite(arr)):
        raise XlvizError(
            "contains NaN or infinite values (e.g. words cut off by truncation); drop those rows first",
            field=name,
        )
    return arr


def _unit_rows(a: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(a, axis=1, keepdims=True)
    return a / np.maximum(norms, 1e-12)


def _nn_accuracy(q: np.ndarray, k: np.ndarray) -> float:
    """Share of query rows whose cosine nearest key row has the same index (ties -> lowest index)."""
    qn, kn = _unit_rows(q), _unit_rows(k)
    hits = 0
    for start in range(0, len(qn), _BLOCK):
        sims = qn[start : start + _BLOCK] @ kn.T
        hits += int(np.sum(np.argmax(sims, axis=1) == np.arange(start, start + len(sims))))
    return hits / len(qn)


def retrieval_accuracy(X, Y, center: bool = False) -> tuple[float, float]:
    """Translation retrieval by cosine nearest neighbour, both directions.

    ``X`` [n, d] and ``Y`` [n, d] are paired row by row. Returns ``(acc_x_to_y, acc_y_to_x)``:
    the fraction of rows of X whose nearest row of Y is its own translation, and vice versa.
    ``center=True`` subtracts each language's mean vector first, which removes a shared
    language-specific offset that otherwise dominates cosine similarity.
    """
    X, Y = _as_matrix(X, "X"), _as_matrix(Y, "Y")
    if X.shape != Y.shape:
        raise XlvizError(f"X has shape {X.shape} but Y has shape {Y.shape}; rows must be paired translations in one space")
    if len(X) == 0:
        raise XlvizError("no rows to retrieve", field="X")
    if center:
        X = X - X.mean(axis=0)
        Y = Y - Y.mean(axis=0)
    return _nn_accuracy(X, Y), _nn_accuracy(Y, X)


def linear_cka(X, Y) -> float:
    """Linear CKA (Kornblith et al. 2019) between two representations of the same n items.

    Features are centred, then CKA = ||Y^T X||_F^2 / (||X^T X||_F ||Y^T Y||_F). It is 1 for
    representations equal up to an orthogonal transform and isotropic scaling, and the
    feature sizes of X and Y may differ. Returns NaN when either side is constant.
    """
    X, Y = _as_matrix(X, "X"), _as_matrix(Y, "Y")
    if X.shape[0] != Y.shape[0]:
        raise XlvizError(f"X has {X.shape[0]} rows but Y has {Y.shape[0]}; CKA compares the same items")
    X = X - X.mean(axis=0)
    Y = Y - Y.mean(axis=0)
    n = X.shape[0]
    if n < max(X.shape[1], Y.shape[1]):
        # Gram form is cheaper when there are fewer items than features (same value).
        K, L = X @ X.T, Y @ Y.T
        num = float(np.sum(K * L))
        den = float(np.linalg.norm(K) * np.linalg.norm(L))
    else:
        num = float(np.linalg.norm(Y.T @ X) ** 2)
        den = float(np.linalg.norm(X.T @ X) * np.linalg.norm(Y.T @ Y))
    if den <= 0.0:
        return float("nan")
    return num / den


def procrustes(X, Y) -> np.ndarray:
    """Orthogonal W [d, d] minimising ||X W - Y||_F (SVD of X^T Y: W = U V^T).

    Why orthogonal: it maps one language's space onto the other's without distorting
    distances inside either, the standard post-hoc alignment (Wu et al. 2020).
    """
    X, Y = _as_matrix(X, "X"), _as_matrix(Y, "Y")
    if X.shape != Y.shape:
        raise XlvizError(f"X has shape {X.shape} but Y has shape {Y.shape}; Procrustes needs paired rows of equal width")
    if len(X) == 0:
        raise XlvizError("no rows to fit the map on", field="X")
    U, _, Vt = np.linalg.svd(X.T @ Y)
    return U @ Vt


def word_translation_accuracy(
    src_vecs,
    tgt_vecs,
    src_words: Sequence[str],
    tgt_words: Sequence[str],
    gold_pairs: Sequence[tuple[str, str]],
    center: bool = False,
) -> dict:
    """Bilingual lexicon induction: nearest target word type for each source word type.

    ``src_vecs[i]`` is a vector for ``src_words[i]`` (a word may occur several times, e.g.
    contextual vectors of each occurrence; occurrences are averaged into one vector per
    type, NaN rows - words cut off by truncation - are ignored). For each source word with at
    least one gold translation present among the target types, the prediction is the
    cosine-nearest target type; it is correct when it is any of the gold translations.

    Returns ``{"accuracy", "n_evaluated", "n_skipped_pairs", "per_word"}`` where ``per_word``
    is a list of ``{"src", "predicted", "gold", "correct", "similarity"}`` and
    ``n_skipped_pairs`` counts gold pairs whose source or target word has no vector.
    """
    src_types, src_mat = _type_vectors(src_vecs, src_words, "src")
    tgt_types, tgt_mat = _type_vectors(tgt_vecs, tgt_words, "tgt")
    if src_mat.shape[1] != tgt_mat.shape[1]:
        raise XlvizError(f"source vectors have width {src_mat.shape[1]} but target vectors {tgt_mat.shape[1]}")
    if center:
        src_mat = src_mat - src_mat.mean(axis=0)
        tgt_mat = tgt_mat - tgt_mat.mean(axis=0)
    src_index = {w: i for i, w in enumerate(src_types)}
    tgt_index = {w: i for i, w in enumerate(tgt_types)}
    gold: dict[str, list[str]] = defaultdict(list)
    skipped = 0
    for pair in gold_pairs:
        if len(pair) != 2:
            raise XlvizError(f"gold pair {pair!r} is not (source word, target word)", field="gold_pairs")
        s, t = pair
        if s in src_index and t in tgt_index:
            if t not in gold[s]:
                gold[s].append(t)
        else:
            skipped += 1
    if not gold:
        raise XlvizError("no gold pair has both words among the given vectors", field="gold_pairs")
    queries = list(gold)
    q = _unit_rows(src_mat[[src_index[s] for s in queries]])
    sims = q @ _unit_rows(tgt_mat).T
    best = np.argmax(sims, axis=1)
    per_word = []
    for row, s in enumerate(queries):
        pred = tgt_types[int(best[row])]
        per_word.append(
            {
                "src": s,
                "predicted": pred,
                "gold": gold[s],
                "correct": pred in gold[s],
                "similarity": float(sims[row, best[row]]),
            }
        )
    n_correct = sum(r["correct"] for r in per_word)
    return {
        "accuracy": n_correct / len(per_word),
        "n_evaluated": len(per_word),
        "n_skipped_pairs": skipped,
        "per_word": per_word,
    }


def _type_vectors(vecs, words: Sequence[str], name: str) -> tuple[list[str], np.ndarray]:
    """Average the (non-NaN) vectors of each word type, keeping first-seen order."""
    arr = np.asarray(vecs, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[0] != len(words):
        raise XlvizError(
            f"{name}_vecs has shape {arr.shape} but there are {len(words)} {name}_words; need one row per word",
            field=f"{name}_vecs",
        )
    sums: dict[str, np.ndarray] = {}
    counts: dict[str, int] = {}
    finite = np.isfinite(arr).all(axis=1)  # once for all rows: per row it was most of this function's time
    for w, v, ok in zip(words, arr, finite):
        if not ok:
            continue
        if w in sums:
            sums[w] = sums[w] + v
            counts[w] += 1
        else:
            sums[w] = v.copy()
            counts[w] = 1
    if not sums:
        raise XlvizError("no word has a finite vector", field=f"{name}_vecs")
    types = list(sums)
    return types, np.stack([sums[w] / counts[w] for w in types])


def _as_layers(a, name: str) -> np.ndarray:
    arr = np.asarray(a, dtype=np.float64)
    if arr.ndim != 3:
        raise XlvizError(f"expected [layers, n, d], got shape {arr.shape}", field=name)
    return arr


def layerwise_alignment(
    emb_a,
    emb_b,
    center: bool = False,
    train_fraction: float | None = None,
    seed: int = 0,
) -> list[dict]:
    """Retrieval and CKA per layer for paired sentence embeddings of two languages.

    ``emb_a`` / ``emb_b``: [layers, n, d] (as from ``sentence_embeddings``), row i of one the
    translation of row i of the other. Returns one dict per layer:
    ``{"layer", "retrieval_a_to_b", "retrieval_b_to_a", "cka"}``. Retrieval needs equal
    widths; with different widths (two different models) the retrieval values are None.

    With ``train_fraction`` (0 < f < 1) the rows are shuffled with ``seed``, an orthogonal
    Procrustes map a -> b is fitted on the first ``f`` of them and retrieval on the held-out
    rest is reported before and after mapping: ``"retrieval_before"``, ``"retrieval_after"``
    (a -> b), ``"retrieval_before_b_to_a"``, ``"retrieval_after_b_to_a"``, plus ``"n_train"``,
    ``"n_test"``. This shows how much alignment a linear map recovers (Wu et al. 2020).
    """
    A, B = _as_layers(emb_a, "emb_a"), _as_layers(emb_b, "emb_b")
    if A.shape[:2] != B.shape[:2]:
        raise XlvizError(
            f"emb_a has {A.shape[0]} layers x {A.shape[1]} rows but emb_b has {B.shape[0]} x {B.shape[1]}; "
            "need the same layers and paired rows"
        )
    same_width = A.shape[2] == B.shape[2]
    n = A.shape[1]
    split = None
    if train_fraction is not None:
        if not same_width:
            raise XlvizError("Procrustes needs both sides to have the same width", field="train_fraction")
        if not 0.0 < float(train_fraction) < 1.0:
            raise XlvizError(f"must be between 0 and 1 (exclusive), got {train_fraction}", field="train_fraction")
        n_train = int(round(n * float(train_fraction)))
        if n_train < 1 or n_train >= n:
            raise XlvizError(
                f"{n} rows leave no train or no test rows with train_fraction={train_fraction}",
                field="train_fraction",
            )
        order = np.random.default_rng(seed).permutation(n)
        split = (order[:n_train], order[n_train:])
    rows = []
    for layer in range(A.shape[0]):
        X, Y = A[layer], B[layer]
        row: dict = {"layer": layer}
        if same_width:
            row["retrieval_a_to_b"], row["retrieval_b_to_a"] = retrieval_accuracy(X, Y, center=center)
        else:
            row["retrieval_a_to_b"] = row["retrieval_b_to_a"] = None
        row["cka"] = linear_cka(X, Y)
        if split is not None:
            tr, te = split
            Xtr, Ytr = X[tr], Y[tr]
            if center:
                Xtr = Xtr - Xtr.mean(axis=0)
                Ytr = Ytr - Ytr.mean(axis=0)
            W = procrustes(Xtr, Ytr)
            before = retrieval_accuracy(X[te], Y[te], center=center)
            after = retrieval_accuracy(X[te] @ W, Y[te], center=center)
            row.update(
                {
                    "retrieval_before": before[0],
                    "retrieval_after": after[0],
                    "retrieval_before_b_to_a": before[1],
                    "retrieval_after_b_to_a": after[1],
                    "n_train": len(tr),
                    "n_test": len(te),
                }
            )
        rows.append(row)
    return rows


def cka_matrix(emb_a, emb_b) -> np.ndarray:
    """Linear CKA between every layer of ``emb_a`` [La, n, da] and every layer of ``emb_b``.

    Why: comparing two (possibly different-depth) models layer by layer shows where their
    representations become similar (Wu et al. 2020). Returns [La, Lb].
    """
    A, B = _as_layers(emb_a, "emb_a"), _as_layers(emb_b, "emb_b")
    if A.shape[1] != B.shape[1]:
        raise XlvizError(f"emb_a has {A.shape[1]} rows but emb_b has {B.shape[1]}; CKA compares the same items")
    return np.array([[linear_cka(a, b) for b in B] for a in A])
