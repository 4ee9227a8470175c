"""Inference with training seeds as the unit: what a claim about a *method* may rest on.

Why: two runs of one method that differ only in their seed differ by several F1 points on the
bench, more than the test questions' own noise. A p-value or interval that resamples only test
paragraphs (with the trained models held fixed) measures the test set, not the method: with a
seed-level spread of 4 F1 points and no true difference it says "p < 0.05" in most draws
(``bench/calibration_table.py``). So every verdict about a method is decided here, from one
number per seed:

- :func:`compare_seeds`: per-seed differences A − B (each seed's two systems on the same test
  questions) -> their mean, the Student-t interval, the paired t test's two-sided p, and the
  exact sign-flip p over seeds (full enumeration of the 2^n sign patterns; distribution-free,
  but its smallest two-sided p is 2 / 2^n: 0.25 at 3 seeds, 0.0625 at 5, 0.031 at 6);
- :func:`decide`: THE rule for a verdict (one function: the report, the sweep table and the
  pages show what it returns): a verdict needs at least :data:`MIN_SEEDS_VERDICT` seeds and a
  (Holm-adjusted, when the comparison is one of a family) paired-t p below ``alpha``; with 2
  seeds the t interval (one degree of freedom) is shown but no verdict; with 1 seed only
  test-set noise is known: no verdict about the method;
- :func:`holm`: Holm's step-down adjustment of a family's p-values (every language and metric of
  one comparison table);
- :func:`seeds_for_power`: how many seeds a paired t test needs to detect a difference of a
  given size with a given between-seed sd (power from the noncentral t);
- :func:`seeds_paragraphs_interval`: the mean over seeds with an interval that also carries the
  test set's own sampling noise when the seeds share one test set (Welch-Satterthwaite).

Everything here is closed-form or an exact enumeration: no random numbers, the same input
gives the same bytes.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass
from typing import Any, Sequence

import numpy as np

from xlviz.errors import XlvizError
from xlviz.evaluation.uncertainty import finite_values as _finite

ALPHA = 0.05
CONFIDENCE = 0.95
MIN_SEEDS_VERDICT = 3  # a verdict needs this many seeds (see decide)
MAX_ENUMERATED_SEEDS = 20  # 2^20 sign patterns: beyond that the sign-flip p is not computed
POWER = 0.8

T_OVER_SEEDS = "paired t over seeds"
SIGN_FLIP_EXACT = "exact sign-flip over seeds (all 2^n patterns)"
SEEDS_PARAGRAPHS = "t over seeds + test-set variance (Welch-Satterthwaite)"

# verdict codes (decide) and how they read
A_BETTER, B_BETTER, NO_DIFFERENCE, TOO_FEW, ONE_SEED = "a_better", "b_better", "none", "too_few", "one_seed"
ONE_SEED_NOTE = "1 seed: test-set noise only, no verdict about the method"


@dataclass(frozen=True)
class SeedComparison:
    """A − B over seeds: the mean of the per-seed differences, its t interval, the paired t
    p-value, the exact sign-flip p (None beyond MAX_ENUMERATED_SEEDS seeds) and its floor
    (the smallest p the sign-flip can reach with these seeds), the sd of the per-seed
    differences, and the verdict code of :func:`decide` on the raw p."""

    difference: float
    low: float
    high: float
    p_value: float
    p_method: str
    p_sign_flip: float | None
    sign_flip_floor: float
    sd: float
    n_seeds: int
    verdict: str
    confidence: float = CONFIDENCE

    def as_dict(self) -> dict:
        return asdict(self)


def t_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float, float, float]:
    """(mean, low, high, two-sided p of "mean = 0") of a one-sample Student t over ``values``
    (two or more). Zero spread (every seed the same value, as discrete scores on a small test set
    can give): the t statistic is undefined, so the interval is the point and p falls back to the
    exact sign-flip p of identical values, 2 / 2^n (0.25 at 3 seeds): a constant difference is
    not evidence beyond what the seeds' signs show."""
    from scipy.stats import t

    x = _finite(values, "values")
    n = x.size
    if n < 2:
        raise XlvizError("a t interval needs at least 2 values", field="values")
    m, sd = float(x.mean()), float(x.std(ddof=1))
    se = sd / math.sqrt(n)
    half = float(t.ppf(1 - (1 - confidence) / 2, n - 1)) * se
    if se == 0.0:
        return m, m, m, (1.0 if m == 0.0 else sign_flip_floor(n))
    p = float(2 * t.sf(abs(m) / se, n - 1))
    return m, m - half, m + half, min(1.0, p)


