"""MLM training throughput: xlviz's training step against a plain BertForMaskedLM loop.

Same model config, vocabulary, batch and data (the generated world's L1 corpus, packed blocks,
one fixed sequence of masked batches), same optimizer (AdamW, same settings); only the
training step differs:

- baseline: ``model(input_ids, labels=labels).loss`` in float32 (vocabulary logits at every
  position), PyTorch's default AdamW.
- xlviz, float32 (``--mixed-precision no``): :class:`xlviz.training.mlm.MaskedOnlyMLM`
  (logits, and the last layer's queries and feed-forward block, only at masked positions)
  and the fused AdamW of :func:`xlviz.training.loop.make_optimizer`.
- xlviz, bf16 (the default, ``auto``, on CPUs with AMX or AVX512-BF16): the same loss with
  the model held in bf16 and float32 master weights (:class:`xlviz.training.loop.Bf16Weights`),
  eager attention.
- xlviz bf16 with PyTorch's default (unfused) AdamW: what the loss and precision alone give.
- for contrast, the baseline under CPU bf16 autocast (what accelerate's ``bf16`` does on a
  CPU): slower than float32, because autocast re-casts around every op and PyTorch's bf16 SDPA
  backward on CPUs is slow.

Runs are interleaved round-robin in one process, so machine load (this shared machine sees
CPU steal) hits all alike; each round gives one ratio per variant against the baseline of the
same round, and the table reports the median ratio and the median step time.

    python bench/bench_mlm.py [--size small] [--vocab 400] [--batch 128] [--block 24] [--rounds 7]
    python bench/bench_mlm.py --model-vocab 30522   # a BERT-base-sized vocabulary

``--model-vocab N`` spreads the world's token ids over an N-row vocabulary (a fixed random
injection; the special ids stay put), so the same text is trained with a vocabulary the size
of a real model's: the generated world's own vocabulary saturates at ~350 subwords, where
the output layer is a small share of the step.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import torch

from xlviz.data.tokenization import train_tokenizer
from xlviz.data.world import World, WorldConfig
from xlviz.models.monotrans import bert_config
from xlviz.training.loop import Bf16Weights, cpu_native_bf16, make_optimizer, param_groups, resolve_mixed_precision
from xlviz.training.mlm import MaskedOnlyMLM, iter_batches, iter_blocks, mask_tokens, plain_mlm_loss
from transformers import BertForMaskedLM


def cpu_name() -> str:
    """The CPU model and its bf16 instructions, for the table's header."""
    name = platform.processor() or "cpu"
    try:
        with open("/proc/cpuinfo") as f:
            name = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{name} ({', '.join(cpu_native_bf16()) or 'no native bf16'})"


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


def runner(name: str, vocab: int, args, *, masked_only: bool, precision: str, compiled: bool = False, fused: bool = True):
    """``precision``: "fp32", "autocast" (CPU bf16 autocast) or "bf16" (xlviz's Bf16Weights);
    ``fused``: xlviz's fused AdamW (masked-only variants), else PyTorch's default."""
    torch.manual_seed(0)
    model = BertForMaskedLM(bert_config(vocab, args.size, max_position_embeddings=args.block))
    model.train()
    wrapped = MaskedOnlyMLM(model)
    weights = Bf16Weights(wrapped) if precision == "bf16" else None
    if compiled:
        model.bert.compile()
    # the plain loop: PyTorch's default AdamW; xlviz: the optimizer its training loop makes
    opt = (make_optimizer(weights or wrapped, 1e-4, 0.0) if masked_only and fused
           else torch.optim.AdamW(param_groups(weights or wrapped, 0.0), lr=1e-4))

    def step(batch: dict) -> float:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "autocast"):
            loss = wrapped(**batch) if masked_only else plain_mlm_loss(model, **batch)
        loss.backward()
        if weights:
            weights.grads_to_master()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if weights:
            weights.master_to_model()
        return loss.item()

    return name, step


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", default="small")
    p.add_argument("--vocab", type=int, default=400)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--block", type=int, default=24)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--compile", action="store_true", help="also time torch.compile'd bodies")
    p.add_argument("--model-vocab", type=int, default=0, help="train with an N-row vocabulary (ids spread over it)")
    args = p.parse_args()
    batches, vocab = make_batches(args)
    runners = [
        runner("plain BertForMaskedLM, fp32 (baseline)", vocab, args, masked_only=False, precision="fp32"),
        runner("xlviz --mixed-precision no (masked-only)", vocab, args, masked_only=True, precision="fp32"),
        runner("plain, CPU bf16 autocast", vocab, args, masked_only=False, precision="autocast"),
        runner("xlviz bf16, PyTorch's default AdamW", vocab, args, masked_only=True, precision="bf16", fused=False),
        runner("xlviz bf16 (default with native bf16)", vocab, args, masked_only=True, precision="bf16"),
    ]
    if args.compile:
        runners += [runner("xlviz bf16 + torch.compile'd body", vocab, args, masked_only=True, precision="bf16", compiled=True)]
    times: dict[str, list[float]] = {name: [] for name, _ in runners}
    for name, step in runners:  # warm-up (allocator, oneDNN kernels, compilation)
        for b in batches[:3]:
            step(b)
    for _ in range(args.rounds):
        for name, step in runners:
            t0 = time.perf_counter()
            for b in batches:
                step(b)
            times[name].append((time.perf_counter() - t0) / len(batches))
    tokens = args.batch * args.block
    base = times[runners[0][0]]
    print(f"MLM training step, model={args.size} vocab={vocab} batch={args.batch}x{args.block} tokens, "
          f"{args.steps} steps x {args.rounds} rounds, torch threads={torch.get_num_threads()}, "
          f"{cpu_name()}, auto precision={resolve_mixed_precision('auto')}")
    print(f"{'variant':<42} {'s/step':>8} {'tokens/s':>10} {'speed-up':>9} {'range':>12}")
    for name, _ in runners:
        t = statistics.median(times[name])
        ratios = sorted(b / v for b, v in zip(base, times[name]))
        print(f"{name:<42} {t:>8.3f} {tokens / t:>10.0f} {statistics.median(ratios):>8.2f}x {ratios[0]:>5.2f}-{ratios[-1]:.2f}x")


if __name__ == "__main__":
    main()
