"""``xlviz report``: one run's table, and mean ± sd over seeds checked against hand-computed values."""

from __future__ import annotations

import json

from xlviz.cli import main as cli
from xlviz.transfer.report import seeds_table

SEED_A = [{"system": "x", "language": "en", "f1": 80.0, "exact_match": 70.0},
          {"system": "x", "language": "sov", "f1": 20.0, "exact_match": 10.0},
          {"system": "pair", "language": "en", "f1": 50.0, "exact_match": 40.0},
          {"system": "pair", "language": "sov", "f1": 30.0, "exact_match": 20.0, "l1_f1": 60.0},
          {"system": "tt", "language": "sov", "f1": 60.0, "exact_match": 50.0, "l2_labels": True, "parallel_pairs": 2000}]
SEED_B = [{"system": "x", "language": "en", "f1": 60.0, "exact_match": 50.0},
          {"system": "x", "language": "sov", "f1": 30.0, "exact_match": 20.0}]


def test_seeds_table_by_hand():
    lines = seeds_table([SEED_A, SEED_B]).splitlines()
    # x: en (80, 60) -> 70 ± sqrt(200) = 14.1, t interval 70 ± t(0.975, 1) 12.706 * 14.142 / sqrt(2) = 70 ± 127.1;
    # sov (20, 30) -> 25 ± 7.1, 25 ± 63.5; ratios 0.25, 0.5 -> 0.375
    x_row = "| x | zero-shot | 70.0 ± 14.1 [t -57.1, 197.1] | 25.0 ± 7.1 [t -38.5, 88.5] (0.38) | 2 |"
    assert x_row in lines
    # a pair model's ratio divides by its own L1 score (l1_f1 60), not the system's en row (50); one run says so
    assert "| pair | zero-shot | 50.0 (1 seed) | 30.0 (1 seed) (0.50) | 1 |" in lines
    # translate-train rows are a table of their own, after the zero-shot one, and say what they read
    tt = "| tt | translate-train, 2,000 pairs | — | 60.0 (1 seed) | 1 |"
    assert lines.index(tt) > lines.index(x_row)
    assert any(line.startswith("**translate-train**") for line in lines[lines.index(x_row):lines.index(tt)])


