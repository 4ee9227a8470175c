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

from typing import Iterator

import torch

from xlviz.errors import XlvizError
from xlviz.training.streamed import mask_for_mlm, masked_lm_batches  # noqa: F401 (re-exported)
from xlviz.training.staged import ConfigMixin, StagedRun, check_positive, make_global_batch_accelerator  # noqa: F401 (re-exported)


# --------------------------------------------------------------------------- batches
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
