"""MONOTRANS on real text, timed on this machine: Multi30k en -> de, then an XQuAD slice.

1. ``configs/multi30k-en-de.json`` through ``xlviz transfer --config``: pre-train a small BERT on
   the English task-2 captions, learn German embeddings on the independent German task-2
   captions, sentence retrieval per layer on the parallel task-1 validation set (1,014 pairs)
   for the transferred German embeddings vs the floor (untrained German embeddings).
2. (``--qa``) ``xlviz finetune-qa`` on that English model: fine-tune on ``--qa-paragraphs``
   paragraphs of xquad.en.json, evaluate on the other paragraphs in every XQuAD language.

Prints the per-layer table, the QA table and the time of every stage; ``--json`` writes all of
it. The machine is shared: ``--threads 1`` (the default) is 3-5x faster per step than two
threads when other jobs load both cores (measured on this machine), and keeps the bench from
starving its neighbours.

    nohup python bench/bench_multi30k.py --qa --json /tmp/bench_multi30k.json > /tmp/bench_multi30k.log 2>&1 &
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def stage_times(log: Path) -> dict[str, float]:
    """Seconds per stage from the run log's ``stage i/n: name`` lines."""
    marks = []
    for line in log.read_text().splitlines():
        m = re.match(r"^\[(.+?)\] (?:stage \d+/\d+: (\S+)|(completed|failed|cancelled))", line)
        if m:
            marks.append((dt.datetime.fromisoformat(m.group(1)), m.group(2) or "end"))
    return {name: round((marks[i + 1][0] - t).total_seconds(), 1) for i, (t, name) in enumerate(marks[:-1]) if name != "end"}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default=str(REPO / "configs" / "multi30k-en-de.json"))
    p.add_argument("--out", default="/tmp/xlviz-bench-multi30k", help="run folders go here (not the repo)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--qa", action="store_true", help="also the XQuAD slice (finetune-qa on the English model)")
    p.add_argument("--qa-paragraphs", type=int, default=48)
    p.add_argument("--qa-steps", type=int, default=250)
    p.add_argument("--json", help="write the numbers here")
    p.add_argument("--override", nargs="*", default=[], metavar="KEY=VALUE", help="config overrides (JSON values)")
    args = p.parse_args()

    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import torch

    torch.set_num_threads(args.threads)
    from xlviz.io import read_json
    from xlviz.runs import Run
    from xlviz.transfer.config import TransferConfig
    from xlviz.transfer.pipeline import Pipeline
    from xlviz.transfer.qa import QAConfig, QAPipeline

    base = read_json(args.config, what="config")
    for item in args.override:
        key, _, value = item.partition("=")
        base[key] = json.loads(value)
    cfg = TransferConfig.from_dict(base, path=args.config)
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = Path(args.out)
    run_dir = out / f"{cfg.name}-{stamp}"
    report: dict = {
        "machine": {"cpus": os.cpu_count(), "threads": args.threads, "load_before": os.getloadavg(), "platform": platform.platform(),
                    "python": sys.version.split()[0], "torch": torch.__version__},
        "config": cfg.to_dict(), "run": str(run_dir),
    }
    t0 = time.time()
    Pipeline(cfg, run_dir).run_all()
    report["transfer_seconds"] = round(time.time() - t0, 1)
    run = Run(run_dir)
    report["stage_seconds"] = stage_times(run.log_path)
    report["alignment"] = json.loads((run_dir / "alignment.json").read_text())
    losses = {}
    for m in run.metrics():
        losses.setdefault(m["stage"], []).append(m["loss"])
    report["loss"] = {k: {"first": v[0], "last": v[-1]} for k, v in losses.items()}

    systems = report["alignment"]["systems"]
    print(f"\nMulti30k {cfg.data['l1']}->{cfg.data['l2']}: sentence retrieval on {report['alignment']['n_pairs']} parallel pairs "
          f"(chance {100 * report['alignment']['chance']:.2f}%), centred, percent")
    print(f"{'layer':>5} | {'monotrans en->de':>16} {'de->en':>6} {'top-10':>6} {'med.rank':>8} | "
          f"{'floor en->de':>12} {'de->en':>6} {'top-10':>6} {'med.rank':>8}")
    for mono, floor in zip(systems["monotrans"], systems["floor"]):
        cells = [f"{100 * x['l1_to_l2']:>{w}.1f} {100 * x['l2_to_l1']:>6.1f} {100 * x['top10']:>6.1f} {x['median_rank']:>8.1f}"
                 for x, w in ((mono, 16), (floor, 12))]
        print(f"{mono['layer']:>5} | {cells[0]} | {cells[1]}")
    print("stage seconds:", report["stage_seconds"], "total", report["transfer_seconds"])
    print("MLM loss first/last:", report["loss"])

    if args.qa:
        from xlviz.data.real import shared_data_dir

        xq = shared_data_dir() / "xquad"
        qa_cfg = QAConfig(
            name="xquad-slice", seed=cfg.seed, model=str(run_dir / "s1_pretrain"), system=f"{cfg.name}-s1",
            train=str(xq / "xquad.en.json"), train_paragraphs=args.qa_paragraphs, eval=[str(xq)], steps=args.qa_steps,
            lr=3e-4, batch_size=16, max_length=192, doc_stride=64, mixed_precision="no", log_every=25,
        )
        t1 = time.time()
        qa_dir = out / f"xquad-slice-{stamp}"
        rows = QAPipeline(qa_cfg, qa_dir).run_all()
        report["qa_seconds"] = round(time.time() - t1, 1)
        report["qa_stage_seconds"] = stage_times(Run(qa_dir).log_path)
        report["qa"] = rows
        report["qa_run"] = str(qa_dir)
        print(f"\nXQuAD slice: fine-tuned on {args.qa_paragraphs} paragraphs of xquad.en ({args.qa_steps} steps), "
              "evaluated on the other paragraphs")
        print(f"{'language':>8} {'EM':>6} {'F1':>6} {'questions':>9}")
        for r in sorted(rows, key=lambda r: (r["language"] != "en", r["language"])):
            print(f"{r['language']:>8} {r['exact_match']:>6.1f} {r['f1']:>6.1f} {r['n_questions']:>9}")
        print("QA seconds:", report["qa_seconds"], report["qa_stage_seconds"])
    report["load_after"] = os.getloadavg()
    report["total_seconds"] = round(time.time() - t0, 1)
    print(f"\ntotal {report['total_seconds']:.0f} s on {os.cpu_count()} cores, {args.threads} torch thread(s); "
          f"load average before {report['machine']['load_before'][0]:.1f}, after {report['load_after'][0]:.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
