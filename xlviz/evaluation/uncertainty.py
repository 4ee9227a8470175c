"""Honest uncertainty for QA scores: questions share paragraphs, runs differ by seed.

Why: a SQuAD-format test set holds 2-5 questions per paragraph, and a model that misreads a
paragraph tends to miss all its questions, so the questions are not independent draws; a
bootstrap over questions treats them as such and gives intervals that are too narrow. And a
number from one training seed says nothing about the seed-to-seed spread, which on the bench
is larger than the spread over questions. So:

- :func:`cluster_bootstrap`: percentile interval of the question-level mean, resampling whole
  paragraphs (clusters) with replacement (a resample's mean is its questions' mean, so a
  paragraph of five questions weighs five);
- :func:`seed_interval`: Student-t interval of the mean over seeds (one number per seed);
- :func:`paired_test`: two systems on the same questions of ONE seed: the mean difference, its
  paired paragraph-bootstrap interval, and a p-value from a paired permutation test that flips
  the sign of each paragraph's difference (exact when the paragraphs are few, Monte Carlo
  otherwise, and labelled so). It measures the test set's noise given the two trained models:
  "1 seed: test-set noise only, no verdict about the method".

Over several seeds the unit is the seed: :mod:`xlviz.evaluation.seeds` (t over per-seed values,
the verdict rule, Holm, power). Two former procedures are kept here, NOT shown to users, so the
calibration suite (``tests/test_calibration.py``) can show why they were replaced:
:func:`two_level_bootstrap` (percentile bootstrap of seeds then paragraphs: covers ~76% at 3
seeds) and :func:`paired_test_seed_blocks` (flips (seed, paragraph) blocks, so it tests the
trained models, not the method: ~74% false positives with a 4-point seed spread).

Every function is deterministic for a given ``seed``.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass
from typing import Any, Sequence

import numpy as np

from xlviz.errors import XlvizError

N_RESAMPLES = 2000
N_PERMUTATIONS = 10000
CONFIDENCE = 0.95
PARAGRAPH_BOOTSTRAP = "paragraph bootstrap"
QUESTION_BOOTSTRAP = "question bootstrap"
SEED_T = "t over seeds"
TWO_LEVEL = "seeds x paragraphs bootstrap"  # not shown to users (under-covers)
SIGN_FLIP_EXACT = "exact sign-flip over paragraphs (all 2^k patterns)"


@dataclass(frozen=True)
class Interval:
    """A mean and its interval, with what it was computed over."""

    mean: float
    low: float
    high: float
    method: str
    n_questions: int
    n_paragraphs: int
    n_resamples: int  # 0 for the t interval
    n_seeds: int = 1
    confidence: float = CONFIDENCE

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class PairedTest:
    """``mean(a) - mean(b)`` on the same questions, its interval and a two-sided p-value."""

    difference: float
    low: float
    high: float
    p_value: float
    method: str  # how the interval was resampled
    p_method: str  # how the p-value was computed
    n_questions: int
    n_paragraphs: int
    n_resamples: int
    n_seeds: int = 1
    confidence: float = CONFIDENCE

    def as_dict(self) -> dict:
        return asdict(self)


# --------------------------------------------------------------------------- inputs
def finite_values(values: Sequence[float], what: str) -> np.ndarray:
    """``values`` as a 1-D float array, refused (naming ``what``) when empty or not all finite."""
    a = np.asarray(values, dtype=np.float64)
    if a.ndim != 1 or a.size == 0:
        raise XlvizError(f"{what}: need a non-empty list of numbers", field=what)
    if not np.isfinite(a).all():
        raise XlvizError(f"{what}: every score must be a finite number", field=what)
    return a


_values = finite_values


def _check(n_resamples: int, confidence: float) -> None:
    if not isinstance(n_resamples, int) or n_resamples < 1:
        raise XlvizError(f"must be a positive integer, got {n_resamples!r}", field="n_resamples")
    if not 0.0 < confidence < 1.0:
        raise XlvizError(f"must be between 0 and 1, got {confidence!r}", field="confidence")


def cluster_codes(clusters: Sequence[Any], n: int) -> tuple[np.ndarray, int]:
    """Cluster labels (any hashable: paragraph ids) -> codes 0..k-1 in first-seen order, and k."""
    if len(clusters) != n:
        raise XlvizError(f"need one cluster per score: {len(clusters)} clusters for {n} scores", field="clusters")
    seen: dict[Any, int] = {}
    codes = np.fromiter((seen.setdefault(c, len(seen)) for c in clusters), dtype=np.int64, count=n)
    return codes, len(seen)


def cluster_totals(values: np.ndarray, codes: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-cluster sum of scores and number of questions."""
    return np.bincount(codes, weights=values, minlength=k), np.bincount(codes, minlength=k).astype(np.float64)


