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

from xlviz.data.joint_vocab import smoothed_weights
from xlviz.errors import XlvizError

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
