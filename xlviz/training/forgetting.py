"""Active forgetting (Chen et al., NeurIPS 2023, "Improving language plasticity via
pretraining with active forgetting"): while a masked LM pre-trains, its token embeddings are
re-drawn every K updates, with their optimizer state, so the body learns to work with
embeddings it has not seen before and a later embedding-only adaptation to a new language
starts from a body that expects that.

What the authors' code (facebookresearch/language-model-plasticity, fairseq) does, and this
module with it:

- after update K, 2K, ... the token-embedding matrix is re-drawn with the model's own
  initialisation (RoBERTa's N(0, 0.02), the padding row zero; here the config's
  ``initializer_range`` and BERT's zero padding row); the MLM decoder is tied to it, so it
  follows; the decoder's output bias is not touched (fairseq's ``lm_head.bias`` is not part
  of ``embed_tokens``);
- their ``adamef`` optimizer zeroes Adam's first and second moments of the embedding entries
  and restarts the embeddings' own step counter (``step_emb``), so bias correction starts
  afresh; here the embeddings are one parameter with its own AdamW state, whose ``exp_avg``,
  ``exp_avg_sq`` and ``step`` are zeroed, which is the same thing.

One difference of schedule: the last update is never followed by a reset (the authors pick
their best checkpoint, saved before a reset, for the same reason), so step 1 ends with L1
embeddings trained for the updates since the last reset: the last ``steps mod K`` (or K).
"""

from __future__ import annotations

import torch

# The paper: K = 1,000 updates in a 125,000-update pre-training (0.8% of it).
PAPER_K, PAPER_STEPS = 1000, 125_000


def scaled_every(steps: int) -> int:
    """K for a pre-training of ``steps`` updates at the paper's ratio K / steps = 1000 / 125000
    (at least 1): 8 for the bench's default 1,000 steps."""
    return max(1, round(steps * PAPER_K / PAPER_STEPS))


def reset_steps(every: int, steps: int) -> list[int]:
    """The updates after which the embeddings are re-drawn: K, 2K, ... up to ``steps`` - K, so
    the embeddings the body ends with have had K updates (or more), as the paper's last
    embeddings (125 resets in 125,000 updates, the last 1,000 kept) have."""
    return list(range(every, steps - every + 1, every)) if every > 0 else []


class EmbeddingReset:
    """``after_step`` callback of :func:`xlviz.training.loop.train` that re-draws one
    parameter (the token embeddings, by its name in the trained module) and zeroes its AdamW
    state after every ``every``-th update but the last of ``steps``.

    The new rows are N(0, ``std``^2) from a generator seeded by ``seed`` and the update number,
    so every process of a distributed run draws the same matrix; ``zero_rows`` (the padding
    row) are set to 0 as the model's initialisation does."""

    def __init__(self, name: str, every: int, steps: int, *, std: float, seed: int, zero_rows: tuple[int, ...] = ()):
        self.name, self.every, self.steps = name, int(every), int(steps)
        self.std, self.seed, self.zero_rows = float(std), int(seed), tuple(zero_rows)
        self.at = frozenset(reset_steps(self.every, self.steps))
        self.done: list[int] = []  # the updates after which a reset happened

    def draw(self, shape: torch.Size, step: int) -> torch.Tensor:
        """The matrix the reset after update ``step`` writes (float32)."""
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + step)
        weight = torch.randn(shape, generator=g) * self.std
        for row in self.zero_rows:
            weight[row] = 0.0
        return weight

    def __call__(self, step: int, optimizer: torch.optim.Optimizer, params: dict[str, torch.Tensor]) -> None:
        if step not in self.at:
            return
        p = params[self.name]
        with torch.no_grad():
            p.copy_(self.draw(p.shape, step).to(p.device, p.dtype))
        state = optimizer.state.get(p, {})
        for key in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step"):
            if isinstance(state.get(key), torch.Tensor):
                state[key].zero_()
            elif key in state:
                state[key] = 0
        self.done.append(step)


__all__ = ["EmbeddingReset", "scaled_every", "reset_steps", "PAPER_K", "PAPER_STEPS"]