def cluster_draws(n_clusters: int, n_resamples: int, seed: int = 0) -> np.ndarray:
    """[n_resamples, n_clusters] cluster indices drawn with replacement: row b is resample b."""
    return np.random.default_rng(seed).integers(0, n_clusters, size=(n_resamples, n_clusters))


def resample_means(sums: np.ndarray, counts: np.ndarray, draws: np.ndarray) -> np.ndarray:
    """The question-level mean of each resample: the drawn clusters' score sums over their
    question counts (a cluster drawn twice counts twice)."""
    return sums[draws].sum(axis=-1) / counts[draws].sum(axis=-1)


def _percentiles(stats: np.ndarray, confidence: float) -> tuple[float, float]:
    tail = (1 - confidence) / 2
    lo, hi = np.quantile(stats, [tail, 1 - tail])
    return float(lo), float(hi)


# --------------------------------------------------------------------------- one run
def cluster_bootstrap(values: Sequence[float], clusters: Sequence[Any], *, n_resamples: int = N_RESAMPLES,
                      confidence: float = CONFIDENCE, seed: int = 0) -> Interval:
    """Percentile interval of the mean of ``values`` resampling whole clusters (paragraphs)."""
    _check(n_resamples, confidence)
    x = _values(values, "values")
    codes, k = cluster_codes(clusters, x.size)
    sums, counts = cluster_totals(x, codes, k)
    lo, hi = _percentiles(resample_means(sums, counts, cluster_draws(k, n_resamples, seed)), confidence)
    return Interval(float(x.mean()), lo, hi, PARAGRAPH_BOOTSTRAP, int(x.size), k, n_resamples)


def question_bootstrap(values: Sequence[float], *, n_resamples: int = N_RESAMPLES, confidence: float = CONFIDENCE,
                       seed: int = 0) -> Interval:
    """The same bootstrap with every question its own cluster (what the bench did before):
    kept to show how much narrower it is on clustered data."""
    x = _values(values, "values")
    out = cluster_bootstrap(x, range(x.size), n_resamples=n_resamples, confidence=confidence, seed=seed)
    return Interval(out.mean, out.low, out.high, QUESTION_BOOTSTRAP, out.n_questions, out.n_paragraphs, n_resamples)


# --------------------------------------------------------------------------- several seeds
def seed_interval(means: Sequence[float], *, confidence: float = CONFIDENCE, n_questions: int = 0,
                  n_paragraphs: int = 0) -> Interval:
    """Student-t interval of the mean over seeds (one score per seed); with one seed the
    interval is that number (nothing is known about the seed spread: say "1 seed")."""
    from scipy.stats import t

    _check(1, confidence)
    x = _values(means, "means")
    m = float(x.mean())
    if x.size == 1:
        return Interval(m, m, m, SEED_T, n_questions, n_paragraphs, 0, 1, confidence)
    half = float(t.ppf(1 - (1 - confidence) / 2, x.size - 1)) * float(x.std(ddof=1)) / math.sqrt(x.size)
    return Interval(m, m - half, m + half, SEED_T, n_questions, n_paragraphs, 0, int(x.size), confidence)


def _per_seed(runs: Sequence[tuple[Sequence[float], Sequence[Any]]]) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    if not runs:
        raise XlvizError("need at least one seed's scores", field="runs")
    out = []
    for i, (values, clusters) in enumerate(runs):
        x = _values(values, f"runs[{i}]")
        codes, k = cluster_codes(clusters, x.size)
        sums, counts = cluster_totals(x, codes, k)
        out.append((x, sums, counts))
    return out


