"""Calibration by simulation: does each interval the bench prints cover the truth 95% of the
time, and does each test reject a true null at most 5% of the time, on data shaped like the
bench's own?

Why: a procedure's nominal level is a claim about its behaviour over repeated experiments;
on clustered questions and few seeds the usual shortcuts break (a percentile bootstrap of
three seeds' values covers ~75%). The structure simulated: a test set of ``n_paragraphs``
paragraphs of 3-4 questions shared by every seed (a sweep over ``seed`` shares its world); a
paragraph difficulty shared by both systems; per seed, a seed effect per system (sd
``seed_sd``: 4 F1 points), a model-specific paragraph effect and question noise; system A's
expected score is ``effect`` above B's. Scores are unbounded normals in F1 points: the
procedures use only means and differences.

Targets: an interval over seeds on the shared test set targets the expected score over
seeds *on that test set* (what another seed would give on it); the seeds + paragraphs
interval targets the score on the test *distribution*; a one-seed interval targets that
trained model's score on the test distribution. :func:`calibrate` returns, per procedure,
the share of draws whose interval covered its target and whose test rejected at alpha.
Used by ``tests/test_calibration.py`` (thresholds) and ``bench/calibration_table.py`` (the
table in docs/methods.md). Deterministic for a given seed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MU = 50.0
SEED_SD = 4.0  # between-seed sd of a system's mean F1 (issue-sized; the bench sees 2-27)
PARAGRAPH_SD = 15.0  # paragraph difficulty, shared by the systems and seeds
MODEL_PARAGRAPH_SD = 8.0  # a trained model's own paragraph-specific luck
QUESTION_SD = 25.0
EFFECT = 6.0  # a realistic planted difference in F1 points


@dataclass(frozen=True)
class Draw:
    """One simulated experiment: scores ``a``, ``b`` [seeds, questions] on one shared test set,
    each question's paragraph, and the targets."""

    a: np.ndarray
    b: np.ndarray
    paragraphs: list[str]
    a_on_test: float  # A's expected score over seeds on this test set
    b_on_test: float
    a_population: float  # A's expected score over seeds and test sets
    a_seed_truth: np.ndarray  # each seed's model of A: its expected score on the test distribution
    b_seed_truth: np.ndarray


def simulate(rng: np.random.Generator, n_seeds: int, effect: float = 0.0, *, n_paragraphs: int = 100,
             seed_sd: float = SEED_SD, null_per_seed: bool = False) -> Draw:
    """One experiment. ``null_per_seed``: A's and B's seed effects are equal (the two trained
    models have the same expected score), the null a one-seed paired test is about."""
    sizes = rng.integers(3, 5, size=n_paragraphs)
    para = np.repeat(np.arange(n_paragraphs), sizes)
    q = para.size
    difficulty = rng.normal(0, PARAGRAPH_SD, n_paragraphs)[para]
    seed_a = rng.normal(0, seed_sd, n_seeds)
    seed_b = seed_a.copy() if null_per_seed else rng.normal(0, seed_sd, n_seeds)

    def scores(mean: float, seed_effect: np.ndarray) -> np.ndarray:
        own = rng.normal(0, MODEL_PARAGRAPH_SD, (n_seeds, n_paragraphs))[:, para]
        return mean + seed_effect[:, None] + difficulty[None, :] + own + rng.normal(0, QUESTION_SD, (n_seeds, q))

    a, b = scores(MU + effect, seed_a), scores(MU, seed_b)
    on_test = float(difficulty.mean())  # question-weighted paragraph difficulty of this test set
    return Draw(a, b, [f"p{i}" for i in para], MU + effect + on_test, MU + on_test, MU + effect,
                MU + effect + seed_a, MU + seed_b)


@dataclass
class Tally:
    """Coverage and rejection counts of one procedure."""

    covered: int = 0
    rejected: int = 0
    draws: int = 0

    def add(self, covered: bool | None, rejected: bool | None) -> None:
        self.draws += 1
        self.covered += bool(covered)
        self.rejected += bool(rejected)

    @property
    def coverage(self) -> float:
        return self.covered / self.draws if self.draws else float("nan")

    @property
    def rejection(self) -> float:
        return self.rejected / self.draws if self.draws else float("nan")


def _covers(low: float, high: float, truth: float) -> bool:
    return low <= truth <= high


