"""Extractive-QA fine-tuning: the one training path every QA fine-tuning stage takes (the
world's ``s3_*`` stages of every method, a corpus run's ``s3_finetune``, ``xlviz finetune-qa``'s
``s3_finetune``), so a change to how a QA model is trained reaches all of them.

Two ways of batching the training windows stay, because the runs written with each keep their
numbers (``global_batch``):

- per process (the generated world): each process draws its own ``batch_size`` windows from
  one permutation continued epoch after epoch (:func:`per_process_batches`);
- global (corpus sources, ``xlviz finetune-qa``): ``batch_size`` is the batch of one optimizer
  step over all processes, each takes its slice, the permutation is reseeded each epoch
  (:func:`feature_batches`), so N processes compute the updates of one.
"""

from __future__ import annotations

from typing import Callable, Iterator

import torch

from xlviz.data.qa_features import prepare_train_features, to_tensors
from xlviz.errors import XlvizError
from xlviz.training.loop import LoopConfig, train
from xlviz.training.qa_loss import QALoss

FEATURE_KEYS = ("input_ids", "attention_mask", "token_type_ids", "start_positions", "end_positions")


# --------------------------------------------------------------------------- per-process batches
def trim_padding(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Cut a right-padded batch to its longest sequence (features are padded to max_length)."""
    width = int(batch["attention_mask"].sum(1).max())
    return {k: (v[:, :width] if v.ndim == 2 else v) for k, v in batch.items()}


def per_process_batches(tok, examples: list[dict], *, max_length: int, doc_stride: int, batch_size: int, rank: int,
                        world_size: int, seed: int) -> Iterator[dict]:
    """Shuffled batches of ``batch_size`` QA training windows, epoch after epoch (this process's
    share of one permutation per epoch, drawn from one generator seeded with ``seed``)."""
    feats = to_tensors(prepare_train_features(tok, examples, max_length, doc_stride))
    n = len(feats["input_ids"])
    if n // world_size < batch_size:
        raise XlvizError(f"only {n} QA training windows for a batch of {batch_size} on {world_size} process(es); "
                         "lower batch_size or add qa_train_paragraphs", field="batch_size")
    gen = torch.Generator().manual_seed(seed)
    while True:
        order = torch.randperm(n, generator=gen)[rank::world_size]
        for i in range(0, len(order) - batch_size + 1, batch_size):
            idx = order[i: i + batch_size]
            yield trim_padding({k: v[idx] for k, v in feats.items()})


# --------------------------------------------------------------------------- global batches
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


def train_features(tokenizer, examples, max_length: int, doc_stride: int, chunk: int = 2000) -> dict[str, torch.Tensor]:
    """Training windows as int32 tensors, featurised chunk by chunk so a full SQuAD train set
    never sits in memory as Python lists."""
    parts: dict[str, list[torch.Tensor]] = {}
    keys = [k for k in FEATURE_KEYS if k in ("start_positions", "end_positions") or k in tokenizer.model_input_names]
    for lo in range(0, len(examples), chunk):
        f = prepare_train_features(tokenizer, examples[lo: lo + chunk], max_length, doc_stride)
        for k in keys:
            if k in f:
                parts.setdefault(k, []).append(torch.tensor(f[k], dtype=torch.int32))
    if not parts:
        raise XlvizError("no training examples", field="train")
    return {k: torch.cat(v) for k, v in parts.items()}


# --------------------------------------------------------------------------- the one path
def finetune_qa(
    model, tokenizer, examples: list[dict], *, accelerator, loop: LoopConfig, batch_size: int, max_length: int,
    doc_stride: int, seed: int, global_batch: bool, on_log: Callable[..., None] | None = None,
    on_eval: Callable | None = None, desc: str = "qa",
):
    """Fine-tune ``model`` (any ``*ForQuestionAnswering``) on SQuAD ``examples`` read with
    ``tokenizer`` for ``loop.steps`` optimizer steps (span loss in float32, :class:`QALoss`);
    returns the unwrapped model. ``global_batch``: ``batch_size`` is global (corpus sources,
    ``xlviz finetune-qa``), else per process (the world); ``seed`` seeds the batches' order."""
    if global_batch:
        feats = train_features(tokenizer, examples, max_length, doc_stride)
        batches = feature_batches(feats, batch_size=batch_size, rank=accelerator.process_index, world_size=accelerator.num_processes,
                                  grad_accum=loop.grad_accum, seed=seed)
    else:
        batches = per_process_batches(tokenizer, examples, max_length=max_length, doc_stride=doc_stride, batch_size=batch_size,
                                      rank=accelerator.process_index, world_size=accelerator.num_processes, seed=seed)
    trained = train(QALoss(model), batches, loop, accelerator, on_log=on_log, on_eval=on_eval, desc=desc).model
    accelerator.free_memory()
    return trained


__all__ = ["finetune_qa", "per_process_batches", "feature_batches", "train_features", "trim_padding", "trim_right_padding",
           "FEATURE_KEYS"]
