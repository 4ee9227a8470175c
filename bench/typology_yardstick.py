"""The synthetic-language literature's measurements on a typology sweep: per cell and system,
how well the two languages' representations align (word translation and sentence retrieval
per layer, on the world's held-out parallel pairs with their gold dictionary), beside the
system's zero-shot QA transfer ratio, and the rank correlation between the two over every
cell and system (Deshpande et al. 2022 report rho_s = 0.94 between embedding alignment and
zero-shot transfer on XNLI).

    xlviz sweep --grid world.languages=svo,step1,step2,step3,sov,tr --grid seed=0,1,2 \\
        --methods monotrans,floor,dictionary-oracle,jointpair-disjoint,clwe --out SWEEP
    python bench/typology_yardstick.py SWEEP --out yardstick.csv

Every number is read from the sweep's cells (their exported encoders and results.json);
nothing is trained. Alignment rows use each system's own encoders, exactly the models it
scored (:func:`xlviz.analysis.reports.run_systems`); the dictionary oracle shares MONOTRANS's
encoders with a different L2 embedding matrix, so it is measured as itself.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path


def _mean(a: float | None, b: float | None) -> float | None:
    """Both directions' word translation accuracy, averaged (None where a layer has none)."""
    return None if a is None or b is None else (a + b) / 2


def _best(layers: dict, key: str) -> float | None:
    vals = [v[key] for v in layers.values() if v[key] is not None]
    return max(vals) if vals else None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("sweep", help="a sweep folder (xlviz sweep --out)")
    p.add_argument("--out", default=None, help="CSV of every cell, system and layer (default: <sweep>/sweep/yardstick.csv)")
    p.add_argument("--pairs", type=int, default=300, help="parallel pairs per cell")
    args = p.parse_args()

    import numpy as np
    from scipy.stats import spearmanr

    from xlviz.analysis.reports import run_alignment
    from xlviz.training.verdicts import is_degenerate
    from xlviz.transfer.sweep import Sweep
    from xlviz.transfer.sweep import setting_label

    sweep = Sweep(args.sweep)
    out_rows: list[dict] = []
    for cell in sweep.cells():
        run = sweep.cell_run(cell)
        if not run.exists() or run.status().get("state") != "completed":
            print(f"{cell.name}: not completed, skipped")
            continue
        results = run.results()
        en = {r["system"]: r for r in results if r["language"] == "en" and not is_degenerate(r)}
        for l2 in dict.fromkeys(r["language"] for r in results if r["language"] != "en"):
            report = run_alignment(run.path, l2, limit=args.pairs, center=True)  # centred: the Alignment page's retrieval
            qa = {r["system"]: r for r in results if r["language"] == l2 and not is_degenerate(r)}
            for row in report["rows"]:
                system = row["system"].rsplit(" · ", 1)[-1]
                if system not in qa or system not in en:
                    continue
                out_rows.append({"cell": cell.name, "setting": setting_label(cell), "seed": cell.config.get("seed"),
                                 "language": l2, "system": system, "layer": row["layer"],
                                 "word_translation": _mean(row.get("word_translation_a_to_b"), row.get("word_translation_b_to_a")), "retrieval": (row["retrieval_a_to_b"] + row["retrieval_b_to_a"]) / 2,
                                 "qa_f1": qa[system]["f1"], "qa_em": qa[system]["exact_match"],
                                 "qa_ratio": qa[system]["f1"] / en[system]["f1"]})
            print(f"{cell.name} {l2}: {len(report['rows'])} rows")
    if not out_rows:
        raise SystemExit("no completed cell")
    out = Path(args.out or Path(args.sweep) / "sweep" / "yardstick.csv")
    with out.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(out_rows[0]))
        w.writeheader()
        w.writerows(out_rows)
    print(f"wrote {out} ({len(out_rows)} rows)")

    # one point per (cell, system): alignment at the embedding layer (Deshpande et al.'s word
    # embedding alignment) and at the best layer, against the QA transfer ratio
    points: dict[tuple[str, str], dict] = {}
    for r in out_rows:
        pt = points.setdefault((r["cell"], r["system"]), {"setting": r["setting"], "ratio": r["qa_ratio"], "layers": {}})
        pt["layers"][r["layer"]] = r
    print("\n| measure | systems | points | Spearman rho | p |\n|---|---|---|---|---|")
    for measure, pick in (("word translation, embedding layer", lambda L: L[min(L)]["word_translation"]),
                          ("word translation, best layer", lambda L: _best(L, "word_translation")),
                          ("sentence retrieval, best layer", lambda L: _best(L, "retrieval"))):
        for systems in [None] + [(name,) for name in sorted({system for _, system in points})]:  # all, then each system
            xs, ys = [], []
            for (cell, system), pt in points.items():
                if systems is not None and system not in systems:
                    continue
                x = pick(pt["layers"])
                if x is not None and not np.isnan(x):
                    xs.append(x)
                    ys.append(pt["ratio"])
            if len(xs) > 2:
                rho, pval = spearmanr(xs, ys)
                print(f"| {measure} | {'all' if systems is None else ', '.join(systems)} | {len(xs)} | {rho:.2f} | {pval:.1g} |")

    # per setting and system: mean over seeds of the same measures (the table beside the papers')
    print("\n| setting | system | seeds | word translation (layer 0) | word translation (best) | retrieval (best) | QA F1 ratio |\n|---|---|---|---|---|---|---|")
    groups: dict[tuple[str, str], list[dict]] = {}
    for (cell, system), pt in points.items():
        groups.setdefault((pt["setting"], system), []).append(pt)
    for (setting, system), pts in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        def mean(f):
            vals = [f(pt["layers"]) for pt in pts]
            vals = [v for v in vals if v is not None]
            return float(np.mean(vals)) if vals else float("nan")
        wt0 = mean(lambda L: L[min(L)]["word_translation"])
        wtb = mean(lambda L: _best(L, "word_translation"))
        ret = mean(lambda L: _best(L, "retrieval"))
        print(f"| {setting} | {system} | {len(pts)} | {wt0:.2f} | {wtb:.2f} | {ret:.2f} | {np.mean([pt['ratio'] for pt in pts]):.2f} |")


if __name__ == "__main__":
    main()
