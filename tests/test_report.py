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
    # x: en (80, 60) -> 70 ± sqrt(200) = 14.1; sov (20, 30) -> 25 ± 7.1; ratios 0.25, 0.5 -> 0.375
    assert "| x | zero-shot | 70.0 ± 14.1 | 25.0 ± 7.1 (0.38) | 2 |" in lines
    # a pair model's ratio divides by its own L1 score (l1_f1 60), not the system's en row (50)
    assert "| pair | zero-shot | 50.0 | 30.0 (0.50) | 1 |" in lines
    # translate-train rows come after the zero-shot ones and say what they read
    assert lines.index("| tt | translate-train, 2,000 pairs | — | 60.0 | 1 |") > lines.index("| x | zero-shot | 70.0 ± 14.1 | 25.0 ± 7.1 (0.38) | 2 |")


def test_report_command(tmp_path, capsys):
    for name, rows in (("a", SEED_A), ("b", SEED_B)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text("{}")
        (tmp_path / name / "results.json").write_text(json.dumps(rows))
    assert cli(["report", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    assert "70.0 ± 14.1" in capsys.readouterr().out
    assert cli(["report", str(tmp_path / "a")]) == 0
    assert "F1 L2/L1" in capsys.readouterr().out
    (tmp_path / "empty").mkdir()
    assert cli(["report", str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err
    assert "results.json" in err and "Traceback" not in err
