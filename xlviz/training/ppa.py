"""Post-pretraining alignment (Pan et al. 2021, §2): the multi-task model (MoCo + TLM) and its
batches of translation pairs. No world knowledge: pairs arrive as token ids.

Why: PPA aligns an already multilingual encoder with parallel text at two levels at once: the
sentence level by MoCo on the [CLS] states of a sentence and its translation
(:mod:`xlviz.training.moco`), the word level by TLM on the concatenated pair. Both halves of a
pair go to the query or key encoder at random (random input shuffling) and the same draw
orders the TLM concatenation. The objective is a setting, so a run can reproduce the shape of
the paper's ablation (Table 5):

- ``moco+tlm``: the paper's PPA, L = L_MoCo + L_TLM (Eq. 4);
- ``moco``: "- TLM" (the LM head gets no gradient and is frozen);
- ``tlm``: "- MoCo" (no momentum encoder, head or queue);
- ``moco+mlm``: "repl TLM w/ MLM": MLM instead of TLM on the same sentences, each masked on its
  own (no translation in context), so the word-level task sees the same text without the
  alignment signal (the paper used monolingual text for the same purpose).

TLM follows §2.2: ``[CLS] A [SEP] B [SEP]``, positions not reset (0 … L-1 over both halves), no
language or segment embeddings (token type 0 throughout), 15% of the tokens masked across both
halves, 80/10/10 (:func:`xlviz.training.mlm.mask_tokens`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Sequence

import torch
from torch import nn
from transformers.utils import ModelOutput

from xlviz.errors import XlvizError
from xlviz.training.masking import MASK_PROBABILITY, RANDOM_SHARE
from xlviz.training.mlm import MaskedOnlyMLM, mask_tokens
from xlviz.training.moco import MoCo

OBJECTIVES = ("moco+tlm", "moco", "tlm", "moco+mlm")


def parse_objective(objective: str) -> tuple[bool, str | None]:
    """``"moco+tlm"`` -> (MoCo on, word-level task ``"tlm"``)."""
    if objective not in OBJECTIVES:
        raise XlvizError(f"unknown PPA objective {objective!r}; choose from {list(OBJECTIVES)}", field="ppa_objective")
    parts = objective.split("+")
    return "moco" in parts, next((p for p in parts if p in ("tlm", "mlm")), None)


@dataclass
class PPAOutput(ModelOutput):
    loss: torch.Tensor | None = None
    moco_loss: torch.Tensor | None = None
    word_loss: torch.Tensor | None = None


class PPAModel(nn.Module):
    """A masked LM (``model``; its encoder is MoCo's query encoder) with MoCo beside it.

    ``forward`` takes a batch of :func:`pair_batches`; given a plain MLM batch
    (``input_ids``, ``labels``) it uses the sentence as both views and the masked copy as the
    word-level input, so generic checks (a backward pass) can drive it. After training,
    ``model`` is the aligned encoder (the paper's extracted query encoder)."""

    def __init__(self, mlm: nn.Module, objective: str = "moco+tlm", *, dim: int = 128, queue_size: int = 512,
                 momentum: float = 0.999, temperature: float = 0.05, seed: int = 0):
        super().__init__()
        self.model = mlm
        self.objective = objective
        use_moco, self.word = parse_objective(objective)
        self.moco = MoCo(mlm.base_model, mlm.config.hidden_size, dim, queue_size, momentum, temperature, seed) if use_moco else None
        if self.word is None:  # "- TLM": the LM head is unused; frozen so DDP sees no unused trainable parameter
            body = {id(p) for p in mlm.base_model.parameters()}
            for p in mlm.parameters():
                if id(p) not in body:
                    p.requires_grad_(False)

    @property
    def config(self):
        return self.model.config

    def get_input_embeddings(self) -> nn.Module:
        return self.model.get_input_embeddings()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                key_input_ids: torch.Tensor | None = None, key_attention_mask: torch.Tensor | None = None,
                word_input_ids: torch.Tensor | None = None, word_attention_mask: torch.Tensor | None = None,
                word_labels: torch.Tensor | None = None, labels: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None) -> PPAOutput:
        moco_loss = word_loss = None
        if self.moco is not None:
            if key_input_ids is None:
                key_input_ids, key_attention_mask = input_ids, attention_mask
            moco_loss = self.moco(input_ids, key_input_ids, attention_mask, key_attention_mask)
        if self.word is not None:
            if word_input_ids is None:
                word_input_ids, word_attention_mask, word_labels = input_ids, attention_mask, labels
            word_loss = MaskedOnlyMLM(self.model)(word_input_ids, word_labels, word_attention_mask)
        loss = sum(x for x in (moco_loss, word_loss) if x is not None)
        return PPAOutput(loss=loss, moco_loss=moco_loss, word_loss=word_loss)


class PPALoss(nn.Module):
    """The PPA model's loss as a tensor, for the shared loop (wrapping keeps DDP's sync)."""

    def __init__(self, ppa: PPAModel):
        super().__init__()
        self.ppa = ppa

    def forward(self, **batch: torch.Tensor) -> torch.Tensor:
        return self.ppa(**batch).loss


# --------------------------------------------------------------------------- batches
@dataclass(frozen=True)
class Specials:
    """The ids a pair batch needs from the model's vocabulary."""

    cls: int
    sep: int
    pad: int
    mask: int
    vocab_size: int
    special: tuple[int, ...]  # never masked

    @classmethod
    def of(cls, tokenizer, vocab_size: int) -> "Specials":
        return cls(tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id, tokenizer.mask_token_id,
                   vocab_size, tuple(tokenizer.all_special_ids))


WIDTH_BUCKET = 8


def pad(rows: Sequence[Sequence[int]], pad_id: int, bucket: int = WIDTH_BUCKET) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ids and their attention mask, the width rounded up to a multiple of
    ``bucket``: pairs differ in length in every batch, and oneDNN compiles new bf16 kernels
    for every new shape (see :data:`xlviz.training.mlm.MASKED_ROW_BUCKET`)."""
    width = -(-max(len(r) for r in rows) // bucket) * bucket
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r, dtype=torch.long)
        mask[i, : len(r)] = 1
    return ids, mask


def tlm_rows(first: Sequence[Sequence[int]], second: Sequence[Sequence[int]], sp: Specials) -> list[list[int]]:
    """``[CLS] A [SEP] B [SEP]`` per pair: one sequence, positions running on across both halves."""
    return [[sp.cls, *a, sp.sep, *b, sp.sep] for a, b in zip(first, second)]


def masked(rows: Sequence[Sequence[int]], sp: Specials, prob: float, generator: torch.Generator,
           random_share: float = RANDOM_SHARE) -> dict[str, torch.Tensor]:
    """Padded rows masked BERT's way (80/10/10 at the default ``random_share``) at ``prob`` of their
    non-special tokens."""
    ids, mask = pad(rows, sp.pad)
    candidates = ~torch.isin(ids, torch.tensor(sp.special)) & mask.bool()
    inputs, labels = mask_tokens(ids, mask_id=sp.mask, vocab_size=sp.vocab_size, prob=prob, generator=generator, candidates=candidates,
                                 random_share=random_share)
    return {"word_input_ids": inputs, "word_attention_mask": mask, "word_labels": labels}


def pair_batches(pairs: Sequence[tuple[Sequence[int], Sequence[int]]], batch_size: int, sp: Specials, *, objective: str = "moco+tlm",
                 prob: float = MASK_PROBABILITY, seed: int = 0, rank: int = 0, world_size: int = 1,
                 random_share: float = RANDOM_SHARE) -> Iterator[dict[str, torch.Tensor]]:
    """Endless PPA batches of ``batch_size`` pairs (this process's share of each epoch's
    shuffle). Each pair's sides are swapped with probability 1/2 (random input shuffling); the
    first side is the query view, the second the key view, and the same order concatenates
    the TLM sequence."""
    use_moco, word = parse_objective(objective)
    if len(pairs) // world_size < batch_size:
        raise XlvizError(f"only {len(pairs)} parallel pairs for a PPA batch of {batch_size} on {world_size} process(es)",
                         field="ppa_batch_size")
    gen = torch.Generator().manual_seed(seed)
    mask_gen = torch.Generator().manual_seed(seed * 31 + rank)
    while True:
        order = torch.randperm(len(pairs), generator=gen)
        swaps = torch.rand(len(pairs), generator=gen) < 0.5  # drawn for every pair, so every process draws alike
        mine = order[rank::world_size]
        for i in range(0, len(mine) - batch_size + 1, batch_size):
            idx = mine[i: i + batch_size].tolist()
            first = [pairs[j][1] if swaps[j] else pairs[j][0] for j in idx]
            second = [pairs[j][0] if swaps[j] else pairs[j][1] for j in idx]
            batch: dict[str, torch.Tensor] = {}
            if use_moco:
                batch["input_ids"], batch["attention_mask"] = pad([[sp.cls, *a, sp.sep] for a in first], sp.pad)
                batch["key_input_ids"], batch["key_attention_mask"] = pad([[sp.cls, *b, sp.sep] for b in second], sp.pad)
            if word == "tlm":
                batch.update(masked(tlm_rows(first, second, sp), sp, prob, mask_gen, random_share))
            elif word == "mlm":
                batch.update(masked([[sp.cls, *s, sp.sep] for s in (*first, *second)], sp, prob, mask_gen, random_share))
            if not use_moco:  # forward's first argument: the word-level input stands in
                batch["input_ids"], batch["attention_mask"] = batch["word_input_ids"], batch["word_attention_mask"]
            yield batch


__all__ = ["OBJECTIVES", "parse_objective", "PPAModel", "PPALoss", "PPAOutput", "Specials", "pair_batches", "tlm_rows", "masked", "pad"]
