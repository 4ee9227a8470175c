"""Step time of a long-block MLM batch against a short-block one with as many tokens.

Why: ``long_block_share`` (:func:`xlviz.training.mlm.mlm_batches`) replaces a share of step 1's
128 x 24-token batches by 32 x 96-token ones, so that the position embeddings QA inputs reach
are trained. Attention grows with the block length, so a long step costs more; this measures
how much, with xlviz's training step (masked-only loss, bf16 weights where the CPU multiplies
bf16 natively, fused AdamW) on the demo's model. Short and long steps are interleaved round by
round in one process, so machine load hits both alike; the table gives the median ratio.

    python bench/bench_long_blocks.py [--size small] [--batch 128] [--block 24] [--long 96] [--rounds 7]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
from transformers import BertForMaskedLM

from xlviz.data.tokenization import train_tokenizer
from xlviz.data.world import World, WorldConfig
from xlviz.models.monotrans import bert_config
from xlviz.training.loop import Bf16Weights, make_optimizer, resolve_mixed_precision
from xlviz.training.mlm import MaskedOnlyMLM, iter_batches, iter_blocks, mask_tokens

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_mlm import update  # noqa: E402  (one optimizer step, through the bf16 masters)


def batches(corpus, tok, block: int, batch: int, n: int) -> list[dict]:
    gen = torch.Generator().manual_seed(0)
    out = []
    for ids in iter_batches(iter_blocks(lambda: corpus, tok, block, seed=0), batch):
        inputs, labels = mask_tokens(ids, mask_id=tok.mask_token_id, vocab_size=len(tok), generator=gen)
        out.append({"input_ids": inputs, "labels": labels})
        if len(out) == n:
            return out
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", default="small")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--block", type=int, default=24)
    p.add_argument("--long", type=int, default=96)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--rounds", type=int, default=7)
    args = p.parse_args()
    corpus = World(WorldConfig(seed=0, corpus_documents=1500)).corpus("en")
    tok = train_tokenizer(corpus, 400)
    long_batch = max(1, round(args.batch * args.block / args.long))
    data = {"short": batches(corpus, tok, args.block, args.batch, args.steps),
            "long": batches(corpus, tok, args.long, long_batch, args.steps)}
    torch.manual_seed(0)
    wrapped = MaskedOnlyMLM(BertForMaskedLM(bert_config(len(tok), args.size, max_position_embeddings=args.long)).train())
    bf16 = resolve_mixed_precision("auto") == "bf16"
    weights = Bf16Weights(wrapped) if bf16 else None
    opt = make_optimizer(weights or wrapped, 1e-4, 0.0)

    def step(batch: dict) -> None:
        update(wrapped(**batch), opt, weights)

    for kind in data:  # warm-up: allocator, oneDNN kernels
        for b in data[kind][:3]:
            step(b)
    times: dict[str, list[float]] = {k: [] for k in data}
    for _ in range(args.rounds):
        for kind, bs in data.items():
            t0 = time.perf_counter()
            for b in bs:
                step(b)
            times[kind].append((time.perf_counter() - t0) / len(bs))
    ratios = sorted(lg / sh for lg, sh in zip(times["long"], times["short"]))
    print(f"MLM step, model={args.size}, {'bf16' if bf16 else 'float32'}, torch threads={torch.get_num_threads()}")
    for kind, shape in (("short", f"{args.batch} x {args.block}"), ("long", f"{long_batch} x {args.long}")):
        print(f"{kind:<6} {shape:>9} tokens: {statistics.median(times[kind]):.3f} s/step")
    print(f"long / short step time: median {statistics.median(ratios):.2f}x (range {ratios[0]:.2f}-{ratios[-1]:.2f}x)")


if __name__ == "__main__":
    main()