def _two_level_stats(per_seed, n_resamples: int, seed: int) -> np.ndarray:
    """Resample b: draw S seeds with replacement, in each drawn slot draw that seed's
    paragraphs with replacement; the statistic is the mean of the S slot means."""
    s = len(per_seed)
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, s, size=(n_resamples, s))
    slot = np.empty((s, n_resamples, s))  # slot[i, b, j]: seed i's paragraph-resampled mean in slot j of resample b
    for i, (_, sums, counts) in enumerate(per_seed):
        draws = rng.integers(0, sums.size, size=(n_resamples, s, sums.size))
        slot[i] = resample_means(sums, counts, draws)
    return slot[pick, np.arange(n_resamples)[:, None], np.arange(s)[None, :]].mean(axis=1)


def two_level_bootstrap(runs: Sequence[tuple[Sequence[float], Sequence[Any]]], *, n_resamples: int = N_RESAMPLES,
                        confidence: float = CONFIDENCE, seed: int = 0) -> Interval:
    """NOT SHOWN TO USERS: the former combined interval over seeds and test paragraphs (a
    percentile bootstrap drawing 3 seeds from 3 cannot be wider than their range: it covers
    the mean over seeds in ~76% of draws at 3 seeds). Kept for the calibration suite; what
    users see is :func:`xlviz.evaluation.seeds.seeds_paragraphs_interval`."""
    _check(n_resamples, confidence)
    per_seed = _per_seed(runs)
    lo, hi = _percentiles(_two_level_stats(per_seed, n_resamples, seed), confidence)
    mean = float(np.mean([x.mean() for x, _, _ in per_seed]))
    return Interval(mean, lo, hi, TWO_LEVEL, int(per_seed[0][0].size), int(per_seed[0][1].size), n_resamples,
                    len(per_seed), confidence)


# --------------------------------------------------------------------------- paired
def _differences(a: Sequence[float], b: Sequence[float]) -> np.ndarray:
    x, y = _values(a, "a"), _values(b, "b")
    if x.size != y.size:
        raise XlvizError(f"paired scores need the same questions: {x.size} vs {y.size}", field="b")
    return x - y


def sign_flip_p(block_sums: np.ndarray, total: float, *, n_permutations: int = N_PERMUTATIONS, seed: int = 0) -> tuple[float, str]:
    """Two-sided p-value of a paired permutation test: under "A and B are exchangeable", each
    block's summed difference keeps or flips its sign. Exact (every sign pattern, labelled
    "exact") when there are at most 2^k <= ``n_permutations`` patterns, else Monte Carlo
    (labelled with its number of random patterns) with the observed statistic counted
    (p = (1 + hits) / (1 + draws), never 0)."""
    k = block_sums.size
    observed = abs(float(block_sums.sum())) / total
    tol = 1e-9 * max(1.0, observed)
    if not block_sums.any():
        return 1.0, SIGN_FLIP_EXACT
    if 2 ** k <= n_permutations:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=k)))
        stats = np.abs(signs @ block_sums) / total
        return float((stats >= observed - tol).mean()), SIGN_FLIP_EXACT
    signs = np.random.default_rng(seed).choice(np.array([1.0, -1.0]), size=(n_permutations, k))
    hits = int((np.abs(signs @ block_sums) / total >= observed - tol).sum())
    return (1 + hits) / (1 + n_permutations), f"Monte Carlo sign-flip over paragraphs ({n_permutations} random patterns of 2^{k})"


def paired_test(a: Sequence[float], b: Sequence[float], clusters: Sequence[Any], *, n_resamples: int = N_RESAMPLES,
                n_permutations: int = N_PERMUTATIONS, confidence: float = CONFIDENCE, seed: int = 0) -> PairedTest:
    """System A against system B on the same questions (``clusters``: each question's
    paragraph): the mean difference, its paired paragraph-bootstrap interval, and the
    sign-flip permutation p-value over paragraphs."""
    _check(n_resamples, confidence)
    d = _differences(a, b)
    codes, k = cluster_codes(clusters, d.size)
    sums, counts = cluster_totals(d, codes, k)
    lo, hi = _percentiles(resample_means(sums, counts, cluster_draws(k, n_resamples, seed)), confidence)
    p, how = sign_flip_p(sums, float(d.size), n_permutations=n_permutations, seed=seed + 1)
    return PairedTest(float(d.mean()), lo, hi, p, PARAGRAPH_BOOTSTRAP, how, int(d.size), k, n_resamples, 1, confidence)


