"""Losses that models compute in their own forward pass (a model sits below the training
layer, so the loss it shares with the training loop lives here)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def span_loss(start_logits: torch.Tensor, end_logits: torch.Tensor, start_positions: torch.Tensor,
              end_positions: torch.Tensor) -> torch.Tensor:
    """Mean of the start and end cross-entropies, as ``BertForQuestionAnswering`` computes it
    (positions outside the window are clamped to its length and ignored), but from float32
    logits: a bf16 softmax over a window would round the loss of a confident model."""
    n = start_logits.size(1)
    start = start_positions.long().clamp(0, n)
    end = end_positions.long().clamp(0, n)
    return (F.cross_entropy(start_logits.float(), start, ignore_index=n) + F.cross_entropy(end_logits.float(), end, ignore_index=n)) / 2
