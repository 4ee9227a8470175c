"""VECO's pre-training step against a plain MLM step of the same model size, side by side.

Same BERT config (``--size``), vocabulary (``--vocab`` rows, as a pair model's joint
vocabulary) and tokens per step (``--batch`` blocks of ``--block`` tokens); same AdamW. Rows:

- ``mlm``: :class:`xlviz.training.mlm.MaskedOnlyMLM` on a plain ``BertForMaskedLM`` (what
  MONOTRANS and jointpair-disjoint train with): the baseline;
- ``veco mono``: a monolingual VECO step, CA-MLM on ``batch / 2`` pairs of adjacent segments
  (the same tokens cut in two halves): self stream + cross stream, four loss terms;
- ``veco parallel``: a parallel VECO step, TLM on the concatenated pair + CA-MLM on the pair;
- ``veco (run)``: the mean of the two, what a VECO pre-training run alternates.

Tokens/s counts the corpus tokens a step consumes (x and y once each). Memory: on a GPU the
peak allocated; on a CPU (no allocator statistics) the bytes autograd saves for backward in
one step (the activations, the part of the peak that grows with the batch), beside the
parameters' bytes. Ids are random (speed does not depend on which tokens); runs are
interleaved round-robin so machine load hits all alike; the table gives medians over rounds.

    python bench/bench_veco.py [--size small] [--vocab 800] [--batch 128] [--block 24] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from transformers import BertForMaskedLM

from xlviz.models.monotrans import bert_config
from xlviz.models.veco import VecoForMaskedLM, veco_config
from xlviz.training.mlm import MaskedOnlyMLM, mask_tokens
from xlviz.training.veco import VecoPretraining


class SavedBytes:
    """Bytes of the tensors autograd saves for backward while active (unique storages)."""

    def __init__(self):
        self.seen: dict[int, int] = {}

    def pack(self, t: torch.Tensor):
        self.seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    @property
    def total(self) -> int:
        return sum(self.seen.values())


def batches(args, gen: torch.Generator) -> dict[str, dict]:
    ids = torch.randint(5, args.vocab, (args.batch, args.block), generator=gen)
    ids[:, 0], ids[:, -1] = 2, 3

    def masked(x):
        return mask_tokens(x, mask_id=4, vocab_size=args.vocab, generator=gen)

    # as xlviz.training.veco.pretrain_batches: batch / 2 blocks of 2 * block - 2 tokens, each cut
    # into two block-token segments (x, y): the same tokens as the MLM batch
    half, body = args.batch // 2, args.block - 2
    rows = torch.cat([ids[:half, :-1], ids[half:, 1:]], 1)  # [CLS] a b [SEP]
    x = torch.cat([rows[:, :1], rows[:, 1:1 + body], rows[:, -1:]], 1)
    y = torch.cat([rows[:, :1], rows[:, 1 + body:1 + 2 * body], rows[:, -1:]], 1)
    (xi, xl), (yi, yl) = masked(x), masked(y)
    ones = torch.ones_like
    mono = {"input_ids": xi, "attention_mask": ones(xi), "labels": xl, "pair_input_ids": yi, "pair_attention_mask": ones(yi), "pair_labels": yl}
    ti, tl = masked(torch.cat([x, y[:, 1:]], 1))
    par = {**mono, "tlm_input_ids": ti, "tlm_attention_mask": ones(ti), "tlm_labels": tl}
    mi, ml = masked(ids)
    return {"mlm": {"input_ids": mi, "labels": ml}, "veco mono": mono, "veco parallel": par}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", default="small")
    p.add_argument("--vocab", type=int, default=800)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--block", type=int, default=24)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=3, help="timed steps per variant and round")
    p.add_argument("--threads", type=int, default=0)
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    config = bert_config(args.vocab, args.size, max_position_embeddings=2 * args.block)
    plain = BertForMaskedLM(config).to(device)
    veco = VecoForMaskedLM(veco_config(config)).to(device)
    modules = {"mlm": MaskedOnlyMLM(plain), "veco mono": VecoPretraining(veco), "veco parallel": VecoPretraining(veco)}
    opts = {"mlm": torch.optim.AdamW(plain.parameters(), lr=1e-4), "veco": torch.optim.AdamW(veco.parameters(), lr=1e-4)}
    data = {k: {n: t.to(device) for n, t in v.items()} for k, v in batches(args, torch.Generator().manual_seed(0)).items()}
    tokens = {"mlm": args.batch * args.block, "veco mono": 2 * data["veco mono"]["input_ids"].numel(),
              "veco parallel": 2 * data["veco parallel"]["input_ids"].numel()}

    def step(name: str) -> None:
        module = modules[name]
        loss = module(**data[name]) if name != "mlm" else module(data[name]["input_ids"], data[name]["labels"])
        loss.backward()
        opt = opts["mlm" if name == "mlm" else "veco"]
        opt.step()
        opt.zero_grad(set_to_none=True)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    memory: dict[str, int] = {}
    for name in modules:  # warm-up and memory
        step(name)
        sync()
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats()
            step(name)
            memory[name] = torch.cuda.max_memory_allocated()
        else:
            saved = SavedBytes()
            with torch.autograd.graph.saved_tensors_hooks(saved.pack, lambda t: t):
                step(name)
            memory[name] = saved.total
    times: dict[str, list[float]] = {n: [] for n in modules}
    for _ in range(args.rounds):
        for name in modules:
            sync()
            t0 = time.perf_counter()
            for _ in range(args.steps):
                step(name)
            sync()
            times[name].append((time.perf_counter() - t0) / args.steps)
    med = {n: statistics.median(t) for n, t in times.items()}
    med["veco (run)"] = (med["veco mono"] + med["veco parallel"]) / 2
    tokens["veco (run)"] = (tokens["veco mono"] + tokens["veco parallel"]) / 2
    memory["veco (run)"] = max(memory["veco mono"], memory["veco parallel"])
    what = "peak allocated" if device.type == "cuda" else "saved for backward"
    params = {"mlm": sum(p.numel() * p.element_size() for p in plain.parameters())}
    params.update({n: sum(p.numel() * p.element_size() for p in veco.parameters()) for n in med if n != "mlm"})
    print(f"device {device}, size {args.size}, vocab {args.vocab}, {args.batch} x {args.block} tokens per step, "
          f"{args.rounds} rounds x {args.steps} steps, torch threads {torch.get_num_threads()}")
    print(f"{'step':<15}{'ms/step':>9}{'tokens/s':>10}{'x mlm':>7}{'MB ' + what:>26}{'x mlm':>7}{'MB params':>10}")
    base_tps = tokens["mlm"] / med["mlm"]
    for n in med:
        tps = tokens[n] / med[n]
        print(f"{n:<15}{med[n] * 1e3:>9.1f}{tps:>10.0f}{tps / base_tps:>7.2f}{memory[n] / 2**20:>26.1f}"
              f"{memory[n] / memory['mlm']:>7.2f}{params[n] / 2**20:>10.1f}")


if __name__ == "__main__":
    main()
