"""bench/probing_seeds.py: probing rows of several seeds matched by what they are and averaged
(hand-computed values on a two-seed fixture)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SPEC = importlib.util.spec_from_file_location("probing_seeds", Path(__file__).resolve().parent.parent / "bench" / "probing_seeds.py")
probing_seeds = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(probing_seeds)


def result(run: str, accuracy: float, good: list[bool], wic: float) -> dict:
    model = f"{run} · monotrans-into-l1 (sov body)"
    items = [{"id": f"agr-en-{i}", "covered": True, "logp_good": 0.0 if g else -1.0, "logp_bad": -0.5, "correct": g}
             for i, g in enumerate(good)]
    items.append({"id": "agr-en-x", "covered": False})  # not scored: left out
    return {"agreement": [{"model": model, "role": "transferred", "language": "en", "category": "all", "accuracy": accuracy,
                           "coverage": len(good) / (len(good) + 1)},
                          {"model": model, "role": "transferred", "language": "en", "category": "simple", "accuracy": 0.0,
                           "coverage": 1.0}],
            "agreement_items": {f"{model}|en": items},
            "wic": [{"model": model, "language": "en", "layer": 4, "accuracy": wic, "majority": 0.52, "spearman": 0.3}]}


def test_rows_of_different_runs_are_one_row_over_seeds():
    seeds = [result("run-a", 0.75, [True, True, True, False], 0.70), result("run-b", 0.65, [True, True, False, False], 0.80)]
    (agr,) = probing_seeds.agreement_table(seeds)  # the 'simple' category is not a headline row
    assert agr["model"] == "monotrans-into-l1 (sov body)" and agr["seeds"] == 2
    assert agr["accuracy"] == pytest.approx(70.0) and agr["per_seed"] == pytest.approx([75.0, 65.0])
    # Student-t over two seeds: 70 ± t(0.975, 1) * sd / sqrt(2), sd = 7.071, t = 12.706: [6.47, 133.5], cut at 100
    assert agr["seeds_low"] == pytest.approx(70.0 - 12.706 * 7.0711 / 2 ** 0.5, rel=1e-3)
    assert agr["seeds_high"] == 100.0
    assert agr["coverage"] == pytest.approx(80.0)
    assert 0.0 <= agr["sp_low"] <= 62.5 <= agr["sp_high"] <= 100.0  # items: 3/4 and 2/4 right
    (w,) = probing_seeds.wic_table(seeds)
    assert w["accuracy"] == pytest.approx(75.0) and w["per_seed"] == pytest.approx([70.0, 80.0]) and w["majority"] == pytest.approx(52.0)


def test_a_refused_seed_is_counted_as_degenerate_not_averaged():
    seeds = [result("run-a", 0.75, [True, True, True, False], 0.70), result("run-b", 0.65, [True, True, False, False], 0.80)]
    seeds.append({"agreement": [], "agreement_items": {}, "wic": [],
                  "degenerate": [{"model": "run-c · monotrans-into-l1 (sov body)", "language": "en", "role": "transferred",
                                  "verdict": "degenerate", "degenerate_stages": ["s1_pretrain-sov"], "reason": "plateau"}]})
    (agr,) = probing_seeds.agreement_table(seeds)
    assert agr["seeds"] == 2 and agr["refused"] == 1 and agr["accuracy"] == pytest.approx(70.0)
