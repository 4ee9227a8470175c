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

Rows for the other methods' models, each beside its own plain float32 loop: a joint vocabulary
(``jointmulti``: three languages' rows, ``--joint-languages``) and Wu et al.'s language-specific
bottom layers (``wu-shared-top-K``: two languages, one batch per language in turn). And the
Hugging Face ``Trainer`` with ``DataCollatorForLanguageModeling`` (masking on the fly, float32
on the CPU), what a user would run instead, timed per step by a callback.

Each row's FLOPs per step are counted once by ``torch.utils.flop_counter.FlopCounterMode`` (the
matrix products it executes, forward and backward: the masked-only rows do less work than the
plain ones), and the table gives the achieved TFLOP/s and its share of this CPU's bf16 peak:
cores × clock × 1,024 FLOP per cycle per core with AMX (a TDPBF16PS tile product, 8,192
multiply-adds, every 16 cycles), 128 with AVX512-BF16 only (``--peak-tflops`` overrides it).

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


def bf16_peak_tflops() -> tuple[float, str]:
    """This CPU's bf16 peak (TFLOP/s) from its flags, core count and clock (/proc/cpuinfo's MHz,
    the nominal clock on a VM); 0 where the CPU has no native bf16."""
    flags = cpu_native_bf16()
    per_cycle = 1024 if "AMX" in flags else 128 if "AVX512-BF16" in flags else 0
    mhz = 0.0
    try:
        with open("/proc/cpuinfo") as f:
            mhz = next(float(line.split(":", 1)[1]) for line in f if line.startswith("cpu MHz"))
    except (OSError, StopIteration, ValueError):
        pass
    cores = torch.get_num_threads()
    return cores * mhz * 1e6 * per_cycle / 1e12, f"{cores} cores x {mhz:.0f} MHz x {per_cycle} FLOP/cycle"