def paired_test_seed_blocks(runs: Sequence[tuple[Sequence[float], Sequence[float], Sequence[Any]]], *,
                      n_resamples: int = N_RESAMPLES, n_permutations: int = N_PERMUTATIONS, confidence: float = CONFIDENCE,
                      seed: int = 0) -> PairedTest:
    """NOT SHOWN TO USERS: the former A-against-B over several seeds (two-level interval; the
    permutation flips each (seed, paragraph) block, so the seeds' own spread is held fixed and
    the p-value tests the trained models, not the method: ~74% false positives with a 4-point
    seed spread). Kept for the calibration suite; users see
    :func:`xlviz.evaluation.seeds.compare_seeds`. One seed: :func:`paired_test`."""
    if len(runs) == 1:
        return paired_test(*runs[0], n_resamples=n_resamples, n_permutations=n_permutations, confidence=confidence, seed=seed)
    _check(n_resamples, confidence)
    diffs = [(_differences(a, b), c) for a, b, c in runs]
    per_seed = _per_seed(diffs)
    lo, hi = _percentiles(_two_level_stats(per_seed, n_resamples, seed), confidence)
    # each seed's blocks scaled by 1 / its question count: the statistic is the mean of seed means
    blocks = np.concatenate([sums / x.size for x, sums, _ in per_seed])
    p, how = sign_flip_p(blocks, float(len(per_seed)), n_permutations=n_permutations, seed=seed + 1)
    mean = float(np.mean([x.mean() for x, _, _ in per_seed]))
    return PairedTest(mean, lo, hi, p, TWO_LEVEL, how, int(per_seed[0][0].size), int(per_seed[0][1].size), n_resamples,
                      len(per_seed), confidence)


# --------------------------------------------------------------------------- SQuAD files
def paragraph_ids(dataset: Any) -> dict[str, str]:
    """``{question id: paragraph id}`` of a SQuAD dict (or its ``data`` list): questions under
    the same ``data[i].paragraphs[j]`` share a context and are one cluster ("i/j")."""
    data = dataset.get("data") if isinstance(dataset, dict) else dataset
    if not isinstance(data, list):
        raise XlvizError("expected a SQuAD dict with a 'data' list", field="data")
    out: dict[str, str] = {}
    for i, article in enumerate(data):
        for j, paragraph in enumerate(article.get("paragraphs", []) if isinstance(article, dict) else []):
            for qa in paragraph.get("qas", []) if isinstance(paragraph, dict) else []:
                if isinstance(qa, dict) and isinstance(qa.get("id"), str):
                    out[qa["id"]] = f"{i}/{j}"
    return out


def score_intervals(rows: Sequence[dict], paragraphs: dict[str, str], *, n_resamples: int = N_RESAMPLES,
                    confidence: float = CONFIDENCE, seed: int = 0) -> dict:
    """Flat fields for a results row from per-question rows (``{"id", "exact_match", "f1"}``,
    percent): EM and F1 paragraph-bootstrap intervals and what they were computed over."""
    if not rows:
        raise XlvizError("no questions to score", field="data")
    clusters = [paragraphs.get(r["id"], f"question {r['id']}") for r in rows]
    em = cluster_bootstrap([r["exact_match"] for r in rows], clusters, n_resamples=n_resamples, confidence=confidence, seed=seed)
    f1 = cluster_bootstrap([r["f1"] for r in rows], clusters, n_resamples=n_resamples, confidence=confidence, seed=seed)
    return {"exact_match_ci_low": round(em.low, 4), "exact_match_ci_high": round(em.high, 4),
            "f1_ci_low": round(f1.low, 4), "f1_ci_high": round(f1.high, 4), "ci_method": PARAGRAPH_BOOTSTRAP,
            "ci_level": confidence, "n_paragraphs": f1.n_paragraphs, "n_questions": f1.n_questions, "n_resamples": n_resamples}


__all__ = ["Interval", "PairedTest", "cluster_bootstrap", "question_bootstrap", "seed_interval", "two_level_bootstrap",
           "paired_test", "paired_test_seed_blocks", "sign_flip_p", "cluster_draws", "resample_means", "paragraph_ids",
           "score_intervals", "PARAGRAPH_BOOTSTRAP", "QUESTION_BOOTSTRAP", "SEED_T", "TWO_LEVEL", "SIGN_FLIP_EXACT"]