def test_report_command(tmp_path, capsys):
    for name, rows in (("a", SEED_A), ("b", SEED_B)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text("{}")
        (tmp_path / name / "results.json").write_text(json.dumps(rows))
    assert cli(["report", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    assert "70.0 ± 14.1 [t -57.1, 197.1]" in capsys.readouterr().out
    assert cli(["report", str(tmp_path / "a")]) == 0
    assert "F1 L2/L1" in capsys.readouterr().out
    (tmp_path / "empty").mkdir()
    assert cli(["report", str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err
    assert "results.json" in err and "Traceback" not in err


# --- intervals, settings and paired comparisons ------------------------------------------------------------

def _squad(paragraphs: int, per: int) -> dict:
    """A test set of ``paragraphs`` paragraphs with ``per`` questions each; answer of q<i>-<j> "a<i>"."""
    return {"version": "1.1", "data": [{"title": "t", "paragraphs": [
        {"context": f"a{i} b{i}", "qas": [{"id": f"q{i}-{j}", "question": "?", "answers": [{"text": f"a{i}", "answer_start": 0}]}
                                        for j in range(per)]} for i in range(paragraphs)]}]}


def _run(folder, rows, predictions: dict[str, dict[str, str]], paragraphs: int = 8, per: int = 3):
    (folder / "world" / "qa").mkdir(parents=True)
    (folder / "predictions").mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "results.json").write_text(json.dumps(rows))
    (folder / "world" / "qa" / "test.sov.json").write_text(json.dumps(_squad(paragraphs, per)))
    for system, preds in predictions.items():
        (folder / "predictions" / f"{system}-sov.json").write_text(json.dumps(preds))


def test_translate_test_rows_get_their_own_table():
    from xlviz.transfer.report import results_table

    rows = [{"system": "veco", "language": "sov", "exact_match": 10.0, "f1": 12.0, "f1_ci_low": 8.0, "f1_ci_high": 16.0,
             "exact_match_ci_low": 6.0, "exact_match_ci_high": 14.0, "n_paragraphs": 40, "n_questions": 140, "n_resamples": 2000},
            # written before rows carried a setting: the registry says veco-plugin reads the test translation
            {"system": "veco-plugin", "language": "sov", "exact_match": 80.0, "f1": 84.7, "l2_labels": True}]
    text = results_table(rows)
    lines = text.splitlines()
    zero = next(i for i, line in enumerate(lines) if line.startswith("veco "))
    test = next(i for i, line in enumerate(lines) if line.startswith("translate-test:"))
    plug = next(i for i, line in enumerate(lines) if line.startswith("veco-plugin "))
    assert zero < test < plug  # a header between them: never one table
    assert "[6.0, 14.0]" in lines[zero] and "[8.0, 16.0]" in lines[zero] and "n/a" in lines[plug]
    assert "40 paragraphs, 140 questions" in text and "B = 2000" in text and "1 seed" in text
    assert seeds_table([rows]).count("**") == 4  # two settings, two headings


def test_report_intervals_from_saved_predictions_and_compare(tmp_path, capsys):
    right = {f"q{i}-{j}": f"a{i}" for i in range(8) for j in range(3)}
    wrong = {k: "zzz" for k in right}
    half = {k: (v if int(k[1]) % 2 else "zzz") for k, v in right.items()}  # right on odd paragraphs
    rows = [{"system": s, "language": "sov", "exact_match": 0.0, "f1": 0.0} for s in ("good", "bad", "half")]
    rows.append({"system": "veco-plugin", "language": "sov", "exact_match": 0.0, "f1": 0.0})
    _run(tmp_path / "r", rows, {"good": right, "bad": wrong, "half": half, "veco-plugin": right})
    assert cli(["report", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    # "half": paragraphs all right or all wrong, 4 of 8 -> resampled paragraph means range widely
    line = next(x for x in out.splitlines() if x.startswith("half "))
    assert "n/a" not in line and "[" in line
    assert "8 paragraphs, 24 questions" in out
    assert cli(["report", str(tmp_path / "r"), "--compare", "good", "bad"]) == 0
    out = capsys.readouterr().out
    # every paragraph favours good by 100: the exact sign-flip p over paragraphs is 2 / 2^8; one seed: no verdict
    # about the method (Holm over F1 and EM: 0.0078 x 2)
    assert ("| sov | F1 | +100.0 | [+100.0, +100.0] | 0.008 | 0.016 | — | 1 seed: test-set noise only, no verdict about "
            "the method | 1 | — | 8 | 24 |") in out
    assert "exact sign-flip over paragraphs (all 2^k patterns)" in out
    assert cli(["report", str(tmp_path / "r"), "--compare", "good", "half"]) == 0
    out = capsys.readouterr().out
    # good - half: +300 on the 4 even paragraphs, 0 on the odd ones; only the 2 x 16 of 256 sign patterns that
    # keep the 4 non-zero blocks together reach 1200 -> p = 1/8: four paragraphs cannot show it
    assert "| sov | F1 | +50.0 |" in out and "| 0.125 | 0.250 | — | 1 seed:" in out
    # systems of different settings are not compared
    assert cli(["report", str(tmp_path / "r"), "--compare", "good", "veco-plugin"]) == 2
    err = capsys.readouterr().err
    assert "different settings" in err and "Traceback" not in err


def test_report_over_seeds_adds_the_seeds_by_paragraphs_interval(tmp_path, capsys):
    right = {f"q{i}-{j}": f"a{i}" for i in range(8) for j in range(3)}
    wrong = {k: "zzz" for k in right}
    for name, preds, f1 in (("s0", right, 100.0), ("s1", wrong, 0.0)):
        _run(tmp_path / name, [{"system": "m", "language": "sov", "exact_match": f1, "f1": f1}], {"m": preds})
    assert cli(["report", str(tmp_path / "s0"), str(tmp_path / "s1")]) == 0
    out = capsys.readouterr().out
    # within a seed every paragraph scores alike: only the seed draw matters -> 0 / 50 / 100 at 1/4, 1/2, 1/4
    # the seeds share their questions: the test set's own variance is 0 (every question averages 50 over the seeds),
    # so the seeds + paragraphs interval is the t over the two seeds: 50 ± 12.706 x 50
    assert "| m | zero-shot | 50.0 ± 70.7 [t -585.3, 685.3] [seeds+paragraphs -585.3, 685.3] | 2 |" in out
    assert cli(["report", str(tmp_path / "s0"), str(tmp_path / "s1"), "--compare", "m", "m"]) == 0
    assert ("| sov | F1 | +0.0 | [+0.0, +0.0] | 1.000 | 1.000 | 1.000 (min 0.500: cannot reach 0.05) | too few seeds for a "
            "verdict (2; needs 3) | 2 | — | 8 | 24 |") in capsys.readouterr().out


def test_rows_of_other_tasks_only_are_left_out_of_the_qa_table():
    """A system scored by probing alone in a language (no QA there) has a row without EM/F1:
    the QA table leaves it out instead of failing on the missing score."""
    from xlviz.transfer.report import results_table

    rows = [{"system": "mono-l2-supervised", "language": "en", "agreement": 0.8, "tasks": ["probing"]},
            {"system": "mono-l2-supervised", "language": "sov", "exact_match": 40.0, "f1": 50.0, "tasks": ["qa", "probing"]}]
    lines = results_table(rows).splitlines()
    assert [l.split()[:2] for l in lines if l.startswith("mono-l2-supervised")] == [["mono-l2-supervised", "sov"]]
    assert results_table(rows[:1]).startswith("No QA rows")