def count_flops(step, batch: dict) -> int:
    """FLOPs one training step executes (forward and backward matrix products), counted by
    PyTorch's FlopCounterMode (this runs one extra step)."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        step(batch)
    return counter.get_total_flops()


def make_batches(args) -> tuple[list[dict], int, object]:
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
        return batches, args.model_vocab, tok
    return batches, len(tok), tok


def update(loss: torch.Tensor, opt, weights) -> float:
    """One optimizer step from ``loss`` (through the float32 masters when ``weights`` is Bf16Weights)."""
    loss.backward()
    if weights:
        weights.grads_to_master()
    opt.step()
    opt.zero_grad(set_to_none=True)
    if weights:
        weights.master_to_model()
    return loss.item()


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
        return update(loss, opt, weights)

    return name, step


def spread(batches: list[dict], vocab: int, size: int, seed: int = 1) -> list[dict]:
    """The batches with their non-special ids injected into a ``size``-row vocabulary."""
    g = torch.Generator().manual_seed(seed)
    table = torch.cat([torch.arange(5), 5 + torch.randperm(size - 5, generator=g)[: vocab - 5]])
    return [{"input_ids": table[b["input_ids"]],
             "labels": torch.where(b["labels"] >= 0, table[b["labels"].clamp(min=0)], b["labels"])} for b in batches]


def wu_runner(name: str, vocab: int, args, *, masked_only: bool, precision: str):
    """Wu et al.'s model: two languages' bottom layers, the top ``--wu-shared`` shared; batch i
    runs through language i mod 2 (as wu-shared-top-K's pre-training does)."""
    from xlviz.training.multilingual import PerLanguageMLM
    from xlviz.models.shared_layers import SharedTopLayers

    torch.manual_seed(0)
    model = SharedTopLayers(BertForMaskedLM(bert_config(vocab, args.size, max_position_embeddings=args.block)), ["a", "b"], args.wu_shared)
    model.train()
    wrapped = PerLanguageMLM(model)
    weights = Bf16Weights(wrapped) if precision == "bf16" else None
    opt = make_optimizer(weights or wrapped, 1e-4, 0.0) if masked_only else torch.optim.AdamW(param_groups(wrapped, 0.0), lr=1e-4)
    count = [0]

    def step(batch: dict) -> float:
        lang = count[0] % 2
        count[0] += 1
        if masked_only:
            loss = wrapped(**batch, language=torch.tensor(lang))
        else:
            loss = plain_mlm_loss(model.views[model.languages[lang]], **batch)
        return update(loss, opt, weights)

    return name, step


class TrainerTimer:
    """Times Hugging Face ``Trainer`` steps (``DataCollatorForLanguageModeling``, float32):
    each call trains ``len(batches)`` steps on the same blocks, timed by a callback from the
    start of the first step to the end of the last (set-up excluded)."""

    def __init__(self, vocab: int, args, tok):
        from transformers import DataCollatorForLanguageModeling, TrainerCallback

        self.vocab, self.args, self.tok = vocab, args, tok
        self.collator = DataCollatorForLanguageModeling(tok, mlm_probability=0.15)
        timer = self

        class Clock(TrainerCallback):
            def on_step_begin(self, a, state, control, **kw):
                if state.global_step == 0:
                    timer.t0 = time.perf_counter()

            def on_step_end(self, a, state, control, **kw):
                timer.t1 = time.perf_counter()

        self.clock = Clock()
        torch.manual_seed(0)
        self.model = BertForMaskedLM(bert_config(vocab, args.size, max_position_embeddings=args.block))

    def run(self, batches: list[dict]) -> float:
        import tempfile

        from transformers import Trainer, TrainingArguments

        rows = [{"input_ids": ids} for b in batches for ids in b["input_ids"].tolist()]
        with tempfile.TemporaryDirectory() as out:
            targs = TrainingArguments(output_dir=out, per_device_train_batch_size=self.args.batch, max_steps=len(batches),
                                      learning_rate=1e-4, report_to=[], save_strategy="no", logging_strategy="no",
                                      use_cpu=True, dataloader_num_workers=0, disable_tqdm=True, seed=0)
            Trainer(model=self.model, args=targs, train_dataset=rows, data_collator=self.collator, callbacks=[self.clock]).train()
        return (self.t1 - self.t0) / max(1, len(batches) - 1) if len(batches) > 1 else self.t1 - self.t0


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
    p.add_argument("--joint-languages", type=int, default=3, help="languages of the joint-vocabulary row (jointmulti)")
    p.add_argument("--wu-shared", type=int, default=2, help="shared top layers of the Wu et al. row")
    p.add_argument("--methods", action=argparse.BooleanOptionalAction, default=True,
                   help="also time the joint-vocabulary, Wu et al. and HF Trainer rows")
    p.add_argument("--peak-tflops", type=float, default=0.0, help="this CPU's bf16 peak (default: from its flags and clock)")
    args = p.parse_args()
    batches, vocab, tok = make_batches(args)
    joint = spread(batches, vocab, vocab * args.joint_languages)
    runners = [
        runner("plain BertForMaskedLM, fp32 (baseline)", vocab, args, masked_only=False, precision="fp32"),
        runner("xlviz --mixed-precision no (masked-only)", vocab, args, masked_only=True, precision="fp32"),
        runner("plain, CPU bf16 autocast", vocab, args, masked_only=False, precision="autocast"),
        runner("xlviz bf16, PyTorch's default AdamW", vocab, args, masked_only=True, precision="bf16", fused=False),
        runner("xlviz bf16 (default with native bf16)", vocab, args, masked_only=True, precision="bf16"),
    ]
    if args.compile:
        runners += [runner("xlviz bf16 + torch.compile'd body", vocab, args, masked_only=True, precision="bf16", compiled=True)]
    pairs = {}  # a method's row -> its own plain baseline
    if args.methods:
        jv = vocab * args.joint_languages
        jb = runner(f"plain, joint vocabulary ({jv} rows)", jv, args, masked_only=False, precision="fp32")
        jx = runner(f"xlviz bf16, joint vocabulary ({jv} rows)", jv, args, masked_only=True, precision="bf16")
        wb = wu_runner(f"plain, Wu shared-top-{args.wu_shared}", vocab, args, masked_only=False, precision="fp32")
        wx = wu_runner(f"xlviz bf16, Wu shared-top-{args.wu_shared}", vocab, args, masked_only=True, precision="bf16")
        runners += [jb, jx, wb, wx]
        pairs = {jb[0]: jb[0], jx[0]: jb[0], wb[0]: wb[0], wx[0]: wb[0]}
    data = {name: (joint if "joint vocabulary" in name else batches) for name, _ in runners}
    times: dict[str, list[float]] = {name: [] for name, _ in runners}
    trainer = None
    if args.methods:
        trainer = TrainerTimer(vocab, args, tok)
        times["HF Trainer + DataCollatorForLanguageModeling, fp32"] = []
    for name, step in runners:  # warm-up (allocator, oneDNN kernels, compilation)
        for b in data[name][:3]:
            step(b)
    if trainer:
        trainer.run(batches[:3])
    flops = {name: count_flops(step, data[name][0]) for name, step in runners}
    if trainer:  # the same model and products as the plain loop
        flops["HF Trainer + DataCollatorForLanguageModeling, fp32"] = flops[runners[0][0]]
    peak, how = (args.peak_tflops, "given") if args.peak_tflops else bf16_peak_tflops()
    for _ in range(args.rounds):
        for name, step in runners:
            t0 = time.perf_counter()
            for b in data[name]:
                step(b)
            times[name].append((time.perf_counter() - t0) / len(batches))
        if trainer:
            times["HF Trainer + DataCollatorForLanguageModeling, fp32"].append(trainer.run(batches))
    tokens = args.batch * args.block
    print(f"MLM training step, model={args.size} vocab={vocab} batch={args.batch}x{args.block} tokens, "
          f"{args.steps} steps x {args.rounds} rounds, torch threads={torch.get_num_threads()}, "
          f"{cpu_name()}, auto precision={resolve_mixed_precision('auto')}")
    hf = times.get("HF Trainer + DataCollatorForLanguageModeling, fp32")
    print(f"bf16 peak {peak:.2f} TFLOP/s ({how})")
    print(f"{'variant':<52} {'s/step':>8} {'tokens/s':>10} {'vs plain':>9} {'range':>12} {'vs Trainer':>11} "
          f"{'MFLOP/token':>12} {'TFLOP/s':>8} {'% peak':>7}")
    for name in times:
        t = statistics.median(times[name])
        ref = times[pairs.get(name, runners[0][0])]
        ratios = sorted(b / v for b, v in zip(ref, times[name]))
        vs_hf = f"{statistics.median(h / v for h, v in zip(hf, times[name])):>10.2f}x" if hf else ""
        tflops = flops[name] / t / 1e12
        share = f"{100 * tflops / peak:>6.1f}%" if peak else "n/a"
        print(f"{name:<52} {t:>8.3f} {tokens / t:>10.0f} {statistics.median(ratios):>8.2f}x {ratios[0]:>5.2f}-{ratios[-1]:.2f}x "
              f"{vs_hf:>11} {flops[name] / tokens / 1e6:>12.2f} {tflops:>8.3f} {share:>7}")
    print("vs plain: against the plain fp32 loop of the same model (the joint and Wu rows against their own plain rows); "
          "vs Trainer: against the HF Trainer row, same data; medians over rounds. MFLOP/token: the matrix products "
          "each step executes (FlopCounterMode), so masked-only rows count less work; % peak: TFLOP/s over the bf16 peak.")


if __name__ == "__main__":
    main()