def calibrate_seeds(n_seeds: int, effect: float, draws: int, seed: int = 0, *, old: bool = False,
                    old_resamples: int = 200) -> dict[str, Tally]:
    """Procedures over several seeds (what `xlviz report`, the sweep table and the pages show):
    ``t over seeds`` (mean), ``seeds+paragraphs`` (mean), ``compare_seeds t`` and
    ``sign-flip exact`` (paired). ``old``: also the former procedures, not shown to users:
    percentile bootstrap of the seeds' values, the two-level percentile bootstrap, and the
    (seed, paragraph)-block permutation p with its two-level interval."""
    from xlviz.evaluation.intervals import bootstrap_interval
    from xlviz.evaluation.seeds import compare_seeds, seeds_paragraphs_interval
    from xlviz.evaluation.uncertainty import paired_test_seed_blocks, seed_interval, two_level_bootstrap

    rng = np.random.default_rng(seed)
    out = {k: Tally() for k in ("t over seeds", "seeds+paragraphs", "paired t over seeds", "sign-flip exact over seeds")}
    if old:
        out.update({k: Tally() for k in ("OLD percentile bootstrap of seed values", "OLD two-level bootstrap",
                                          "OLD seed x paragraph block permutation")})
    for i in range(draws):
        d = simulate(rng, n_seeds, effect)
        means_a = d.a.mean(axis=1)
        t = seed_interval(means_a)
        out["t over seeds"].add(_covers(t.low, t.high, d.a_on_test), None)
        sp = seeds_paragraphs_interval([(row, d.paragraphs) for row in d.a])
        out["seeds+paragraphs"].add(_covers(sp.low, sp.high, d.a_population), None)
        c = compare_seeds(means_a - d.b.mean(axis=1))
        truth = d.a_on_test - d.b_on_test
        out["paired t over seeds"].add(_covers(c.low, c.high, truth), c.p_value < 0.05)
        out["sign-flip exact over seeds"].add(None, c.p_sign_flip is not None and c.p_sign_flip < 0.05)
        if old:
            bi = bootstrap_interval(list(means_a), n_boot=old_resamples, seed=i)
            out["OLD percentile bootstrap of seed values"].add(_covers(bi["low"], bi["high"], d.a_on_test), None)
            tl = two_level_bootstrap([(row, d.paragraphs) for row in d.a], n_resamples=old_resamples, seed=i)
            out["OLD two-level bootstrap"].add(_covers(tl.low, tl.high, d.a_on_test), None)
            pb = paired_test_seed_blocks([(x, y, d.paragraphs) for x, y in zip(d.a, d.b)], n_resamples=old_resamples,
                                         n_permutations=1000, seed=i)
            out["OLD seed x paragraph block permutation"].add(_covers(pb.low, pb.high, truth), pb.p_value < 0.05)
    return out


def calibrate_one_seed(effect: float, draws: int, seed: int = 0, *, n_resamples: int = 500,
                       n_permutations: int = 1000) -> dict[str, Tally]:
    """One seed (a results row, the XQuAD page): ``paragraph bootstrap`` (covers the trained
    model's score on the test distribution) and ``paired test (1 seed)`` (interval and p;
    null: the two trained models have the same expected score). ``effect``: planted between
    the two models."""
    from xlviz.evaluation.uncertainty import cluster_bootstrap, paired_test

    rng = np.random.default_rng(seed)
    out = {"paragraph bootstrap (1 seed)": Tally(), "paired paragraph test (1 seed)": Tally()}
    for i in range(draws):
        d = simulate(rng, 1, effect, null_per_seed=True)
        ci = cluster_bootstrap(d.a[0], d.paragraphs, n_resamples=n_resamples, seed=i)
        # the model's truth: its expected score over test sets (difficulty averages to 0)
        out["paragraph bootstrap (1 seed)"].add(_covers(ci.low, ci.high, float(d.a_seed_truth[0])), None)
        pt = paired_test(d.a[0], d.b[0], d.paragraphs, n_resamples=n_resamples, n_permutations=n_permutations, seed=i)
        out["paired paragraph test (1 seed)"].add(_covers(pt.low, pt.high, float(d.a_seed_truth[0] - d.b_seed_truth[0])),
                                                  pt.p_value < 0.05)
    return out


def holm_family_error(n_tests: int, n_seeds: int, draws: int, seed: int = 0) -> float:
    """Family-wise error of Holm over ``n_tests`` independent null comparisons over seeds (the
    paired t p of each): the share of draws with any rejection."""
    from xlviz.evaluation.seeds import compare_seeds, holm

    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(draws):
        ps = []
        for _ in range(n_tests):  # only the per-seed means matter here: draw them directly
            diffs = rng.normal(0, SEED_SD * np.sqrt(2), n_seeds) + rng.normal(0, 2.0, n_seeds)
            ps.append(compare_seeds(diffs).p_value)
        hits += min(holm(ps)) < 0.05
    return hits / draws


__all__ = ["Draw", "Tally", "simulate", "calibrate_seeds", "calibrate_one_seed", "holm_family_error", "SEED_SD", "EFFECT"]
