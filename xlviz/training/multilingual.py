"""Multi-language MLM batches for the joint models (JOINTPAIR, JOINTMULTI, Wu et al.).

Which language a batch (or a row) comes from is drawn from q_i ∝ p_i^alpha, p_i being a
language's share of the data: Conneau & Lample (2019)'s exponentially smoothed sampling,
which Artetxe et al. (§3.2) use for the joint models' pre-training and vocabulary
(:func:`xlviz.data.joint_vocab.smoothed_weights`). alpha = 0 gives equal weights (balanced,
what the issue asks of JOINTPAIR), alpha = 1 the natural proportions. Without ``sizes`` the
languages are balanced whatever alpha.

Two modes: ``"batch"`` yields batches of one language each (needed when a batch runs through
language-specific layers, :class:`xlviz.models.shared_layers.SharedTopLayers`), languages drawn
per batch from a seeded generator; ``"mixed"`` draws each row's language, for models that
read every language with the same parameters. ``"alternate"`` is round-robin (one batch per
language in turn), balanced exactly rather than in expectation.
"""

from __future__ import annotations

import random
from typing import Iterator, Mapping

import torch
from torch import nn

from xlviz.data.joint_vocab import DisjointVocab, smoothed_weights
from xlviz.errors import XlvizError
from xlviz.models.shared_layers import SharedTopLayers
from xlviz.training.masking import MASK_PROBABILITY, RANDOM_SHARE
from xlviz.training.mlm import MaskedOnlyMLM, mask_tokens

MODES = ("batch", "mixed", "alternate")


def multilingual_batches(
    blocks: Mapping[str, Iterator[list[int]]],
    batch_size: int,
    *,
    mode: str = "batch",
    sizes: Mapping[str, float] | None = None,
    alpha: float = 0.0,
    seed: int = 0,
) -> Iterator[tuple[str | None, torch.Tensor]]:
    """Endless ``(language, [batch_size, block] LongTensor)`` batches from per-language block
    iterators (e.g. :func:`xlviz.training.mlm.iter_blocks` over each language's corpus, ids
    already in the model's id space). In ``"mixed"`` mode the language is ``None``. Stops when
    a language's iterator runs out. Blocks of all languages must have one length to mix."""
    if mode not in MODES:
        raise XlvizError(f"unknown batch mode {mode!r}; choose from {list(MODES)}", field="mode")
    if batch_size <= 0:
        raise XlvizError(f"batch_size must be positive, got {batch_size}", field="batch_size")
    languages = list(blocks)
    if not languages:
        raise XlvizError("no languages to draw batches from", field="blocks")
    q = smoothed_weights({lang: (sizes.get(lang, 0) if sizes is not None else 1.0) for lang in languages}, alpha)
    weights = [q[lang] for lang in languages]
    rng = random.Random(seed)
    turn = 0
    while True:
        try:
            if mode == "mixed":
                rows = [next(blocks[lang]) for lang in rng.choices(languages, weights, k=batch_size)]
                yield None, torch.tensor(rows)
                continue
            if mode == "alternate":
                lang = languages[turn % len(languages)]
                turn += 1
            else:
                lang = rng.choices(languages, weights)[0]
            yield lang, torch.tensor([next(blocks[lang]) for _ in range(batch_size)])
        except StopIteration:
            return


def mlm_inputs(
    stream: Iterator[tuple[str | None, torch.Tensor]],
    languages: list[str],
    *,
    mask_id: int,
    vocab: DisjointVocab | None = None,
    vocab_size: int | None = None,
    prob: float = MASK_PROBABILITY,
    random_share: float = RANDOM_SHARE,
    seed: int = 0,
) -> Iterator[dict[str, torch.Tensor]]:
    """``loop.train`` batches ``{"input_ids", "labels", "language"}`` (language: the index in
    ``languages``, a 0-d tensor, since the loop moves every value to the device) from
    :func:`multilingual_batches`. With a disjoint ``vocab`` the blocks are in each language's
    own id space: they are masked there (BERT's random replacements drawn from the language's
    own tokens) and mapped into the joint space; without one they are masked over
    ``vocab_size`` (a joint vocabulary). A mixed batch (language None) has index -1."""
    if (vocab is None) == (vocab_size is None):
        raise XlvizError("give either a disjoint vocab or the joint vocab_size", field="vocab")
    generator = torch.Generator().manual_seed(seed)
    for lang, ids in stream:
        if vocab is not None:
            if lang is None:
                raise XlvizError("mixed batches cannot be masked per language; map the blocks to the joint space and pass vocab_size",
                                 field="mode")
            inputs, labels = mask_tokens(ids, mask_id=mask_id, vocab_size=vocab.sizes[lang], prob=prob, generator=generator, random_share=random_share)
            inputs, labels = vocab.to_joint(lang, inputs), vocab.to_joint(lang, labels)
        else:
            inputs, labels = mask_tokens(ids, mask_id=mask_id, vocab_size=vocab_size, prob=prob, generator=generator, random_share=random_share)
        yield {"input_ids": inputs, "labels": labels, "language": torch.tensor(-1 if lang is None else languages.index(lang))}


class PerLanguageMLM(nn.Module):
    """The masked-only MLM loss (:class:`~xlviz.training.mlm.MaskedOnlyMLM`, the fast path) of a
    :class:`~xlviz.models.shared_layers.SharedTopLayers` model, for ``loop.train``: each batch
    runs through its language's view. Under DDP, pass ``find_unused_parameters=True`` (the other
    languages' bottom layers get no gradient from a batch)."""

    def __init__(self, model: SharedTopLayers):
        super().__init__()
        self.model = model
        self.losses = nn.ModuleDict({lang: MaskedOnlyMLM(view) for lang, view in model.views.items()})

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor, language: torch.Tensor,
                attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        index = language.reshape(-1)
        if index.numel() == 0 or bool((index != index[0]).any()) or not 0 <= int(index[0]) < len(self.model.languages):
            raise XlvizError(f"a batch must name one language index in 0..{len(self.model.languages) - 1}", field="language")
        return self.losses[self.model.languages[int(index[0])]](input_ids, labels, attention_mask=attention_mask)
