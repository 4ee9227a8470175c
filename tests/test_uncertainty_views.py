"""Intervals beside the headline numbers of the Runs and XQuAD pages (their logic, without
Streamlit), and translate-test rows in a table of their own."""

from __future__ import annotations

import json

import pandas as pd


def _rows(model: str, right: set[int], lang: str = "en") -> list[dict]:
    """Ten questions in five paragraphs of two; ``right``: the paragraphs answered right."""
    return [{"id": f"q{i}", "language": lang, "model": model, "exact_match": 100.0 * (i // 2 in right),
             "f1": 100.0 * (i // 2 in right), "paragraph": f"p{i // 2}"} for i in range(10)]


def test_xquad_intervals_resample_paragraphs():
    from xlviz.views.qa import cell_intervals, paired_tests, score_matrix_ci

    rows = pd.DataFrame(_rows("A", {0, 1, 2, 3, 4}) + _rows("B", {0, 1}) + _rows("B", {0, 1, 2}, "sov"))
    ci = cell_intervals(rows).set_index(["model", "language"])
    assert ci.loc[("B", "en"), "paragraphs"] == 5 and ci.loc[("B", "en"), "n"] == 10
    assert (ci.loc[("A", "en"), "F1 low"], ci.loc[("A", "en"), "F1 high"]) == (100.0, 100.0)
    matrix = score_matrix_ci(rows, "f1", ["A", "B"], ["en", "sov"])
    assert matrix.loc["A", "en"] == "100.0 [100.0, 100.0]"
    assert matrix.loc["B", "en"].startswith("40.0 [") and matrix.loc["B", "sov"].startswith("60.0 [")
    assert matrix.loc["B", "avg"].startswith("50.0 [")  # per-question average over en and sov
    assert pd.isna(matrix.loc["A", "sov"])
    # without paragraphs every question is its own cluster: the interval is narrower
    flat = rows.drop(columns="paragraph")
    narrow = cell_intervals(flat).set_index(["model", "language"]).loc[("B", "en")]
    wide = ci.loc[("B", "en")]
    assert narrow["paragraphs"] == 10 and narrow["F1 high"] - narrow["F1 low"] <= wide["F1 high"] - wide["F1 low"]
    test = paired_tests(rows[rows["language"] == "en"]).iloc[0]
    # A - B = 100 on 3 of 5 paragraphs: the exact sign-flip p is 2 / 2^3 = 0.25 (five paragraphs cannot show it)
    assert test["F1 A − B"] == 60.0 and test["paragraphs"] == 5 and test["p F1"] == 0.25
    assert test["p from"] == "exact sign-flip over paragraphs (all 2^k patterns)"


def test_runs_page_tables_carry_intervals_and_keep_translate_test_apart(tmp_path):
    from xlviz.runs import Run
    from xlviz.views.runs import (TRANSLATE_TEST, TRANSLATE_TRAIN, ZERO_SHOT, compare_table, interval_caption,
                                    results_by_setting, results_frame, run_table)

    rows = [{"system": "veco", "language": "sov", "setting": "zero-shot", "exact_match": 10.0, "f1": 12.0,
             "exact_match_ci_low": 6.0, "exact_match_ci_high": 14.0, "f1_ci_low": 8.0, "f1_ci_high": 16.0,
             "n_paragraphs": 40, "n_questions": 140},
            {"system": "veco-plugin", "language": "sov", "exact_match": 80.0, "f1": 84.7, "l2_labels": True},  # no setting: old row
            {"system": "veco-plugin-out", "language": "sov", "setting": "translate-train", "exact_match": 50.0, "f1": 55.0,
             "l2_labels": True}]
    run_dir = tmp_path / "r"
    run_dir.mkdir()
    (run_dir / "config.json").write_text(json.dumps({"languages": ["en", "sov"]}))
    (run_dir / "results.json").write_text(json.dumps(rows))
    long = results_frame([Run(run_dir)])
    assert dict(zip(long["system"], long["setting"])) == {"veco": ZERO_SHOT, "veco-plugin": TRANSLATE_TEST,
                                                          "veco-plugin-out": TRANSLATE_TRAIN}
    tables = dict(results_by_setting(long, ["en", "sov"]))
    assert list(tables) == [ZERO_SHOT, TRANSLATE_TRAIN, TRANSLATE_TEST]
    assert tables[ZERO_SHOT].loc["veco", "sov"] == "12.0 [8.0, 16.0]"
    assert list(tables[TRANSLATE_TEST].index) == ["veco-plugin"] and tables[TRANSLATE_TEST].loc["veco-plugin", "sov"] == "84.7"
    assert "40 paragraphs, 140 questions" in interval_caption(long) and "1 seed" in interval_caption(long)
    wide = compare_table(long)
    assert list(wide["setting"]) == [ZERO_SHOT, TRANSLATE_TRAIN, TRANSLATE_TEST]
    assert wide.loc[0, "F1 sov [95% CI]"] == "12.0 [8.0, 16.0]" and wide.loc[0, "EM sov [95% CI]"] == "10.0 [6.0, 14.0]"
    table = run_table([Run(run_dir)]).iloc[0]
    assert (table["best L2 F1, zero-shot"], table["best L2 F1, L2 labels"], table["best L2 F1, translate-test"]) == (12.0, 55.0, 84.7)
