"""Masked-LM batches of a stream of blocks that are the same whichever number of processes
shares them (the real-corpus stages, :mod:`xlviz.methods.corpus`): each process takes its slice of
every global batch, masked with a generator seeded by the step (see :mod:`xlviz.transfer.runner`
for the scale-out contract)."""

from __future__ import annotations

from typing import Iterator, Sequence

import torch

from xlviz.errors import XlvizError
from xlviz.training.masking import MASK_PROBABILITY, RANDOM_SHARE


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
    prob: float = MASK_PROBABILITY,
    random_share: float = RANDOM_SHARE,
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
        inputs, labels = mask_for_mlm(ids, mask_id=mask_id, special=special, allowed=allowed, prob=prob, generator=g,
                                      random_share=random_share)
        denominator = (labels != -100).sum().clamp(min=1).float() / (world_size * grad_accum)
        for k in range(grad_accum):
            lo = (k * world_size + rank) * m
            yield {"input_ids": inputs[lo: lo + m], "labels": labels[lo: lo + m], "denominator": denominator}
        step += 1


def replaced_positions(chosen: torch.Tensor, roll: torch.Tensor, random_share: float = RANDOM_SHARE) -> tuple[torch.Tensor, torch.Tensor]:
    """(where to show [MASK], where a random token) among the ``chosen`` targets, from one uniform
    ``roll`` per position: [MASK] below ``0.9 - random_share``, a random token up to 0.9, the top
    tenth unchanged (BERT's 80/10/10 at the default; ``mlm_random_share``). Every masking of
    the project splits its targets here."""
    shown = 0.9 - random_share
    return chosen & (roll < shown), chosen & (roll >= shown) & (roll < 0.9)


def mask_for_mlm(
    ids: torch.Tensor, *, mask_id: int, special: torch.Tensor, allowed: torch.Tensor, prob: float = MASK_PROBABILITY,
    generator: torch.Generator | None = None, random_share: float = RANDOM_SHARE,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT masking for any vocabulary layout: ``prob`` of the non-special tokens become
    targets; 80% -> mask, 10% -> a random non-special token, 10% unchanged (``random_share``: the
    random share, as :func:`xlviz.training.mlm.mask_tokens`)."""
    inputs, labels = ids.clone(), ids.clone()
    chosen = (torch.rand(ids.shape, generator=generator) < prob) & ~torch.isin(ids, special)
    labels[~chosen] = -100
    roll = torch.rand(ids.shape, generator=generator)
    mask_pos, rand_pos = replaced_positions(chosen, roll, random_share)
    inputs[mask_pos] = mask_id
    random_ids = allowed[torch.randint(len(allowed), ids.shape, generator=generator)]
    inputs[rand_pos] = random_ids[rand_pos]
    return inputs, labels


__all__ = ["masked_lm_batches", "mask_for_mlm", "replaced_positions"]
