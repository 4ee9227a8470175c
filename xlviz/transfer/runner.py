"""Process-count-invariant batches for staged runs on real data (real corpora, QA fine-tuning
of any encoder); the staged run itself is :class:`xlviz.training.staged.StagedRun`.

Scale-out contract (``accelerate launch --multi_gpu --num_processes N -m xlviz ...``, on GPUs or
on CPU processes with gloo): ``batch_size`` in a config is the *global* batch per optimizer
step. Every process reads the same shuffled stream, takes its own slice of each global batch
(``batch_size / (processes x grad_accum)`` rows per forward pass), masks with a generator
seeded by the step (not by the process), and scales its loss by the global number of targets,
so N processes compute the same updates as one process up to floating-point rounding. Only
the main process writes files; losses and evaluation predictions are gathered.
"""

from __future__ import annotations

from typing import Iterator, Sequence

import torch

from xlviz.errors import XlvizError
from xlviz.training.staged import ConfigMixin, StagedRun, check_positive, make_global_batch_accelerator  # noqa: F401 (re-exported)


# --------------------------------------------------------------------------- batches
def masked_lm_batches(
    blocks: Iterator[list[int]],
    *,
    batch_size: int,
    rank: int,
    world_size: int,
    grad_accum: int,
    mask_id: int,
    vocab_size: int,
    special_ids: Sequence[int],
    seed: int,
    prob: float = 0.15,
) -> Iterator[dict]:
    """This process's micro-batches of a stream of global MLM batches.

    ``blocks`` is the same stream in every process (``iter_blocks(..., rank=0, world_size=1)``).
    Each global batch of ``batch_size`` blocks is masked with a generator seeded by
    ``(seed, step)``; micro-batch ``k`` of process ``r`` is rows ``(k * world_size + r) * m``
    onwards (``m = batch_size / (world_size * grad_accum)``), and ``denominator`` makes the
    per-process loss sums average to the global per-token mean (see the module docstring).
    """
    m = batch_size // (world_size * grad_accum)
    if m < 1 or m * world_size * grad_accum != batch_size:
        raise XlvizError(f"batch size {batch_size} is not divisible by {world_size} processes x {grad_accum} accumulation steps", field="batch_size")
    special = torch.tensor(sorted(set(special_ids)), dtype=torch.long)
    allowed = torch.tensor([i for i in range(vocab_size) if i not in set(special_ids)], dtype=torch.long)
    step = 0
    while True:
        rows = []
        for _ in range(batch_size):
            try:
                rows.append(next(blocks))
            except StopIteration:
                return
        ids = torch.tensor(rows, dtype=torch.long)
        g = torch.Generator().manual_seed(seed * 1_000_003 + step)
        inputs, labels = mask_for_mlm(ids, mask_id=mask_id, special=special, allowed=allowed, prob=prob, generator=g)
        denominator = (labels != -100).sum().clamp(min=1).float() / (world_size * grad_accum)
        for k in range(grad_accum):
            lo = (k * world_size + rank) * m
            yield {"input_ids": inputs[lo: lo + m], "labels": labels[lo: lo + m], "denominator": denominator}
        step += 1


def mask_for_mlm(
    ids: torch.Tensor, *, mask_id: int, special: torch.Tensor, allowed: torch.Tensor, prob: float = 0.15,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT masking for any vocabulary layout: ``prob`` of the non-special tokens become
    targets; 80% -> mask, 10% -> a random non-special token, 10% unchanged."""
    inputs, labels = ids.clone(), ids.clone()
    chosen = (torch.rand(ids.shape, generator=generator) < prob) & ~torch.isin(ids, special)
    labels[~chosen] = -100
    roll = torch.rand(ids.shape, generator=generator)
    inputs[chosen & (roll < 0.8)] = mask_id
    rand_pos = chosen & (roll >= 0.8) & (roll < 0.9)
    random_ids = allowed[torch.randint(len(allowed), ids.shape, generator=generator)]
    inputs[rand_pos] = random_ids[rand_pos]
    return inputs, labels


def trim_right_padding(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Cut a right-padded batch (features padded to max_length) to its longest row."""
    if "attention_mask" not in batch:
        return batch
    width = max(1, int(batch["attention_mask"].sum(1).max()))
    if batch["attention_mask"][:, width:].any():  # left padding: leave as is
        return batch
    return {k: (v[:, :width] if v.ndim == 2 else v) for k, v in batch.items()}


def feature_batches(
    features: dict[str, torch.Tensor], *, batch_size: int, rank: int, world_size: int, grad_accum: int, seed: int
) -> Iterator[dict]:
    """This process's micro-batches of shuffled global batches of fixed-size features (QA
    windows), epoch after epoch; the permutation depends on the seed and epoch only."""
    n = len(next(iter(features.values())))
    m = batch_size // (world_size * grad_accum)
    if n < batch_size:
        raise XlvizError(f"only {n} training features for a global batch of {batch_size}; lower batch_size", field="batch_size")
    epoch = 0
    while True:
        order = torch.randperm(n, generator=torch.Generator().manual_seed(seed * 7_919 + epoch))
        for lo in range(0, n - batch_size + 1, batch_size):
            batch = order[lo: lo + batch_size]
            for k in range(grad_accum):
                idx = batch[(k * world_size + rank) * m: (k * world_size + rank + 1) * m]
                yield trim_right_padding({key: v[idx].long() for key, v in features.items()})
        epoch += 1


__all__ = ["ConfigMixin", "StagedRun", "make_global_batch_accelerator", "check_positive", "masked_lm_batches", "mask_for_mlm", "feature_batches"]