def sign_flip_floor(n_seeds: int) -> float:
    """The smallest two-sided p an exact sign-flip test over ``n_seeds`` values can give: the
    observed pattern and its mirror of the 2^n, 2 / 2^n (0.25 at 3 seeds)."""
    return min(1.0, 2.0 / 2 ** n_seeds)


def sign_flip_exact(diffs: Sequence[float]) -> float:
    """Two-sided p of the sign-flip test over seeds by full enumeration: under "A and B are
    exchangeable", each seed's difference keeps or flips its sign; p = the share of the 2^n
    patterns whose |sum| is at least the observed one. Exact, never Monte Carlo."""
    d = _finite(diffs, "diffs")
    if d.size > MAX_ENUMERATED_SEEDS:
        raise XlvizError(f"{d.size} seeds: too many to enumerate (at most {MAX_ENUMERATED_SEEDS})", field="diffs")
    observed = abs(float(d.sum()))
    if observed == 0.0:
        return 1.0
    signs = np.array(list(itertools.product((1.0, -1.0), repeat=d.size)))
    stats = np.abs(signs @ d)
    return float((stats >= observed * (1 - 1e-12)).mean())


def decide(n_seeds: int, p_value: float | None, difference: float, alpha: float = ALPHA) -> str:
    """THE verdict rule (a verdict code): 1 seed -> ONE_SEED (test-set noise only); fewer than
    MIN_SEEDS_VERDICT seeds -> TOO_FEW (with 2 seeds the t has one degree of freedom and
    nothing checks the spread's shape); else A_BETTER / B_BETTER when the paired t p (the
    Holm-adjusted one, in a family) is below ``alpha``, NO_DIFFERENCE otherwise. p < alpha
    is the same event as the t interval excluding 0, so the interval and the verdict agree
    when the p is raw."""
    if n_seeds <= 1:
        return ONE_SEED
    if n_seeds < MIN_SEEDS_VERDICT:
        return TOO_FEW
    if p_value is not None and p_value < alpha and difference != 0.0:
        return A_BETTER if difference > 0 else B_BETTER
    return NO_DIFFERENCE


def verdict_text(code: str, a: str, b: str, n_seeds: int) -> str:
    """How a verdict code reads in a table."""
    return {A_BETTER: f"{a} better", B_BETTER: f"{b} better", NO_DIFFERENCE: "no difference shown",
            TOO_FEW: f"too few seeds for a verdict ({n_seeds}; needs {MIN_SEEDS_VERDICT})",
            ONE_SEED: ONE_SEED_NOTE}[code]


