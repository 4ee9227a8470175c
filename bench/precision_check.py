"""Mixed precision end to end: ``transfer --source files`` (steps 1-2 + alignment) and ``finetune-qa``
with ``--mixed-precision no|bf16|fp16`` on the generated world's corpora written to files (no
shared data needed), each in its own process (accelerate's state is per process). Prints one
line per run: device, the precision actually used (fp16 falls back to no on a CPU), loss
first/last, seconds. Meant for a GPU machine; on a CPU it checks the bf16-weights path (float32 master weights).

    python bench/precision_check.py [--steps 200] [--out /tmp/xlviz-precision-check]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--out", default="/tmp/xlviz-precision-check")
    p.add_argument("--precisions", default="no,bf16,fp16")
    args = p.parse_args()
    from tests.test_real_transfer import write_world_corpora, write_world_qa
    from tests.tiny_models import make_tiny

    out = Path(args.out)
    files = write_world_corpora(out / "corpora", documents=1500)
    qa = write_world_qa(out / "qa", paragraphs=40)
    env = dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", XLVIZ_CHECKPOINTS=str(out.resolve()))
    bert = make_tiny("bert", out / "bert-init", task="mlm", hidden_size=128, num_hidden_layers=4, num_attention_heads=4,
                     intermediate_size=512, max_position_embeddings=256)
    rows = []
    for i, mp in enumerate(args.precisions.split(",")):  # a precision named twice: is it deterministic?
        for name, argv in (
            ("transfer-corpus", ["transfer", "--source", "files", "--l1", "en", "--l2", "svo", "--l1-corpus", str(files["en"]),
                                 "--l2-corpus", str(files["svo"]), "--parallel", str(files["par_en"]), str(files["par_svo"]),
                                 "--model-size", "small", "--vocab-size", "600", "--mlm-batch-size", "64", "--block-size", "64",
                                 "--pretrain-steps", str(args.steps), "--transfer-steps", str(args.steps), "--log-every", "10"]),
            ("finetune-qa", ["finetune-qa", "--model", str(bert), "--train", str(qa / "qa.en.json"), "--train-paragraphs", "30",
                             "--eval-dir", str(qa), "--steps", str(args.steps), "--batch-size", "32", "--max-length", "256",
                             "--doc-stride", "64", "--lr", "3e-4", "--log-every", "10"]),
        ):
            run = out / f"{name}-{mp}-{i}"
            t0 = time.time()
            proc = subprocess.run([sys.executable, "-m", "xlviz", *argv, "--mixed-precision", mp, "--run-dir", str(run)],
                                  env=env, capture_output=True, text=True)
            seconds = time.time() - t0
            if proc.returncode:
                print(f"{name} {mp}: FAILED\n{proc.stderr[-3000:]}", flush=True)
                rows.append({"command": name, "mixed_precision": mp, "failed": proc.stderr[-500:]})
                continue
            status = json.loads((run / "status.json").read_text())
            losses: dict[str, list[float]] = {}
            for line in (run / "metrics.jsonl").read_text().splitlines():
                m = json.loads(line)
                losses.setdefault(m["stage"], []).append(m["loss"])
            results = json.loads((run / "results.json").read_text()) if (run / "results.json").exists() else []
            row = {"command": name, "mixed_precision": status.get("mixed_precision"), "device": status.get("device"),
                   "seconds": round(seconds, 1), "loss": {k: [round(v[0], 5), round(v[-1], 5)] for k, v in losses.items()},
                   "results": results}
            rows.append(row)
            print(json.dumps(row), flush=True)
    (out / "precision_check.json").write_text(json.dumps(rows, indent=2))
    return 1 if any("failed" in r for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
