"""xlviz.evaluation.bootstrap against values computed by hand."""

from __future__ import annotations

import pytest

from xlviz.errors import XlvizError
from xlviz.evaluation.bootstrap import bootstrap_ci, mcnemar_exact, paired_bootstrap, wilson_interval


def test_wilson_interval_54_of_100_covers_50():
    # p = .54, z^2 = 3.8415: centre (.54 + .019208) / 1.038415 = .53852, half 1.96 * sqrt(.002484 + .000096) / 1.038415
    lo, hi = wilson_interval(54, 100)
    assert lo == pytest.approx(0.44265, abs=1e-4) and hi == pytest.approx(0.63438, abs=1e-4)
    assert lo < 0.50 < hi  # 54 vs 50 at n = 100 is noise
    assert wilson_interval(0, 10)[0] == 0.0 and wilson_interval(10, 10)[1] == pytest.approx(1.0)


def test_mcnemar_exact_by_hand():
    assert mcnemar_exact(1, 5) == pytest.approx(2 * (1 + 6) / 64)  # 2 * P(X <= 1), X ~ Bin(6, 1/2)
    assert mcnemar_exact(0, 0) == 1.0 and mcnemar_exact(3, 3) == 1.0
    assert mcnemar_exact(0, 10) == pytest.approx(2 / 1024)


def test_bootstrap_ci_two_values_spans_both():
    # means of resamples of [0, 100]: 0 (1/4), 50 (1/2), 100 (1/4): the 95% interval is [0, 100]
    assert bootstrap_ci([0.0, 100.0], n_resamples=4000) == (0.0, 100.0)
    assert bootstrap_ci([42.0] * 7) == (42.0, 42.0)
    lo, hi = bootstrap_ci([0.0] * 50 + [100.0] * 50)
    assert 35 < lo < 50 < hi < 65


def test_paired_bootstrap():
    same = paired_bootstrap([1, 0, 1, 1], [1, 0, 1, 1])
    assert same.difference == 0 and same.p_value == 1.0 and (same.low, same.high) == (0.0, 0.0)
    better = paired_bootstrap([100.0] * 30 + [0.0] * 10, [0.0] * 30 + [0.0] * 10)
    assert better.difference == pytest.approx(75.0) and better.p_value < 0.01 and better.low > 50
    with pytest.raises(XlvizError, match="same items"):
        paired_bootstrap([1, 2], [1])
    with pytest.raises(XlvizError):
        bootstrap_ci([])
