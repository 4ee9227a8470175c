"""The extractive-QA span loss, computed in float32 whatever precision the model runs in."""

from __future__ import annotations

import torch
from torch import nn

from xlviz.models.losses import span_loss  # noqa: F401 - the loop's QALoss and the models share one span loss


class QALoss(nn.Module):
    """Wraps a ``*ForQuestionAnswering`` model so the forward pass returns the span loss (for
    the shared loop). Wrapping keeps DistributedDataParallel's gradient sync intact."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, start_positions: torch.Tensor, end_positions: torch.Tensor, **batch: torch.Tensor) -> torch.Tensor:
        out = self.model(**batch)
        return span_loss(out.start_logits, out.end_logits, start_positions, end_positions)
