"""Sentence retrieval per layer on a run's held-out parallel pairs, before and after PPA.

Before: the starting model's encoders (``s1_<ppa_base>-<l2>/<lang>``, the jointpair slices);
after: the aligned ones (``s2_ppa-<l2>/<lang>``). Pooling ``mean`` (the Alignment page's
default) and ``cls`` (what PPA's MoCo trains). Retrieval is the mean of both directions, in %.

    PYTHONPATH=. python bench/ppa_retrieval.py RUN_DIR [--l2 sov] [--limit 1000]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from transformers import AutoModelForMaskedLM, AutoTokenizer

from xlviz.analysis.reports import system_alignment
from xlviz.data.parallel.world import world_data


def load(folder: Path):
    return AutoModelForMaskedLM.from_pretrained(folder, use_safetensors=True), AutoTokenizer.from_pretrained(folder)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run")
    p.add_argument("--l2", default="sov")
    p.add_argument("--limit", type=int, default=1000)
    p.add_argument("--json", help="also write the rows here")
    args = p.parse_args()
    run = Path(args.run)
    base = json.loads((run / "config.json").read_text()).get("ppa_base", "jointpair-disjoint")
    data = world_data(run, args.l2, args.limit)
    models = {"before": run / f"s1_{base}-{args.l2}", "after": run / f"s2_ppa-{args.l2}"}
    rows = []
    for pooling in ("mean", "cls"):
        for name, folder in models.items():
            (ma, ta), (mb, tb) = load(folder / "en"), load(folder / args.l2)
            for r in system_alignment(ma, ta, mb, tb, data, pooling=pooling, words=False):
                rows.append({"model": name, "pooling": pooling, "layer": r["layer"],
                             "retrieval": round(50 * (r["retrieval_a_to_b"] + r["retrieval_b_to_a"]), 1),
                             "en_to_l2": round(100 * r["retrieval_a_to_b"], 1), "l2_to_en": round(100 * r["retrieval_b_to_a"], 1)})
    layers = sorted({r["layer"] for r in rows})
    print(f"{data.source}: {len(data)} held-out pairs, retrieval % (mean of both directions) per layer (0 = embeddings)")
    print(f"{'model':<8} {'pooling':<8} " + " ".join(f"{f'L{l}':>6}" for l in layers))
    for pooling in ("mean", "cls"):
        for name in models:
            vals = {r["layer"]: r["retrieval"] for r in rows if r["model"] == name and r["pooling"] == pooling}
            print(f"{name:<8} {pooling:<8} " + " ".join(f"{vals[l]:>6.1f}" for l in layers))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
