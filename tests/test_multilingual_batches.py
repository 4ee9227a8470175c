"""Balanced multi-language MLM batches (xlviz.training.multilingual)."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from xlviz.errors import XlvizError
from xlviz.training.multilingual import multilingual_batches


def blocks(value: int, n: int | None = None):
    """Blocks [value, k] so a row tells its language (value) and its order (k)."""
    counter = itertools.count() if n is None else range(n)
    return ([value, k] for k in counter)


def streams(n: int | None = None):
    return {"en": blocks(1, n), "xx": blocks(2, n), "yy": blocks(3, n)}


def test_batch_mode_one_language_per_batch_balanced_and_seeded():
    got = list(itertools.islice(multilingual_batches(streams(), 4, seed=0), 3000))
    for lang, batch in got:
        assert batch.shape == (4, 2)
        assert set(batch[:, 0].tolist()) == {{"en": 1, "xx": 2, "yy": 3}[lang]}
    counts = Counter(lang for lang, _ in got)
    assert all(abs(c - 1000) < 100 for c in counts.values())  # ~5 std of a binomial(3000, 1/3)
    again = [lang for lang, _ in itertools.islice(multilingual_batches(streams(), 4, seed=0), 50)]
    other = [lang for lang, _ in itertools.islice(multilingual_batches(streams(), 4, seed=1), 50)]
    assert again == [lang for lang, _ in got[:50]] and again != other
    # each language's blocks come in their own order, none skipped
    en_rows = [row[1] for lang, b in got if lang == "en" for row in b.tolist()]
    assert en_rows == list(range(len(en_rows)))


def test_alternate_mode_is_round_robin():
    got = [lang for lang, _ in itertools.islice(multilingual_batches(streams(), 2, mode="alternate"), 7)]
    assert got == ["en", "xx", "yy", "en", "xx", "yy", "en"]


def test_mixed_mode_mixes_rows():
    got = list(itertools.islice(multilingual_batches(streams(), 6, mode="mixed", seed=0), 500))
    assert all(lang is None for lang, _ in got)
    rows = Counter(v for _, b in got for v in b[:, 0].tolist())
    assert all(abs(c - 1000) < 120 for c in rows.values())
    assert any(len(set(b[:, 0].tolist())) > 1 for _, b in got)


def test_smoothed_weights_follow_sizes():
    # sizes 1:9, alpha 0.5 -> q = 1/(1+3) = 0.25 for en; alpha 1 -> 0.1; alpha 0 -> 0.5
    for alpha, share in ((0.5, 0.25), (1.0, 0.1), (0.0, 0.5)):
        got = itertools.islice(multilingual_batches({"en": blocks(1), "xx": blocks(2)}, 1, sizes={"en": 1, "xx": 9},
                                                    alpha=alpha, seed=2), 4000)
        en = sum(lang == "en" for lang, _ in got) / 4000
        assert en == pytest.approx(share, abs=0.03)


def test_stops_when_a_language_runs_out_and_refuses_bad_input():
    got = list(multilingual_batches({"en": blocks(1, 4), "xx": blocks(2, 100)}, 2, mode="alternate"))
    assert [lang for lang, _ in got] == ["en", "xx", "en", "xx"]
    with pytest.raises(XlvizError, match="mode"):
        next(multilingual_batches(streams(), 2, mode="zip"))
    with pytest.raises(XlvizError, match="sizes"):
        next(multilingual_batches(streams(), 2, sizes={"en": 1}, alpha=0.5))
