"""What active forgetting and WECHSEL cost against MONOTRANS, measured in one run.

Runs ``monotrans`` and the new systems (``monotrans+forgetting``, ``monotrans+wechsel``,
``wechsel-only``, ``monotrans+forgetting+wechsel``) in one run folder, one stage at a time
(workers 1), times every stage, and prints each system's cost as the sum of the stages it
lists (shared stages, such as the world or MONOTRANS's step 1, count for every system that
lists them) and its ratio to MONOTRANS's; scoring (s4_) is left out. WECHSEL's
initialisation is the ``wechsel_vectors`` stage plus the row mixing at the start of step 2.

    .venv/bin/python bench/bench_plastic.py                 # the tiny smoke size (seconds)
    .venv/bin/python bench/bench_plastic.py --size default  # the bench's defaults (minutes)
    .venv/bin/python bench/bench_plastic.py --overlap       # FOCUS's anchors: tokens L1 and each L2 share
    .venv/bin/python bench/bench_plastic.py --runs SWEEP     # the same sums from finished runs' stage times

``--runs`` reads the wall time each run recorded for each stage (``status.json``'s
``stage_seconds``) and prints each system's cost and ratio per run, then the median ratio over the runs. Stages that
ran at the same time as others (``workers`` > 1) shared the cores, so those ratios include the
contention; the one-stage-at-a-time measurement above does not.

The run folder goes under $XLVIZ_CHECKPOINTS (or a temporary folder) and is removed after.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from xlviz.methods import method_of
from xlviz.transfer.config import TransferConfig
from xlviz.transfer.pipeline import Pipeline, StageKind

SYSTEMS = ["monotrans", "monotrans+forgetting", "monotrans+wechsel", "wechsel-only", "monotrans+forgetting+wechsel"]
TINY = {
    "model_size": "tiny", "vocab_size": 200, "batch_size": 8, "mlm_batch_size": 8, "pretrain_steps": 40, "transfer_steps": 10,
    "finetune_steps": 4, "log_every": 10, "mixed_precision": "no",
    "world": {"corpus_documents": 120, "qa_train_paragraphs": 20, "qa_dev_paragraphs": 3, "qa_test_paragraphs": 4,
              "parallel_pairs": 20, "agreement_pairs": 9, "sense_pairs": 6, "parallel_train_pairs": 40},
}


class TimedPipeline(Pipeline):
    """A pipeline that records each stage's wall time."""

    times: dict[str, float]

    def execute(self, stage: str, index: int) -> None:
        t0 = time.perf_counter()
        super().execute(stage, index)
        self.times[stage] = time.perf_counter() - t0


def overlap(seed: int) -> None:
    """How many tokens each L2's vocabulary shares with L1's (specials left out), names off and
    on: the anchors FOCUS would build every other row from (docs/methods.md, FOCUS)."""
    from xlviz.data.tokenization import train_tokenizer
    from xlviz.data.world import World, WorldConfig

    cfg = TransferConfig()
    for shared in (False, True):
        world = World(WorldConfig(shared_names=shared, seed=seed))
        toks = {lang: train_tokenizer(world.corpus(lang), cfg.vocab_size, algorithm=cfg.tokenizer, model_max_length=cfg.qa_max_length)
                for lang in world.languages}
        v1 = set(toks[world.l1].get_vocab()) - set(toks[world.l1].all_special_tokens)
        for l2 in world.l2s:
            v2 = set(toks[l2].get_vocab()) - set(toks[l2].all_special_tokens)
            common = sorted(v1 & v2)
            longer = [t for t in common if len(t.removeprefix("##")) > 1]
            print(f"shared_names {str(shared):5s} {l2}: {len(common)} of {len(v2)} tokens shared, {len(longer)} longer than one "
                  f"character: {' '.join(longer)}")


def from_runs(folders: list[Path]) -> None:
    """Each system's cost (its stages' recorded seconds summed) and its ratio to MONOTRANS's, per run."""
    import statistics

    from xlviz.runs import Run, is_sweep_folder, sweep_cells
    from xlviz.transfer.pipeline import Pipeline

    if len(folders) == 1 and is_sweep_folder(folders[0]):
        folders = sweep_cells(folders[0])
    ratios: dict[str, list[float]] = {}
    for folder in folders:
        pipe = Pipeline.resume(folder)
        times = Run(folder).stage_seconds()
        systems = [s for s in SYSTEMS if s in pipe.cfg.systems]
        stages = {s: [st.name for st in method_of(s).stages(pipe, s)] for s in systems}
        missing = sorted({n for names in stages.values() for n in names} - set(times))
        if missing:
            print(f"{folder}: no recorded time for {', '.join(missing)}; skipped")
            continue
        cost = {s: sum(times[n] for n in names) for s, names in stages.items()}
        print(f"{folder.name} (seed {pipe.cfg.seed}, workers {pipe.cfg.workers}):")
        for s in systems:
            ratios.setdefault(s, []).append(cost[s] / cost["monotrans"])
            print(f"  {s:30s} {cost[s]:8.0f} s {cost[s] / cost['monotrans']:6.2f}x")
        if "wechsel_vectors" in times and "monotrans+wechsel" in cost:
            print(f"  wechsel_vectors {times['wechsel_vectors']:.0f} s = {times['wechsel_vectors'] / cost['monotrans+wechsel']:.0%} of monotrans+wechsel's stages")
    print("median ratio to monotrans over the runs:")
    for s, r in ratios.items():
        print(f"  {s:30s} {statistics.median(r):.2f}x  (runs: {', '.join(f'{x:.2f}' for x in r)})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", choices=["tiny", "default"], default="tiny")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--overlap", action="store_true", help="only count the tokens L1 and each L2 share")
    ap.add_argument("--runs", nargs="+", type=Path, help="finished run folders (or one sweep folder): their recorded stage times")
    args = ap.parse_args()
    if args.runs:
        return from_runs(args.runs)
    if args.overlap:
        return overlap(args.seed)
    settings = (TINY if args.size == "tiny" else {}) | {"methods": SYSTEMS, "seed": args.seed, "workers": 1}
    cfg = TransferConfig.from_dict(settings)
    root = Path(tempfile.mkdtemp(dir=os.environ.get("XLVIZ_CHECKPOINTS")))
    try:
        run = TimedPipeline(cfg, root / "run")
        run.times = {}
        run.run_all()
        per_system = {s: [st.name for st in method_of(s).stages(run, s)] for s in SYSTEMS}
        cost = {s: sum(run.times[n] for n in names) for s, names in per_system.items()}
        print(f"size {args.size}: pretrain {cfg.pretrain_steps}, transfer {cfg.transfer_steps}, finetune {cfg.finetune_steps} steps, "
              f"model {cfg.model_size}")
        print(f"{'stage':34s} {'seconds':>8s}")
        for name, t in run.times.items():
            if run.planned[name].kind is not StageKind.SCORE:
                print(f"{name:34s} {t:8.2f}")
        print(f"\n{'system':30s} {'seconds':>8s} {'vs monotrans':>13s}")
        for s in SYSTEMS:
            print(f"{s:30s} {cost[s]:8.2f} {cost[s] / cost['monotrans']:12.2f}x")
        init = run.times.get("wechsel_vectors", 0.0)
        print(f"\nWECHSEL's static spaces and neighbour tables (wechsel_vectors): {init:.2f} s, "
              f"{init / cost['monotrans+wechsel']:.0%} of monotrans+wechsel's stages")
        print(json.dumps({"size": args.size, "stages": run.times, "systems": cost}, indent=None))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