def compare_seeds(diffs: Sequence[float], *, confidence: float = CONFIDENCE, alpha: float = ALPHA) -> SeedComparison:
    """A − B from one difference per seed (each seed's two systems scored on the same
    questions). Two or more seeds: t interval and paired t p, exact sign-flip p; one seed: the
    value alone (its test-set interval is :func:`xlviz.evaluation.uncertainty.paired_test`'s)."""
    d = _finite(diffs, "diffs")
    n = int(d.size)
    floor = sign_flip_floor(n)
    flip = sign_flip_exact(d) if n <= MAX_ENUMERATED_SEEDS else None
    if n == 1:
        m = float(d[0])
        return SeedComparison(m, m, m, 1.0, T_OVER_SEEDS, flip, floor, 0.0, 1, ONE_SEED, confidence)
    m, lo, hi, p = t_interval(d, confidence)
    return SeedComparison(m, lo, hi, p, T_OVER_SEEDS, flip, floor, float(d.std(ddof=1)), n, decide(n, p, m, alpha), confidence)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (same order as given): the k-th smallest p times
    (m − k + 1), made monotone, capped at 1. Controls the family-wise error at alpha."""
    p = np.asarray(list(p_values), dtype=np.float64)
    m = p.size
    if m == 0:
        return []
    order = np.argsort(p, kind="stable")
    adjusted = np.minimum(1.0, np.maximum.accumulate(p[order] * (m - np.arange(m))))
    out = np.empty(m)
    out[order] = adjusted
    return [float(v) for v in out]


def t_power(n: int, effect: float, sd: float, alpha: float = ALPHA) -> float:
    """Power of the two-sided paired t test over ``n`` seeds at a true mean difference
    ``effect`` and between-seed sd ``sd`` of the differences (noncentral t)."""
    from scipy.stats import nct, t

    if n < 2:
        return 0.0
    df = n - 1
    crit = float(t.ppf(1 - alpha / 2, df))
    nc = abs(effect) / sd * math.sqrt(n)
    return float(nct.sf(crit, df, nc) + nct.cdf(-crit, df, nc))


def seeds_for_power(effect: float, sd: float, *, alpha: float = ALPHA, power: float = POWER, max_seeds: int = 1000) -> int | None:
    """The fewest seeds (at least MIN_SEEDS_VERDICT) at which a paired t test detects a true
    difference ``effect`` with between-seed sd ``sd`` with probability ``power``; None when no
    difference (effect 0) or more than ``max_seeds`` would be needed. sd 0: MIN_SEEDS_VERDICT."""
    if not math.isfinite(effect) or not math.isfinite(sd) or effect == 0.0:
        return None
    if sd <= 0.0:
        return MIN_SEEDS_VERDICT
    lo, hi = MIN_SEEDS_VERDICT, MIN_SEEDS_VERDICT
    while t_power(hi, effect, sd, alpha) < power:  # power rises with n: double, then bisect
        if hi >= max_seeds:
            return None
        lo, hi = hi, min(max_seeds, hi * 2)
    while lo < hi:
        mid = (lo + hi) // 2
        if t_power(mid, effect, sd, alpha) >= power:
            hi = mid
        else:
            lo = mid + 1
    return hi


def power_line(effect: float, sd: float, n_seeds: int, *, alpha: float = ALPHA, power: float = POWER) -> str:
    """One line: how many seeds would detect a difference of the observed size."""
    if n_seeds < 2:
        return "power: unknown (1 seed: no between-seed spread to plan from)"
    n = seeds_for_power(effect, sd, alpha=alpha, power=power)
    if n is None:
        return "power: no difference observed to plan for" if effect == 0.0 else "power: more than 1000 seeds"
    return (f"{n} seeds would detect a difference of {abs(effect):.2f} ({power:.0%} power, alpha {alpha}, paired t, "
            f"between-seed sd {sd:.2f})")


def seeds_paragraphs_interval(runs: Sequence[tuple[Sequence[float], Sequence[Any]]], *,
                              confidence: float = CONFIDENCE):
    """The mean over seeds of each seed's question mean, with an interval for the score on the
    test *distribution*: the variance of the seed means (s² / n) plus, when every seed was
    scored on the same questions (a sweep over ``seed`` shares its world), the test set's
    own sampling variance, which the seeds share and so cannot show: the paragraph-cluster
    variance of the questions' seed-averaged scores. Seeds with their own test sets already
    carry it in s². Degrees of freedom: Welch-Satterthwaite. One seed: the paragraph
    bootstrap's question is another (see ``cluster_bootstrap``), so this needs two or more."""
    from scipy.stats import t

    from xlviz.evaluation.uncertainty import Interval, cluster_codes

    if len(runs) < 2:
        raise XlvizError("an interval over seeds needs at least 2 seeds", field="runs")
    xs = [_finite(v, f"runs[{i}]") for i, (v, _) in enumerate(runs)]
    means = np.array([x.mean() for x in xs])
    n = means.size
    v_seed = float(means.var(ddof=1)) / n
    clusters = [list(c) for _, c in runs]
    shared = all(x.size == xs[0].size for x in xs) and all(c == clusters[0] for c in clusters)
    codes, k = cluster_codes(clusters[0], xs[0].size)
    v_test, df_test = 0.0, math.inf
    if shared and k > 1:
        y = np.mean(xs, axis=0)  # each question's mean over seeds
        sums = np.bincount(codes, weights=y, minlength=k)
        counts = np.bincount(codes, minlength=k).astype(np.float64)
        resid = sums - y.mean() * counts  # ratio-estimator residual per paragraph
        v_test = float(k / (k - 1) * (resid ** 2).sum() / counts.sum() ** 2)
        df_test = k - 1
    total = v_seed + v_test
    m = float(means.mean())
    if total == 0.0:
        return Interval(m, m, m, SEEDS_PARAGRAPHS, int(xs[0].size), k, 0, n, confidence)
    df = total ** 2 / (v_seed ** 2 / (n - 1) + (v_test ** 2 / df_test if v_test else 0.0))
    half = float(t.ppf(1 - (1 - confidence) / 2, df)) * math.sqrt(total)
    return Interval(m, m - half, m + half, SEEDS_PARAGRAPHS, int(xs[0].size), k, 0, n, confidence)


__all__ = ["ALPHA", "MIN_SEEDS_VERDICT", "SeedComparison", "t_interval", "sign_flip_floor", "sign_flip_exact", "decide",
           "verdict_text", "compare_seeds", "holm", "t_power", "seeds_for_power", "power_line", "seeds_paragraphs_interval",
           "A_BETTER", "B_BETTER", "NO_DIFFERENCE", "TOO_FEW", "ONE_SEED", "ONE_SEED_NOTE", "T_OVER_SEEDS", "SIGN_FLIP_EXACT",
           "SEEDS_PARAGRAPHS"]
