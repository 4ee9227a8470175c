"""Seeds as the unit of a claim about a method (xlviz.evaluation.seeds) against hand-computed
values, and where it is shown: `xlviz report --compare`, the sweep's paired differences and
the XQuAD page's paired table (one verdict rule, Holm, the power line, degenerate and unlike
rows never compared)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from xlviz.cli import main as cli
from xlviz.errors import XlvizError
from xlviz.evaluation.seeds import (A_BETTER, B_BETTER, NO_DIFFERENCE, ONE_SEED, TOO_FEW, compare_seeds, decide, holm,
                                    seeds_for_power, seeds_paragraphs_interval, sign_flip_exact, sign_flip_floor, t_interval,
                                    t_power)
from tests.test_report import _run


def test_t_interval_of_three_seeds_by_hand():
    # [70, 72, 80]: mean 74, sd 5.292, se 3.055, t(0.975, 2) 4.303 -> 74 ± 13.14; a percentile bootstrap gives [70, 80]
    m, lo, hi, _ = t_interval([70.0, 72.0, 80.0])
    assert (m, round(lo, 1), round(hi, 1)) == (74.0, 60.9, 87.1)


def test_three_copies_with_differences_100_100_minus_100_is_no_verdict():
    c = compare_seeds([100.0, 100.0, -100.0])
    # mean 33.3, sd 115.5, t = 33.3 / 66.7 = 0.5 on 2 df -> p = 0.667; every sign pattern has |sum| >= 100 -> exact p 1
    assert c.p_value == pytest.approx(2 / 3) and c.p_sign_flip == 1.0 and c.sign_flip_floor == 0.25
    assert c.verdict == NO_DIFFERENCE and c.n_seeds == 3


def test_exact_sign_flip_over_seeds_enumerates():
    assert sign_flip_exact([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]) == 2 / 64  # all one way: the pattern and its mirror
    assert sign_flip_exact([1.0, -2.0, 3.0]) == 6 / 8  # sums 6, 4, 2, 0 and mirrors: |sum| >= 2 in 6 of 8
    assert [sign_flip_floor(n) for n in (3, 5, 6)] == [0.25, 0.0625, 0.03125]


def test_the_verdict_rule():
    assert decide(1, 0.001, 5.0) == ONE_SEED
    assert decide(2, 0.001, 5.0) == TOO_FEW
    assert decide(3, 0.01, 5.0) == A_BETTER and decide(3, 0.01, -5.0) == B_BETTER
    assert decide(3, 0.05, 5.0) == NO_DIFFERENCE  # p must be below alpha
    # two seeds: an interval, no verdict, even when it excludes 0
    c = compare_seeds([10.0, 11.0])
    assert c.low > 0 and c.verdict == TOO_FEW


def test_holm_by_hand():
    # sorted 0.01, 0.03, 0.04 -> x3, x2, x1 = 0.03, 0.06, 0.04 -> monotone 0.03, 0.06, 0.06
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5]) == [0.5] and holm([]) == []


def test_seeds_for_power_by_hand():
    # a difference of one between-seed sd needs 10 seeds for 80% power in a two-sided paired t at 0.05
    assert t_power(10, 1.0, 1.0) >= 0.8 > t_power(9, 1.0, 1.0)
    assert seeds_for_power(1.0, 1.0) == 10 and seeds_for_power(-1.0, 1.0) == 10
    assert seeds_for_power(0.0, 1.0) is None and seeds_for_power(5.0, 0.0) == 3


def test_seeds_paragraphs_interval_adds_the_shared_test_set_variance():
    paras = ["a", "a", "b", "b"]
    iv = seeds_paragraphs_interval([([0.0, 0.0, 100.0, 100.0], paras), ([0.0, 0.0, 100.0, 100.0], paras)])
    # the seeds agree (s = 0); the shared test set's two paragraphs differ: v = 2/1 x (100² + 100²) / 4² = 2500,
    # df = 1 -> 50 ± 12.706 x 50
    assert iv.mean == 50.0 and iv.low == pytest.approx(50 - 12.7062 * 50, abs=0.01)
    # seeds with their own questions: the t over the seed means alone
    own = seeds_paragraphs_interval([([60.0], ["a"]), ([40.0, 40.0], ["b", "c"])])
    assert (own.low, own.high) == pytest.approx((50 - 12.7062 * 10, 50 + 12.7062 * 10), abs=0.01)
    with pytest.raises(XlvizError, match="at least 2 seeds"):
        seeds_paragraphs_interval([([1.0], ["a"])])


# --- xlviz report --compare ------------------------------------------------------------------------

RIGHT = {f"q{i}-{j}": f"a{i}" for i in range(8) for j in range(3)}
WRONG = {k: "zzz" for k in RIGHT}


def _three_seeds(tmp_path, degenerate_seed: int | None = None):
    """Three runs of A and B; A right on every question in seeds 0 and 1, B in seed 2."""
    for seed in range(3):
        a, b = (RIGHT, WRONG) if seed < 2 else (WRONG, RIGHT)
        rows = [{"system": s, "language": "sov", "exact_match": 0.0, "f1": 0.0} for s in ("A", "B")]
        if seed == degenerate_seed:
            rows[0].update(verdict="degenerate", degenerate_stages=["s2_transfer-sov"])
        _run(tmp_path / f"s{seed}", rows, {"A": a, "B": b})
    return [str(tmp_path / f"s{seed}") for seed in range(3)]


def test_report_compare_over_three_seeds_gives_no_misleading_p(tmp_path, capsys):
    runs = _three_seeds(tmp_path)
    assert cli(["report", *runs, "--compare", "A", "B"]) == 0
    out = capsys.readouterr().out
    # per-seed differences +100, +100, -100: paired t p = 0.667 (Holm over F1 and EM: 1.000); the exact sign-flip
    # p is 1 and could not be below 0.25 with 3 seeds
    assert ("| sov | F1 | +33.3 | [-253.5, +320.2] | 0.667 | 1.000 | 1.000 (min 0.250: cannot reach 0.05) | "
            "no difference shown | 3 |") in out
    assert "interval t over seeds (per-seed differences); p paired t over seeds (two-sided)." in out
    assert "Holm-adjusted over the 2 comparisons of this table" in out


def test_report_compare_leaves_out_degenerate_rows(tmp_path, capsys):
    from pathlib import Path

    from xlviz.runs import Run
    from xlviz.transfer.uncertainty import compare_systems

    runs = _three_seeds(tmp_path, degenerate_seed=2)
    rows = [Run(Path(r)).results() for r in runs]
    (f1, _) = compare_systems([Path(r) for r in runs], rows, "A", "B")
    assert f1["n_seeds"] == 2 and f1["excluded"] == 1 and f1["difference"] == 100.0 and f1["verdict"] == TOO_FEW
    assert cli(["report", *runs, "--compare", "A", "B"]) == 0
    assert "whose row of either system is degenerate" in capsys.readouterr().out
    every = [[{**r, "verdict": "degenerate"} for r in rs] for rs in rows]
    with pytest.raises(XlvizError, match="degenerate rows are no result"):
        compare_systems([Path(r) for r in runs], every, "A", "B")


# --- the sweep's paired differences and the Sweeps page's table -------------------------------------

def test_sweep_paired_table_shows_what_the_package_decides(tmp_path):
    from tests.sweep_fixtures import make_sweep
    from xlviz.transfer.sweep_report import paired_differences
    from xlviz.views.sweeps import paired_table

    folder = make_sweep(tmp_path)
    diffs = paired_differences(folder, "monotrans", "floor", "f1")
    table = paired_table(folder, "monotrans", "floor", "f1")
    assert list(table["seeds"]) == [2, 2]
    for d, (_, row) in zip(diffs, table.iterrows()):
        assert row["verdict"] == "too few seeds for a verdict (2; needs 3)" and d["verdict"] == TOO_FEW
        assert row["95% t interval"].endswith("(2 seeds: 1 df, wide)")
        assert d["family"] == 2 and d["p_holm"] >= d["p"]
    # sov: monotrans - floor = 0.4 x (50 + seed) in seeds 0 and 1 -> 20, 20.4: t over two seeds, 1 df
    sov = next(d for d in diffs if d["language"] == "sov")
    m, lo, hi, p = t_interval([20.0, 20.4])
    assert (sov["difference"], sov["low"], sov["high"], sov["p"]) == pytest.approx((m, lo, hi, p))


# --- the XQuAD page's paired table --------------------------------------------------------------------

def _q(model: str, right: set[int], lang: str = "en") -> list[dict]:
    return [{"id": f"q{i}", "language": lang, "model": model, "exact_match": 100.0 * (i // 2 in right),
             "f1": 100.0 * (i // 2 in right), "paragraph": f"p{i // 2}"} for i in range(10)]


def test_xquad_pairs_only_like_settings_and_leaves_degenerate_cells_out():
    from xlviz.views.qa import cell_intervals, paired_tests

    rows = pd.DataFrame(_q("A", {0, 1, 2, 3, 4}) + _q("B", {0, 1}) + _q("T", {0}) + _q("A", {0}, "sov") + _q("B", {1}, "sov"))
    setting = {"A": "zero-shot", "B": "zero-shot", "T": "translate-test"}
    table = paired_tests(rows, setting_of=setting)
    assert {(r.A, r.B) for r in table.itertuples()} == {("A", "B")}  # T is never paired with a zero-shot model
    assert list(table["language"]) == ["en", "sov"] and set(table["seeds"]) == {1}
    # Holm over the table's four p-values (F1 and EM of two pairs): each adjusted p at least its raw p
    assert (table["p F1 Holm"] >= table["p F1"]).all() and (table["p EM Holm"] >= table["p EM"]).all()
    dead = {"B": ["sov"]}
    assert list(paired_tests(rows, setting_of=setting, degenerate=dead)["language"]) == ["en"]
    cells = cell_intervals(rows, degenerate=dead)
    assert ("B", "sov") not in set(zip(cells["model"], cells["language"]))


def test_sign_flip_label_says_exact_only_when_enumerated():
    import numpy as np

    from xlviz.evaluation.uncertainty import sign_flip_p

    assert sign_flip_p(np.ones(10), 10.0)[1].startswith("exact")
    p, how = sign_flip_p(np.ones(100), 100.0, n_permutations=1000)
    assert how.startswith("Monte Carlo") and "1000 random patterns of 2^100" in how and p == 1 / 1001


def test_report_json_inputs_are_untouched(tmp_path):
    """compare_systems reads results and predictions; it writes nothing into the runs."""
    runs = _three_seeds(tmp_path)
    before = {p: p.read_bytes() for r in runs for p in sorted(__import__("pathlib").Path(r).rglob("*")) if p.is_file()}
    assert cli(["report", *runs, "--compare", "A", "B"]) == 0
    after = {p: p.read_bytes() for r in runs for p in sorted(__import__("pathlib").Path(r).rglob("*")) if p.is_file()}
    assert before == after and json.loads((tmp_path / "s0" / "results.json").read_text())[0]["system"] == "A"


def test_report_compare_over_a_sweep_is_one_family(tmp_path, capsys):
    """A sweep folder of two settings x three seeds: one table per setting, Holm over every
    row of both (4 comparisons)."""
    from xlviz.io import atomic_write_json

    cells = []
    for pref in (1, 2):
        for seed in range(3):
            name = f"{len(cells):03d}-preference-{pref}_seed-{seed}"
            cells.append({"name": name, "overrides": {"world.preference": pref, "seed": seed},
                          "config": {"seed": seed, "world": {"preference": pref}}})
            a, b = (RIGHT, WRONG) if seed < 2 or pref == 2 else (WRONG, RIGHT)
            _run(tmp_path / name, [{"system": s, "language": "sov", "exact_match": 0.0, "f1": 0.0} for s in ("A", "B")],
                 {"A": a, "B": b})
    atomic_write_json(tmp_path / "sweep" / "sweep.json", {"cells": cells})
    assert cli(["report", str(tmp_path), "--compare", "A", "B"]) == 0
    out = capsys.readouterr().out
    assert "cell: preference=1 (3 seeds)" in out and "cell: preference=2 (3 seeds)" in out
    assert out.count("Holm-adjusted over the 4 comparisons of every cell printed") == 2
    # preference=2: A right on every question in all three seeds: +100 with zero spread. The t
    # statistic is undefined there; p falls back to the exact sign-flip p of identical values
    # (2 / 2^3 = 0.25), so three seeds still give no verdict
    row = next(line for line in out.splitlines() if line.startswith("| sov | F1 | +100.0 |"))
    assert "| [+100.0, +100.0] | 0.250 |" in row and "no difference shown" in row and "A better" not in row
