"""PPA's training step against a plain MLM step of the same model, side by side.

The model is ``jointpair-disjoint``'s (a small BERT over L1 + one L2's disjoint vocabularies,
joint ids); the data is the generated world: the parallel training corpus of the L2 for PPA,
packed 24-token corpus blocks of both languages for MLM (the pair model's pre-training step).
Rows, each with xlviz's step (masked-only loss, fused AdamW, bf16 weights where the CPU has
native bf16, as the loop runs it):

- MLM (baseline): ``MaskedOnlyMLM`` on ``--mlm-batch`` blocks of ``--block`` tokens;
- PPA moco+tlm: MoCo (query + momentum encoder, queue) + TLM on ``--batch`` pairs;
- PPA moco, PPA tlm: the ablations' steps, for the cost of each half.

Time: runs interleaved round-robin in one process (machine load hits all alike); each round
gives one ratio per row against the MLM step of the same round; the table reports medians.
tokens/s counts the non-padding tokens a step reads once (MLM: the blocks; PPA: the two sides
of each pair). Peak memory: each row runs again in its own child process, and the table gives
the growth of its peak resident memory (Linux VmHWM, reset before the first step through
``/proc/self/clear_refs``) over its resident memory then (model, optimizer, batches loaded).
CPU only, as the rest of the bench.

    PYTHONPATH=. python bench/bench_ppa.py [--size small] [--batch 128] [--mlm-batch 128] [--steps 5] [--rounds 5]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from transformers import BertForMaskedLM

from xlviz.data.joint_vocab import DisjointVocab
from xlviz.data.tokenization import train_tokenizer
from xlviz.data.world import World, WorldConfig
from xlviz.models.monotrans import bert_config
from xlviz.training.loop import Bf16Weights, make_optimizer, resolve_mixed_precision
from xlviz.training.mlm import MaskedOnlyMLM, iter_batches, iter_blocks, mask_tokens
from xlviz.training.ppa import PPALoss, PPAModel, Specials, pair_batches

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_mlm import update  # noqa: E402  (one optimizer step, through the bf16 masters)

ROWS = ("MLM (baseline)", "PPA moco+tlm", "PPA moco", "PPA tlm")


def data(args) -> tuple[dict[str, list[dict]], dict[str, list[int]], int]:
    """Batches per row, tokens read per batch, the joint vocabulary size."""
    world = World(WorldConfig(seed=0, corpus_documents=600, parallel_train_pairs=2000))
    toks = {lang: train_tokenizer(world.corpus(lang), 400) for lang in ("en", args.l2)}
    vocab = DisjointVocab(toks, ["en", args.l2])
    gen = torch.Generator().manual_seed(0)
    per_lang = {}
    for lang in ("en", args.l2):  # the pair model's batches: both languages, in turn
        blocks = map(lambda ids, lang=lang: vocab.to_joint(lang, ids), iter_blocks(lambda lang=lang: world.corpus(lang), toks[lang], args.block))
        stream = iter_batches(blocks, args.mlm_batch)
        per_lang[lang] = [next(stream) for _ in range(-(-args.steps // 2))]
    mlm, mlm_tokens = [], []
    for ids in (x for both in zip(*per_lang.values()) for x in both):
        inputs, labels = mask_tokens(ids, mask_id=toks["en"].mask_token_id, vocab_size=vocab.vocab_size, generator=gen)
        mlm.append({"input_ids": inputs, "labels": labels})
        mlm_tokens.append(ids.numel())
    pairs = world.parallel_train(args.l2)
    a = toks["en"]([p["src"] for p in pairs], add_special_tokens=False)["input_ids"]
    b = toks[args.l2]([p["tgt"] for p in pairs], add_special_tokens=False)["input_ids"]
    ids = [(vocab.to_joint("en", x), vocab.to_joint(args.l2, y)) for x, y in zip(a, b)]
    sp = Specials.of(toks["en"], vocab.vocab_size)
    out = {ROWS[0]: mlm[: args.steps]}
    tokens = {ROWS[0]: mlm_tokens[: args.steps]}
    for row, objective in zip(ROWS[1:], ("moco+tlm", "moco", "tlm")):
        stream = pair_batches(ids, args.batch, sp, objective=objective, seed=0)
        out[row] = [next(stream) for _ in range(args.steps)]
        tokens[row] = [int(bt["word_attention_mask"].sum() - 3 * args.batch) if "word_attention_mask" in bt
                       else int(bt["attention_mask"].sum() + bt["key_attention_mask"].sum() - 4 * args.batch) for bt in out[row]]
    return out, tokens, vocab.vocab_size


def runner(row: str, vocab: int, args):
    """A step function for ``row``, as the training loop would run it."""
    torch.manual_seed(0)
    model = BertForMaskedLM(bert_config(vocab, args.size, max_position_embeddings=96))
    module = MaskedOnlyMLM(model) if row == ROWS[0] else PPALoss(PPAModel(model, row.split()[1], queue_size=512))
    module.train()
    weights = Bf16Weights(module) if resolve_mixed_precision("auto") == "bf16" and not torch.cuda.is_available() else None
    opt = make_optimizer(weights or module, 1e-4, 0.01)

    def step(batch: dict) -> float:
        return update(module(**batch), opt, weights)

    return step


def peak_memory(row: str, args, path: str, queue) -> None:
    """Child process: peak memory growth (MiB) of ``row``'s steps over its state before them
    (the batches come from a file: making them, world and tokenizers, would set a higher peak)."""
    torch.set_num_threads(args.threads)
    tensors = load_file(path)
    step = runner(row, int(tensors.pop("vocab")), args)
    batches: dict[str, list[dict]] = {}
    for key, value in tensors.items():  # "<row index>/<step>/<name>", written by main()
        r, i, name = key.split("/")
        steps = batches.setdefault(ROWS[int(r)], [])
        steps += [{} for _ in range(int(i) + 1 - len(steps))]
        steps[int(i)][name] = value
    # Linux: writing 5 to clear_refs resets the peak (VmHWM) to the current resident size
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = status_kib("VmRSS")
    for b in batches[row]:
        step(b)
    queue.put((status_kib("VmHWM") - before) / 1024)


def status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        return int(next(line.split()[1] for line in f if line.startswith(field + ":")))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", default="small")
    p.add_argument("--l2", default="sov")
    p.add_argument("--batch", type=int, default=128, help="PPA: pairs per step")
    p.add_argument("--mlm-batch", dest="mlm_batch", type=int, default=128, help="MLM: blocks per step")
    p.add_argument("--block", type=int, default=24)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--memory", action=argparse.BooleanOptionalAction, default=True, help="also measure peak memory (child processes)")
    args = p.parse_args()
    args.threads = torch.get_num_threads()
    batches, tokens, vocab = data(args)
    steps = {row: runner(row, vocab, args) for row in ROWS}
    for row in ROWS:  # warm-up: allocator, oneDNN kernels
        for b in batches[row][:2]:
            steps[row](b)
    times: dict[str, list[float]] = {row: [] for row in ROWS}
    for _ in range(args.rounds):
        for row in ROWS:
            t0 = time.perf_counter()
            for b in batches[row]:
                steps[row](b)
            times[row].append((time.perf_counter() - t0) / len(batches[row]))
    memory = {}
    if args.memory:
        ctx = mp.get_context("spawn")
        with tempfile.TemporaryDirectory() as folder:
            path = str(Path(folder) / "batches.safetensors")
            flat = {f"{r}/{i}/{k}": v.clone() for r, row in enumerate(ROWS) for i, b in enumerate(batches[row]) for k, v in b.items()}
            save_file({**flat, "vocab": torch.tensor(vocab)}, path)
            for row in ROWS:
                q = ctx.Queue()
                child = ctx.Process(target=peak_memory, args=(row, args, path, q))
                child.start()
                memory[row] = q.get()
                child.join()
    print(f"one training step, model={args.size}, joint vocabulary of {vocab} rows (en + {args.l2}), PPA batch {args.batch} pairs, "
          f"MLM batch {args.mlm_batch}x{args.block}, {args.steps} steps x {args.rounds} rounds, precision {resolve_mixed_precision('auto')}, "
          f"torch threads {args.threads}")
    print(f"{'row':<16} {'s/step':>8} {'tokens/step':>12} {'tokens/s':>10} {'time vs MLM':>12} {'tokens/s vs MLM':>16} {'peak MiB':>9} {'mem vs MLM':>11}")
    base_t, base_tok = times[ROWS[0]], statistics.median(tokens[ROWS[0]])
    base_rate = base_tok / statistics.median(base_t)
    for row in ROWS:
        t = statistics.median(times[row])
        tok = statistics.median(tokens[row])
        ratio = statistics.median(v / b for v, b in zip(times[row], base_t))
        mem = memory.get(row)
        mem_ratio = f"{mem / memory[ROWS[0]]:>10.2f}x" if mem is not None and memory[ROWS[0]] > 0 else ""
        print(f"{row:<16} {t:>8.3f} {tok:>12.0f} {tok / t:>10.0f} {ratio:>11.2f}x {tok / t / base_rate:>15.2f}x "
              f"{'' if mem is None else f'{mem:>9.1f}'} {mem_ratio}")
    print("time vs MLM: median over rounds of the step time over the MLM step's in the same round; "
          "peak MiB: growth of the peak resident memory over the steps, one child process per row.")


if __name__ == "__main__":
    main()
