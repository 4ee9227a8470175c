"""Plateau census: how often does each kind of pre-training stage end on the unigram plateau?

Runs the pre-training stages of a transfer config (the demo's by default) at several seeds,
stopping each run after its last pre-training stage, and tabulates per stage: final MLM loss,
the unigram and bigram entropies of its targets, the gap, the verdict (docs/methods.md, "Stage
verdicts") and its time; then per stage kind, how many of the seeds were degenerate.

    python bench/plateau_census.py --seeds 0-9 --methods monotrans,jointpair-disjoint,mono-l2 \
        --mixed-precision no --out /tmp/census

Full size (the demo's budgets, 10 seeds) takes hours on a 2-core CPU. ``--override`` takes JSON
merged into the config, for a smoke test at a tiny size:

    python bench/plateau_census.py --seeds 0 --override '{"model_size": "tiny", "pretrain_steps": 20,
        "mlm_batch_size": 16, "world": {"corpus_documents": 120}}'
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

from xlviz.transfer.config import DEMO_METHODS, TransferConfig
from xlviz.transfer.pipeline import Pipeline


def seeds_of(text: str) -> list[int]:
    """``0-9`` or ``0,3,5``."""
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi) + 1)) if hi else [int(lo)]
    return out


def stage_kind(stage: str, l2s: list[str]) -> str:
    """The stage's kind across languages: ``s1_jointpair-disjoint-svo`` -> ``s1_jointpair-disjoint-<l2>``."""
    for l2 in l2s:
        stage = re.sub(rf"-{re.escape(l2)}$", "-<l2>", stage)
    return stage


def census_run(cfg: TransferConfig, run_dir: Path) -> list[dict]:
    """Pre-train every stage of ``cfg`` up to its last pre-training stage; one row per judged stage."""
    pipeline = Pipeline(cfg, run_dir)
    pretrain = [s for s, st in pipeline.stage_table().items() if st.phase == "pretrain"]
    if not pretrain:
        raise SystemExit("the config has no pre-training stage")
    pipeline.stop_after = pretrain[-1]
    t0 = time.time()
    with pipeline.run.writer_lock():
        pipeline.run_all()
    elapsed = {}
    for m in pipeline.run.metrics():
        elapsed[m["stage"]] = m.get("elapsed")
    rows = []
    for stage, v in pipeline.run.verdicts().items():
        if v.get("kind") != "mlm" or stage not in pretrain:
            continue
        rows.append({"seed": cfg.seed, "precision": str(pipeline.acc.mixed_precision).replace("no", "float32"), "stage": stage,
                     "kind": stage_kind(stage, [l.code for l in cfg.world.languages]), "loss": v["loss"],
                     "unigram": v["unigram_entropy"], "bigram": v["bigram_entropy"],
                     "gap": round(v["unigram_entropy"] - v["loss"], 3), "verdict": v["verdict"], "seconds": elapsed.get(stage)})
    print(f"seed {cfg.seed}: {len(rows)} pre-training stages in {time.time() - t0:.0f} s", flush=True)
    return rows


def tables(rows: list[dict]) -> str:
    """Markdown: every stage, then per kind and precision the degenerate count."""
    head = ["stage", "precision", "seed", "loss", "unigram", "bigram", "gap (unigram - loss)", "verdict", "s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in sorted(rows, key=lambda r: (r["kind"], r["precision"], r["seed"], r["stage"])):
        lines.append(f"| {r['stage']} | {r['precision']} | {r['seed']} | {r['loss']:.3f} | {r['unigram']:.3f} | {r['bigram']:.3f} | "
                     f"{r['gap']:.3f} | {r['verdict']} | {r['seconds'] if r['seconds'] is not None else ''} |")
    lines += ["", "| kind | precision | stages | degenerate | mean loss | mean unigram |", "|---|---|---|---|---|---|"]
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["kind"], r["precision"]), []).append(r)
    for (kind, precision), g in sorted(groups.items()):
        bad = sum(r["verdict"] == "degenerate" for r in g)
        lines.append(f"| {kind} | {precision} | {len(g)} | {bad} | {sum(r['loss'] for r in g) / len(g):.3f} | "
                     f"{sum(r['unigram'] for r in g) / len(g):.3f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", default="0-9", help="e.g. 0-9 or 0,1,2")
    p.add_argument("--methods", default=",".join(DEMO_METHODS + ["mono-l2"]))
    p.add_argument("--mixed-precision", default="auto")
    p.add_argument("--override", default="{}", help="JSON merged into the config (e.g. a tiny size for a smoke test)")
    p.add_argument("--out", default="checkpoints/plateau-census", help="folder for the runs and census.json")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    for seed in seeds_of(args.seeds):
        base = {"name": "census", "seed": seed, "methods": args.methods.split(","), "mixed_precision": args.mixed_precision,
                "workers": 0}
        override = json.loads(args.override)
        world = {**override.pop("world", {}), "seed": seed}
        cfg = TransferConfig.from_dict({**base, **override, "world": world})
        rows += census_run(cfg, out / f"seed{seed}-{cfg.mixed_precision}")
        (out / "census.json").write_text(json.dumps(rows, indent=1))
    print(tables(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
