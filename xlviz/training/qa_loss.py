"""The extractive-QA span loss, computed in float32 whatever precision the model runs in."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def span_loss(start_logits: torch.Tensor, end_logits: torch.Tensor, start_positions: torch.Tensor,
              end_positions: torch.Tensor) -> torch.Tensor:
    """Mean of the start and end cross-entropies, as ``BertForQuestionAnswering`` computes it
    (positions outside the window are clamped to its length and ignored), but from float32
    logits: a bf16 softmax over a window would round the loss of a confident model."""
    n = start_logits.size(1)
    start = start_positions.long().clamp(0, n)
    end = end_positions.long().clamp(0, n)
    return (F.cross_entropy(start_logits.float(), start, ignore_index=n) + F.cross_entropy(end_logits.float(), end, ignore_index=n)) / 2


class QALoss(nn.Module):
    """Wraps a ``*ForQuestionAnswering`` model so the forward pass returns the span loss (for
    the shared loop). Wrapping keeps DistributedDataParallel's gradient sync intact."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, start_positions: torch.Tensor, end_positions: torch.Tensor, **batch: torch.Tensor) -> torch.Tensor:
        out = self.model(**batch)
        return span_loss(out.start_logits, out.end_logits, start_positions, end_positions)
