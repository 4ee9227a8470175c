"""Uncertainty for scores on a few hundred questions: is 54 vs 50 at n = 100 a difference?

- :func:`bootstrap_ci`: percentile bootstrap interval of a mean (EM/F1 over questions);
- :func:`paired_bootstrap`: two systems on the same questions, resampling questions jointly
  (Koehn 2004; Berg-Kirkpatrick et al. 2012), giving the mean difference, its interval and a
  two-sided p-value;
- :func:`wilson_interval`: interval of an accuracy k / n (probes), exact enough at small n
  where the normal approximation is not;
- :func:`mcnemar_exact`: exact paired test on right/wrong outcomes (exact match, probes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from xlviz.errors import XlvizError


def _array(values: Sequence[float], what: str) -> np.ndarray:
    a = np.asarray(values, dtype=float)
    if a.ndim != 1 or a.size == 0:
        raise XlvizError(f"{what}: need a non-empty list of numbers", field=what)
    return a


def bootstrap_ci(values: Sequence[float], *, n_resamples: int = 2000, confidence: float = 0.95,
                 seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``values``."""
    a = _array(values, "values")
    rng = np.random.default_rng(seed)
    means = a[rng.integers(0, a.size, size=(n_resamples, a.size))].mean(axis=1)
    lo, hi = np.quantile(means, [(1 - confidence) / 2, 1 - (1 - confidence) / 2])
    return float(lo), float(hi)


@dataclass(frozen=True)
class PairedResult:
    difference: float  # mean(a) - mean(b)
    low: float
    high: float
    p_value: float  # two-sided: how often resampling flips or zeroes the sign
    n: int


def paired_bootstrap(a: Sequence[float], b: Sequence[float], *, n_resamples: int = 2000, confidence: float = 0.95,
                     seed: int = 0) -> PairedResult:
    """Paired bootstrap of ``mean(a) - mean(b)`` over the same items (questions)."""
    x, y = _array(a, "a"), _array(b, "b")
    if x.size != y.size:
        raise XlvizError(f"paired scores need the same items: {x.size} vs {y.size}", field="b")
    d = x - y
    rng = np.random.default_rng(seed)
    diffs = d[rng.integers(0, d.size, size=(n_resamples, d.size))].mean(axis=1)
    lo, hi = np.quantile(diffs, [(1 - confidence) / 2, 1 - (1 - confidence) / 2])
    observed = float(d.mean())
    if observed == 0 and not d.any():
        p = 1.0
    else:
        p = min(1.0, 2.0 * min(float((diffs <= 0).mean()), float((diffs >= 0).mean())))
    return PairedResult(observed, float(lo), float(hi), p, int(d.size))


def wilson_interval(k: int, n: int, *, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson score interval of the proportion ``k / n`` (0..1)."""
    if n <= 0 or not 0 <= k <= n:
        raise XlvizError(f"need 0 <= k <= n and n > 0 (k={k}, n={n})", field="n")
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts: items only system A got
    right, items only B got right (a binomial test of ``only_a`` out of both at 1/2)."""
    if only_a < 0 or only_b < 0:
        raise XlvizError("discordant counts must be non-negative", field="only_a")
    n = only_a + only_b
    if n == 0:
        return 1.0
    k = min(only_a, only_b)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2 * tail)
