"""Stages at once: why a run trains independent stages in worker processes, and what it gains.

Two tables, each against a baseline measured side by side in the same invocation:

1. The demo's masked-LM training step (xlviz's bf16 masked-only step, the default ``small``
   model, 128 x 24-token blocks): steps/s of one process on 1 thread (baseline), one process
   on every core's thread, and N processes on 1 thread each running at once (their summed
   steps/s). Interleaved for ``--rounds`` rounds; medians.
2. A bench run (the demo's systems on the generated world at ``--scale`` of the demo's step
   budgets) with ``workers`` 1 (baseline: one stage after the other, on every core) and
   ``workers`` N: wall time and the ratio.

    python bench/bench_workers.py [--rounds 3] [--steps 60] [--scale 0.25] [--methods monotrans,floor,...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_mlm import cpu_name, make_batches, runner  # noqa: E402


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def steps_per_s(threads: int, steps: int) -> float:
    """Steps/s of the demo's MLM step in this process on ``threads`` threads (after 5 warm-up steps)."""
    torch.set_num_threads(threads)
    args = argparse.Namespace(size="small", vocab=400, batch=128, block=24, steps=steps + 5, model_vocab=0)
    batches, vocab, _ = make_batches(args)
    _, step = runner("xlviz bf16", vocab, args, masked_only=True, precision="bf16")
    for b in batches[:5]:
        step(b)
    t = time.perf_counter()
    for b in batches[5:]:
        step(b)
    return steps / (time.perf_counter() - t)


def child(threads: int, steps: int) -> subprocess.Popen:
    code = f"import sys; sys.path.insert(0, {str(Path(__file__).resolve().parent)!r}); import bench_workers as b; print(b.steps_per_s({threads}, {steps}))"
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": str(threads)})


def step_table(rounds: int, steps: int, n: int) -> list[tuple[str, float, float]]:
    rows: dict[str, list[float]] = {"1 process x 1 thread (baseline)": [], f"1 process x {n} threads": [],
                                    f"{n} processes x 1 thread at once (sum)": []}
    for _ in range(rounds):
        for name, threads, procs in (("1 process x 1 thread (baseline)", 1, 1), (f"1 process x {n} threads", n, 1),
                                     (f"{n} processes x 1 thread at once (sum)", 1, n)):
            ps = [child(threads, steps) for _ in range(procs)]
            rows[name].append(sum(float(p.communicate()[0].strip().splitlines()[-1]) for p in ps))
    base = statistics.median(rows["1 process x 1 thread (baseline)"])
    return [(name, statistics.median(v), statistics.median(v) / base) for name, v in rows.items()]


def run_time(workers: int, args, root: Path) -> tuple[float, dict]:
    scale = lambda v: max(1, round(v * args.scale))  # noqa: E731
    cmd = [sys.executable, "-m", "xlviz", "transfer", "--methods", args.methods, "--seed", "0", "--workers", str(workers),
           "--pretrain-steps", str(scale(1000)), "--transfer-steps", str(scale(320)), "--finetune-steps", str(scale(600)),
           "--run-dir", str(root / f"workers{workers}")]
    t = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "XLVIZ_CHECKPOINTS": str(root)})
    wall = time.perf_counter() - t
    if out.returncode:
        raise SystemExit(out.stderr[-3000:])
    rows = json.loads((root / f"workers{workers}" / "results.json").read_text())
    return wall, {(r["system"], r["language"]): r["f1"] for r in rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--workers", type=int, default=min(cores(), 4))
    ap.add_argument("--scale", type=float, default=0.25, help="share of the demo's step budgets in the bench run")
    ap.add_argument("--methods", default="monotrans,floor,dictionary-oracle,jointpair-disjoint")
    ap.add_argument("--skip-run", action="store_true", help="only the step table")
    args = ap.parse_args()
    n = args.workers
    print(f"# {cpu_name()}, {cores()} cores; torch {torch.__version__}\n")
    print(f"## The demo's MLM step (small model, bf16, 128 x 24 tokens), {args.rounds} rounds of {args.steps} steps\n")
    print("| configuration | steps/s | vs 1 thread |\n|---|---|---|")
    for name, sps, ratio in step_table(args.rounds, args.steps, n):
        print(f"| {name} | {sps:.2f} | {ratio:.2f}x |")
    if args.skip_run:
        return
    print(f"\n## A bench run: {args.methods} at {args.scale:g} of the demo's steps (seed 0)\n")
    with tempfile.TemporaryDirectory() as tmp:
        one, f1_one = run_time(1, args, Path(tmp))
        many, f1_many = run_time(n, args, Path(tmp))
    print(f"| workers | wall s | vs workers 1 |\n|---|---|---|\n| 1 (baseline; {cores()} threads) | {one:.0f} | 1.00x |\n"
          f"| {n} ({max(1, cores() // n)} thread each) | {many:.0f} | {one / many:.2f}x faster |")
    same = sum(abs(f1_one[k] - f1_many.get(k, -1)) < 1e-9 for k in f1_one)
    print(f"\nF1 equal in {same} of {len(f1_one)} rows (a stage's bytes depend on its thread count; "
          "with the same threads they are equal, tests/test_stage_workers.py)")


if __name__ == "__main__":
    main()
