"""Does step 1 still leave the unigram plateau with a share of full-length blocks?

Why: a small BERT left the plateau (MLM loss near the corpus's unigram entropy) only with many
short blocks per step (docs/world.md); ``long_block_share`` replaces a share of those steps by
full-length blocks so that every position QA reads is trained. This runs MONOTRANS's step 1 at
the default budget (the world, model, batch, steps and learning rate of a default config) for
each share given, one seed, and prints the final MLM loss (mean of the last logged values)
beside the unigram and bigram entropies of the corpus's tokens (nats, masked positions only:
non-special ids).

    python bench/plateau_long_blocks.py [--shares 0,0.1] [--seed 0] [--steps 1000] [--precision no]
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from collections import Counter
from pathlib import Path

from xlviz.transfer.config import TransferConfig
from xlviz.transfer.pipeline import Pipeline


def entropies(corpus, tok, n_special: int = 5) -> tuple[float, float]:
    """Unigram entropy H(w) and conditional bigram entropy H(w | previous) of the non-special
    tokens (nats), the losses of a model that reads no context / only the previous token."""
    uni, bi, prev_counts = Counter(), Counter(), Counter()
    for ids in tok(list(corpus), add_special_tokens=False)["input_ids"]:
        prev = None
        for i in ids:
            if i < n_special:
                continue
            uni[i] += 1
            if prev is not None:
                bi[prev, i] += 1
                prev_counts[prev] += 1
            prev = i
    n = sum(uni.values())
    h1 = -sum(c / n * math.log(c / n) for c in uni.values())
    m = sum(bi.values())
    h2 = -sum(c / m * math.log(c / prev_counts[p]) for (p, _), c in bi.items())
    return h1, h2


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shares", default="0,0.1")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=0, help="0: the default pretrain_steps")
    p.add_argument("--precision", default="no")
    args = p.parse_args()
    for share in [float(s) for s in args.shares.split(",")]:
        d = {"seed": args.seed, "methods": ["monotrans"], "long_block_share": share, "mixed_precision": args.precision, "workers": 1}
        if args.steps:
            d["pretrain_steps"] = args.steps
        cfg = TransferConfig.from_dict(d)
        with tempfile.TemporaryDirectory() as tmp:
            pipe = Pipeline(cfg, Path(tmp) / "run")
            pipe.run.path.mkdir(parents=True)
            pipe.run.write_config(cfg.to_dict())
            pipe.run_stage("world")
            t0 = time.perf_counter()
            pipe.run_stage("s1_pretrain")
            took = time.perf_counter() - t0
            rows = [json.loads(line) for line in pipe.run.metrics_path.read_text().splitlines() if line.strip()]
            logged = [(r["step"], r["loss"]) for r in rows if r.get("stage") == "s1_pretrain"]
            losses = [loss for _, loss in logged]
            h1, h2 = entropies(pipe.world.corpus(pipe.world.l1), pipe.tokenizer(pipe.world.l1))
        final = sum(losses[-5:]) / len(losses[-5:])
        left = next((step for step, loss in logged if loss < h1 - 0.3), None)  # first logged step clearly below the plateau
        print(json.dumps({"share": share, "seed": args.seed, "steps": cfg.pretrain_steps, "final_loss": round(final, 3),
                          "min_loss": round(min(losses), 3), "unigram_entropy": round(h1, 3), "bigram_entropy": round(h2, 3),
                          "off_plateau": final < h1 - 0.3, "left_plateau_at": left,
                          "seconds": round(took)}), flush=True)


if __name__ == "__main__":
    main()
