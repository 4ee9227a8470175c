"""Print the calibration table: procedure x seed count -> coverage of its nominal 95% interval,
false-positive rate at alpha 0.05 (planted difference 0) and power (planted difference of 6 F1
points), for the procedures the bench shows and the former ones (marked OLD, not shown to
users). Simulation: ``xlviz.evaluation.calibration`` (the bench's structure: 100 paragraphs of
3-4 questions shared by the seeds, seed sd 4 F1 points). Deterministic (fixed seeds).

    PYTHONPATH=$PWD python bench/calibration_table.py [--draws 2000] [--old-draws 400]
"""

from __future__ import annotations

import argparse


def main() -> None:
    from xlviz.evaluation.calibration import EFFECT, calibrate_one_seed, calibrate_seeds

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--draws", type=int, default=2000, help="simulated experiments per cell (new procedures)")
    p.add_argument("--old-draws", type=int, default=400, help="simulated experiments per cell (OLD procedures: slow)")
    args = p.parse_args()
    rows = []
    one_null, one_alt = calibrate_one_seed(0.0, args.draws, seed=1), calibrate_one_seed(EFFECT, args.draws // 2, seed=2)
    for name in one_null:
        rows.append((name, 1, one_null[name], one_alt[name]))
    for n in (3, 5, 10):
        null = calibrate_seeds(n, 0.0, args.draws, seed=10 + n)
        alt = calibrate_seeds(n, EFFECT, args.draws // 2, seed=20 + n)
        old_null = calibrate_seeds(n, 0.0, args.old_draws, seed=30 + n, old=True)
        old_alt = calibrate_seeds(n, EFFECT, args.old_draws // 2, seed=40 + n, old=True)
        for name in null:
            rows.append((name, n, null[name], alt[name]))
        for name in old_null:
            if name.startswith("OLD"):
                rows.append((name, n, old_null[name], old_alt[name]))
    tests = {"paired t over seeds", "sign-flip exact over seeds", "paired paragraph test (1 seed)",
             "OLD seed x paragraph block permutation"}
    intervals = {"sign-flip exact over seeds"}  # a test only: no interval
    print(f"| procedure | seeds | coverage of 95% interval | false positives at 0.05 | power at +{EFFECT:g} F1 | draws |")
    print("|---|---|---|---|---|---|")
    for name, n, null, alt in sorted(rows, key=lambda r: (r[0].startswith("OLD"), r[0], r[1])):
        cov = "—" if name in intervals else f"{null.coverage:.3f}"
        fp = f"{null.rejection:.3f}" if name in tests else "—"
        pw = f"{alt.rejection:.3f}" if name in tests else "—"
        print(f"| {name} | {n} | {cov} | {fp} | {pw} | {null.draws} |")
    print(f"\nPass: coverage >= 0.93, false positives <= 0.06 (paired tests; 1 seed: the null is two trained models "
          f"with the same expected score). Targets: t over seeds and the paired tests over seeds: the expected score "
          f"(difference) over seeds on the shared test set; seeds+paragraphs: on the test distribution; 1 seed: that "
          f"trained model's score on the test distribution.")


if __name__ == "__main__":
    main()
