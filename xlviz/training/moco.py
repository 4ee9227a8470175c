"""MoCo for sentence-level alignment (He et al. 2020, as PPA uses it: Pan et al. 2021, §2.1).

Why: PPA aligns sentence representations of translations with a contrastive loss whose
negatives come from a queue of keys encoded by a slowly moving copy of the encoder, so the
negatives outnumber the batch without a large batch. This module is the maths only (no world,
no method): a query encoder, a momentum (key) encoder updated by an exponential moving
average and never by gradient, a non-linear projection head on the L2-normalised [CLS] state
(Eq. 2: ``z = W2 ReLU(W1 h)``), InfoNCE at a temperature (Eq. 3), and a queue of negatives.

Reading of the paper where it is terse: ``h`` is L2-normalised before the head (its words);
``z`` is L2-normalised after it, as MoCo's own code does, so that the dot products divided by
τ = 0.05 are cosines over 0.05 (unnormalised dot products at that temperature overflow). As in
MoCo's code, the key encoder is updated at the start of each forward pass (from the query
weights the last optimizer step left) and the keys are enqueued at its end; under N processes
the keys of every process are gathered first (``accelerate.utils.gather``), so every process
holds the same queue.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from accelerate.utils import gather
from torch import nn


class ProjectionHead(nn.Module):
    """``z = W2 ReLU(W1 h)`` on the L2-normalised sentence state ``h`` (PPA Eq. 2, after
    SimCLR); ``W1``: hidden -> hidden, ``W2``: hidden -> ``dim``."""

    def __init__(self, hidden: int, dim: int):
        super().__init__()
        self.w1 = nn.Linear(hidden, hidden)
        self.w2 = nn.Linear(hidden, dim)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.w2(F.relu(self.w1(F.normalize(h.float(), dim=-1).to(self.w1.weight.dtype))))


def info_nce(q: torch.Tensor, k: torch.Tensor, negatives: torch.Tensor, temperature: float) -> torch.Tensor:
    """InfoNCE (PPA Eq. 3): ``-log exp(q·k+/τ) / (exp(q·k+/τ) + Σ exp(q·n/τ))``, mean over the
    batch, in float32. ``q``, ``k``: [B, D]; ``negatives``: [K, D]."""
    q, k, negatives = q.float(), k.float(), negatives.float()
    positive = (q * k).sum(-1, keepdim=True)
    logits = torch.cat([positive, q @ negatives.T], dim=1) / temperature
    return F.cross_entropy(logits, torch.zeros(len(q), dtype=torch.long, device=q.device))


def cls_state(encoder: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """The last hidden state of the first token ([CLS]) of a Hugging Face encoder."""
    return encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state[:, 0]


class MoCo(nn.Module):
    """Query encoder, momentum encoder, their projection heads and a queue of negatives.

    ``encoder`` (e.g. ``BertForMaskedLM.bert``) is the query encoder, shared with whoever
    owns it (PPA's TLM runs through it too); the key encoder and head are deep copies that
    never require gradient. ``forward(query, key)`` returns the InfoNCE loss of one batch and
    enqueues its keys."""

    def __init__(self, encoder: nn.Module, hidden: int, dim: int = 128, queue_size: int = 512, momentum: float = 0.999,
                 temperature: float = 0.05, seed: int = 0):
        super().__init__()
        self.encoder_q = encoder
        self.head_q = ProjectionHead(hidden, dim)
        self.encoder_k = copy.deepcopy(encoder).requires_grad_(False)
        self.head_k = copy.deepcopy(self.head_q).requires_grad_(False)
        self.momentum, self.temperature = momentum, temperature
        # the paper's queue is randomly initialised: unit random vectors
        queue = torch.randn(queue_size, dim, generator=torch.Generator().manual_seed(seed))
        self.register_buffer("queue", F.normalize(queue, dim=1))
        self.register_buffer("queue_ptr", torch.zeros((), dtype=torch.long))
        self._ema: list[torch.Tensor] | None = None  # float32 key weights (see momentum_update)

    def key_pairs(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """(query parameter, key parameter) pairs, encoder and head."""
        return list(zip(list(self.encoder_q.parameters()) + list(self.head_q.parameters()),
                        list(self.encoder_k.parameters()) + list(self.head_k.parameters())))

    @torch.no_grad()
    def momentum_update(self) -> None:
        """θ_k <- m θ_k + (1 - m) θ_q. The running average is kept in float32 beside the key
        weights: when the loop holds the model in bf16 (CPU mixed precision), an update of
        0.001 × (θ_q - θ_k) would round away in bf16 and the key encoder would never move."""
        pairs = self.key_pairs()
        if self._ema is None or len(self._ema) != len(pairs) or self._ema[0].device != pairs[0][1].device:
            self._ema = [k.detach().float().clone() for _, k in pairs]
        queries = [q.detach().float() for q, _ in pairs]
        torch._foreach_mul_(self._ema, self.momentum)
        torch._foreach_add_(self._ema, queries, alpha=1 - self.momentum)
        for (_, k), e in zip(pairs, self._ema):
            k.copy_(e)

    @torch.no_grad()
    def enqueue(self, keys: torch.Tensor) -> None:
        """Put ``keys`` (this process's) into the queue, gathered from every process first, the
        oldest entries replaced; with more keys than room, the last ``queue_size`` are kept."""
        keys = gather(keys.detach().contiguous()).to(self.queue.dtype)
        size = self.queue.shape[0]
        keys = keys[-size:]
        ptr = int(self.queue_ptr)
        index = (ptr + torch.arange(len(keys), device=self.queue.device)) % size
        self.queue[index] = keys
        self.queue_ptr.fill_((ptr + len(keys)) % size)

    def ordered_queue(self) -> torch.Tensor:
        """The queue from the oldest key to the newest."""
        return torch.roll(self.queue, -int(self.queue_ptr), dims=0)

    def query(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Unit projections of the query encoder's [CLS] states."""
        return F.normalize(self.head_q(cls_state(self.encoder_q, input_ids, attention_mask)).float(), dim=1)

    @torch.no_grad()
    def key(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Unit projections of the momentum encoder's [CLS] states (no gradient)."""
        return F.normalize(self.head_k(cls_state(self.encoder_k, input_ids, attention_mask)).float(), dim=1)

    def forward(self, input_ids: torch.Tensor, key_input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                key_attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """InfoNCE of a batch of (query view, key view) pairs against the queue; then the keys
        join the queue."""
        q = self.query(input_ids, attention_mask)
        self.momentum_update()
        k = self.key(key_input_ids, key_attention_mask)
        loss = info_nce(q, k, self.queue.clone().detach(), self.temperature)
        self.enqueue(k)
        return loss


__all__ = ["MoCo", "ProjectionHead", "info_nce", "cls_state"]
