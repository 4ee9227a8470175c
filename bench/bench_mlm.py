"""MLM training throughput: xlviz's loss path against a plain BertForMaskedLM loop.

Same model config, vocabulary, batch and data (the generated world's L1 corpus, packed blocks,
one fixed sequence of masked batches), same optimizer; only the training step differs:

- baseline: ``model(input_ids, labels=labels).loss`` in float32 (vocabulary logits at every
  position), AdamW.
- xlviz: :class:`xlviz.training.mlm.MaskedOnlyMLM` (logits only at masked positions), in
  float32 as the pipeline trains by default, and under bf16 autocast (``--mixed-precision bf16``).
The variants in between show where the speed comes from. Runs are interleaved round-robin in
one process so machine load affects all alike; the table reports the median step time.

    python bench/bench_mlm.py [--size small] [--vocab 400] [--steps 20] [--rounds 3]
    python bench/bench_mlm.py --model-vocab 30522   # a BERT-base-sized vocabulary

``--model-vocab N`` spreads the world's token ids over an N-row vocabulary (a fixed random
injection; the special ids stay put), so the same text is trained with a vocabulary the size
of a real model's: the generated world's own vocabulary saturates at ~350 subwords, where
the output layer is a small share of the step.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from xlviz.data.tokenization import train_tokenizer
from xlviz.data.world import World, WorldConfig
from xlviz.models.monotrans import bert_config
from xlviz.training.mlm import MaskedOnlyMLM, iter_batches, iter_blocks, mask_tokens, plain_mlm_loss
from transformers import BertForMaskedLM


def make_batches(args) -> tuple[list[dict], int]:
    world = World(WorldConfig(seed=0, corpus_documents=1500))
    corpus = world.corpus("en")
    tok = train_tokenizer(corpus, args.vocab)
    blocks = iter_blocks(lambda: corpus, tok, args.block, seed=0)
    gen = torch.Generator().manual_seed(0)
    batches = []
    for ids in iter_batches(blocks, args.batch):
        inputs, labels = mask_tokens(ids, mask_id=tok.mask_token_id, vocab_size=len(tok), generator=gen)
        batches.append({"input_ids": inputs, "labels": labels})
        if len(batches) == args.steps:
            break
    if args.model_vocab and args.model_vocab > len(tok):
        g = torch.Generator().manual_seed(1)
        table = torch.cat([torch.arange(5), 5 + torch.randperm(args.model_vocab - 5, generator=g)[: len(tok) - 5]])
        for b in batches:
            b["input_ids"] = table[b["input_ids"]]
            b["labels"] = torch.where(b["labels"] >= 0, table[b["labels"].clamp(min=0)], b["labels"])
        return batches, args.model_vocab
    return batches, len(tok)


def runner(name: str, vocab: int, args, *, masked_only: bool, bf16: bool, compiled: bool = False):
    torch.manual_seed(0)
    model = BertForMaskedLM(bert_config(vocab, args.size, max_position_embeddings=args.block))
    model.train()
    if compiled:
        model.bert.compile()
    wrapped = MaskedOnlyMLM(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step(batch: dict) -> float:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = wrapped(**batch) if masked_only else plain_mlm_loss(model, **batch)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    return name, step


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", default="small")
    p.add_argument("--vocab", type=int, default=400)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--block", type=int, default=80)
    p.add_argument("--steps", type=int, default=15)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--compile", action="store_true", help="also time torch.compile'd bodies")
    p.add_argument("--model-vocab", type=int, default=0, help="train with an N-row vocabulary (ids spread over it)")
    args = p.parse_args()
    batches, vocab = make_batches(args)
    runners = [
        runner("plain BertForMaskedLM, fp32 (baseline)", vocab, args, masked_only=False, bf16=False),
        runner("xlviz default: masked-only logits, fp32", vocab, args, masked_only=True, bf16=False),
        runner("plain, bf16 autocast", vocab, args, masked_only=False, bf16=True),
        runner("xlviz --mixed-precision bf16", vocab, args, masked_only=True, bf16=True),
    ]
    if args.compile:
        runners += [
            runner("masked-only + compiled body, fp32", vocab, args, masked_only=True, bf16=False, compiled=True),
            runner("masked-only + compiled body, bf16", vocab, args, masked_only=True, bf16=True, compiled=True),
        ]
    times: dict[str, list[float]] = {name: [] for name, _ in runners}
    for name, step in runners:  # warm-up (allocator, oneDNN kernels)
        for b in batches[:3]:
            step(b)
    for _ in range(args.rounds):
        for name, step in runners:
            t0 = time.perf_counter()
            for b in batches:
                step(b)
            times[name].append((time.perf_counter() - t0) / len(batches))
    tokens = args.batch * args.block
    base = statistics.median(times[runners[0][0]])
    print(f"MLM training step, model={args.size} vocab={vocab} batch={args.batch}x{args.block} tokens, "
          f"{args.steps} steps x {args.rounds} rounds, torch threads={torch.get_num_threads()}")
    print(f"{'variant':<42} {'s/step':>8} {'tokens/s':>10} {'speed-up':>9}")
    for name, _ in runners:
        t = statistics.median(times[name])
        print(f"{name:<42} {t:>8.3f} {tokens / t:>10.0f} {base / t:>8.2f}x")


if __name__ == "__main__":
    main()
