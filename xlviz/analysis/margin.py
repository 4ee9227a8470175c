"""Margin-based sentence retrieval (Artetxe & Schwenk 2019, ratio margin).

Why: plain cosine nearest neighbours suffer from hubness (a few sentences are everyone's
nearest neighbour), which understates how well two languages line up. The ratio margin
divides each cosine by the mean similarity of both sentences to their k nearest neighbours,
so hubs are penalised; it is the scoring LASER and XTREME's Tatoeba task use.
"""

from __future__ import annotations

import numpy as np

from xlviz.analysis.alignment import _as_matrix, _unit_rows
from xlviz.errors import XlvizError


def _knn_mean(sims: np.ndarray, k: int) -> np.ndarray:
    k = min(k, sims.shape[1])
    return np.partition(sims, -k, axis=1)[:, -k:].mean(axis=1)


def margin_retrieval(X, Y, k: int = 4, center: bool = True) -> tuple[float, float]:
    """``(acc X->Y, acc Y->X)`` of ratio-margin retrieval between paired rows of ``X`` and ``Y``:
    score(x, y) = cos(x, y) / (mean cos of x to its k NN in Y / 2 + mean cos of y to its k NN
    in X / 2). ``center`` subtracts each side's mean vector first."""
    X, Y = _as_matrix(X, "X"), _as_matrix(Y, "Y")
    if X.shape != Y.shape or len(X) == 0:
        raise XlvizError(f"X {X.shape} and Y {Y.shape} must be non-empty and paired row by row")
    if k < 1:
        raise XlvizError(f"k must be at least 1, got {k}", field="k")
    if center:
        X, Y = X - X.mean(axis=0), Y - Y.mean(axis=0)
    sims = _unit_rows(X) @ _unit_rows(Y).T
    rx, ry = _knn_mean(sims, k), _knn_mean(sims.T, k)
    score = sims / (rx[:, None] / 2 + ry[None, :] / 2)
    gold = np.arange(len(X))
    return float(np.mean(score.argmax(axis=1) == gold)), float(np.mean(score.argmax(axis=0) == gold))


__all__ = ["margin_retrieval"]
