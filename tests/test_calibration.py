"""The calibration suite: every interval and test the bench shows, simulated on data shaped
like the bench's (100 paragraphs of 3-4 questions shared by the seeds, a paragraph effect, a
seed effect of sd 4 F1 points; 1, 3, 5 and 10 seeds; planted differences of 0 and 6 F1
points; ``xlviz.evaluation.calibration``): each nominal 95% interval covers its target in at
least 93% of draws, each test at alpha 0.05 rejects a true null in at most 6%, and the
former procedures (kept, not shown to users) fail.

Monte Carlo error: with 3,000 draws the standard error of a 95% coverage is 0.40 points (93%
is 5 SE below) and of a 5% rejection rate 0.40 points (6% is 2.5 SE above); the draws are
seeded, so the numbers are the same on every run. The table over all procedures and seed
counts, with power, is ``bench/calibration_table.py`` (docs/methods.md, "Uncertainty").
"""

from __future__ import annotations

import pytest

from xlviz.evaluation.calibration import EFFECT, calibrate_one_seed, calibrate_seeds, holm_family_error

NULL_DRAWS = 3000
ALT_DRAWS = 600
COVERAGE_MIN = 0.93
FALSE_POSITIVE_MAX = 0.06


@pytest.mark.parametrize("n_seeds", [3, 5, 10])
def test_intervals_and_tests_over_seeds_are_calibrated(n_seeds):
    null = calibrate_seeds(n_seeds, 0.0, NULL_DRAWS, seed=100 + n_seeds)
    for name in ("t over seeds", "seeds+paragraphs", "paired t over seeds"):
        assert null[name].coverage >= COVERAGE_MIN, (name, n_seeds, null[name].coverage)
    for name in ("paired t over seeds", "sign-flip exact over seeds"):
        assert null[name].rejection <= FALSE_POSITIVE_MAX, (name, n_seeds, null[name].rejection)
    alt = calibrate_seeds(n_seeds, EFFECT, ALT_DRAWS, seed=200 + n_seeds)
    assert alt["paired t over seeds"].coverage >= COVERAGE_MIN - 0.02  # 600 draws: SE 0.9 points
    power = {k: round(v.rejection, 3) for k, v in alt.items() if k in ("paired t over seeds", "sign-flip exact over seeds")}
    print(f"power at +{EFFECT} F1, {n_seeds} seeds: {power}")
    # the planted difference is found more often than a true null is rejected
    assert alt["paired t over seeds"].rejection > 2 * null["paired t over seeds"].rejection
    if n_seeds < 6:  # an exact two-sided sign-flip over fewer than 6 seeds cannot reach p < 0.05
        assert alt["sign-flip exact over seeds"].rejection == 0.0


def test_one_seed_intervals_and_paired_test_are_calibrated_for_test_set_noise():
    """One seed: the paragraph bootstrap and the paired paragraph test (results rows, the
    XQuAD page) target the trained models' scores on the test distribution."""
    null = calibrate_one_seed(0.0, 2000, seed=7)
    assert null["paragraph bootstrap (1 seed)"].coverage >= COVERAGE_MIN
    assert null["paired paragraph test (1 seed)"].coverage >= COVERAGE_MIN
    assert null["paired paragraph test (1 seed)"].rejection <= FALSE_POSITIVE_MAX


def test_holm_keeps_the_family_wise_error():
    """Four null comparisons over 3 seeds (a table of languages and metrics): with Holm the
    chance of any false "better" stays at most 6%; unadjusted it would be about 1 − 0.95^4."""
    assert holm_family_error(4, 3, 2000, seed=3) <= FALSE_POSITIVE_MAX


def test_the_former_procedures_fail_calibration():
    """Kept, not shown to users: the percentile bootstrap of three seeds' values and the
    two-level percentile bootstrap under-cover; the (seed, paragraph)-block permutation
    rejects a true null about the method far more than 5% of the time."""
    old = calibrate_seeds(3, 0.0, 400, seed=11, old=True)  # 400 draws: SE ~1.1-2.4 points, far from the thresholds
    assert old["OLD percentile bootstrap of seed values"].coverage < 0.85
    assert old["OLD two-level bootstrap"].coverage < COVERAGE_MIN - 0.01
    assert old["OLD seed x paragraph block permutation"].rejection > 0.2
    assert old["OLD seed x paragraph block permutation"].coverage < 0.9
