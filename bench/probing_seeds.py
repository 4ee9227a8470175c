"""Probing over seeds: the rows of several ``xlviz analyse probing --out FILE`` results (one run
per seed) as one table, mean over seeds with its intervals.

Why: one seed of a probe says nothing about the seed-to-seed spread, which on the bench is
large (a body that did or did not learn agreement). Rows are matched by what they are, not by
run: the model label without its run prefix (``L1 model``, ``monotrans-into-l1 (sov body)``),
the language and the category (agreement) or layer (word in context).

- Agreement: accuracy over the scored pairs; ``[seeds]`` is the Student-t interval over the
  seeds' accuracies (cut to 0-100: with three seeds that disagree it reaches past the scale), ``[seeds+pairs]`` the t over seeds widened by
  the shared test pairs' own sampling variance (``xlviz.evaluation.seeds.seeds_paragraphs_interval``), coverage beside. A seed whose model the analysis refused
  (built on a degenerate stage, listed under ``degenerate``) counts as "degenerate", not as a number.
- Word in context: cross-validated accuracy per layer (mean over seeds [seeds]) and Spearman.

    python bench/probing_seeds.py seed0.json seed1.json seed2.json [--markdown]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from xlviz.evaluation.seeds import seeds_paragraphs_interval  # noqa: E402
from xlviz.evaluation.uncertainty import seed_interval  # noqa: E402


def label(model: str) -> str:
    """``RUN · monotrans-into-l1 (sov body)`` -> ``monotrans-into-l1 (sov body)``."""
    return model.split(" · ", 1)[1] if " · " in model else model


def agreement_table(results: list[dict]) -> list[dict]:
    """One row per (model, language, category 'all'), over the results (one per seed)."""
    keyed: dict[tuple[str, str, str], list[dict]] = {}
    for res in results:
        for row in res["agreement"]:
            if row["category"] != "all":
                continue
            items = [it for it in res["agreement_items"].get(f"{row['model']}|{row['language']}", []) if it.get("covered")]
            keyed.setdefault((label(row["model"]), row["language"], row["role"]), []).append({**row, "items": items})
    refused = refused_counts(results)
    out = []
    for (model, lang, role), rows in keyed.items():
        accs = [100 * r["accuracy"] for r in rows]
        seeds = seed_interval(accs)
        runs = [([100.0 * bool(it["correct"]) for it in r["items"]], [it["id"] for it in r["items"]])  # the analysis's own verdict per pair
                for r in rows if r["items"]]
        # seeds + test pairs (a calibrated interval; docs/methods.md "Uncertainty"); all seeds' items, 2 seeds or more
        both = seeds_paragraphs_interval(runs) if len(runs) == len(rows) >= 2 else None
        out.append({"model": model, "language": lang, "role": role, "seeds": len(rows), "accuracy": seeds.mean,
                    "seeds_low": max(0.0, seeds.low), "seeds_high": min(100.0, seeds.high), "per_seed": accs,
                    "sp_low": max(0.0, both.low) if both else None, "sp_high": min(100.0, both.high) if both else None,
                    "coverage": min(100 * r["coverage"] for r in rows), "refused": refused.get((model, lang), 0)})
    return out


def refused_counts(results: list[dict]) -> dict[tuple[str, str], int]:
    """{(model, language): seeds where the model was refused}: built on a degenerate stage, the
    analysis lists it under ``degenerate`` instead of probing it (no result at that seed)."""
    out: dict[tuple[str, str], int] = {}
    for res in results:
        for r in res.get("degenerate", []):
            key = (label(r["model"]), r["language"])
            out[key] = out.get(key, 0) + 1
    return out


def wic_table(results: list[dict]) -> list[dict]:
    keyed: dict[tuple[str, str, int], list[dict]] = {}
    for res in results:
        for row in res["wic"]:
            keyed.setdefault((label(row["model"]), row["language"], row["layer"]), []).append(row)
    out = []
    for (model, lang, layer), rows in keyed.items():
        acc = seed_interval([100 * r["accuracy"] for r in rows])
        rho = seed_interval([r["spearman"] for r in rows])
        out.append({"model": model, "language": lang, "layer": layer, "seeds": len(rows), "accuracy": acc.mean,
                    "low": max(0.0, acc.low), "high": min(100.0, acc.high), "per_seed": [100 * r["accuracy"] for r in rows],
                    "majority": 100 * sum(r["majority"] for r in rows) / len(rows), "spearman": rho.mean})
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("results", nargs="+", help="JSON files written by `xlviz analyse probing --out`")
    args = p.parse_args(argv)
    results = [json.loads(Path(f).read_text()) for f in args.results]
    print("| model | data | role | seeds | agreement (%) [seeds] | [seeds+pairs] | per seed | coverage |")
    print("|---|---|---|---|---|---|---|---|")
    for r in agreement_table(results):
        two = f"[{r['sp_low']:.1f}, {r['sp_high']:.1f}]" if r["sp_low"] is not None else "—"
        print(f"| {r['model']} | {r['language']} | {r['role']} | {r['seeds']} | {r['accuracy']:.1f} "
              f"[{r['seeds_low']:.1f}, {r['seeds_high']:.1f}] | {two} | "
              f"{', '.join([f'{a:.1f}' for a in r['per_seed']] + ['degenerate'] * r['refused'])} | "
              f"{r['coverage']:.0f}% |")
    probed = {(r["model"], r["language"]) for r in agreement_table(results)}
    for (model, lang), n in refused_counts(results).items():
        if (model, lang) not in probed:
            print(f"| {model} | {lang} | — | 0 | degenerate at every seed ({n}) | — | — | — |")
    print()
    print("| model (English pairs) | layer | seeds | WiC accuracy (%) [seeds] | per seed | majority | Spearman |")
    print("|---|---|---|---|---|---|---|")
    for r in wic_table(results):
        print(f"| {r['model']} | {r['layer']} | {r['seeds']} | {r['accuracy']:.1f} [{r['low']:.1f}, {r['high']:.1f}] | "
              f"{', '.join(f'{a:.1f}' for a in r['per_seed'])} | {r['majority']:.1f} | {r['spearman']:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
