"""Bootstrap confidence intervals for per-question scores (EM, F1).

Why: XQuAD slices scored on a CPU have a few hundred questions, so a one-point difference
between two systems or languages can be noise; a percentile bootstrap over questions says how
wide the uncertainty is without assuming a distribution.

Not for a handful of seed values: a percentile bootstrap of two or three numbers can never be
wider than their range and covers the mean over seeds ~75% of the time (the calibration suite,
``tests/test_calibration.py``); intervals over seeds are Student-t
(``xlviz.evaluation.seeds``).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from xlviz.errors import XlvizError


def bootstrap_interval(values: Sequence[float], *, n_boot: int = 2000, level: float = 0.95, seed: int = 0) -> dict:
    """``{"mean", "low", "high", "n"}``: the mean of ``values`` and its percentile bootstrap
    interval at ``level`` (resampling the values with replacement ``n_boot`` times)."""
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or len(x) == 0:
        raise XlvizError("need a non-empty list of per-item scores", field="values")
    if not 0.0 < level < 1.0:
        raise XlvizError(f"must be between 0 and 1, got {level}", field="level")
    if n_boot < 1:
        raise XlvizError(f"must be at least 1, got {n_boot}", field="n_boot")
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, len(x), size=(n_boot, len(x)))].mean(axis=1)
    tail = 100 * (1 - level) / 2
    low, high = np.percentile(means, [tail, 100 - tail])
    return {"mean": float(x.mean()), "low": float(low), "high": float(high), "n": int(len(x))}


__all__ = ["bootstrap_interval"]
