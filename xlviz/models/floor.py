"""Step 2's starting point and, untrained, the floor: a masked LM's body under a new, untrained
token-embedding matrix for another vocabulary (MONOTRANS, Artetxe et al. 2020, §2).

Why one module: MONOTRANS's step 2 (on the generated world and on corpus sources), the floor
system (step 2 skipped), the methods that start from step 2's rows (active forgetting, WECHSEL,
xx→en) and the analyses' rebuilt floor (:func:`xlviz.models.reference.load_spec`) must start
from the same rows, seed for seed; three copies of the recipe had drifted apart. The untrained
rows are drawn here and nowhere else (``tests/test_house.py``).

The recipe (:func:`floor_model`):

- the body (every parameter but the token embeddings and the MLM decoder) copied from the
  L1 model;
- new rows drawn N(0, ``init_std``²) with a generator seeded by ``seed`` (``init_std`` None:
  the model's ``initializer_range``), or, ``init="l1_stats"``, from the L1 rows' per-dimension
  mean and std with ``seed + 1``;
- the special rows (matched by role, :func:`xlviz.data.vocabulary.special_row_map`) and their
  MLM output bias copied from L1; the config's ``pad_token_id`` the new tokenizer's.
"""

from __future__ import annotations

from typing import Mapping

import torch
from torch import nn
from transformers import PreTrainedModel

from xlviz.data.vocabulary import special_ids_of, special_row_map
from xlviz.errors import XlvizError
from xlviz.models.monotrans import config_for, default_rows, mlm_class
from xlviz.models.surgery import ROBERTA_LIKE, copy_matching, names_of, output_layer, word_embeddings

EMBEDDING_INITS = ("random", "l1_stats")


def new_l2_embeddings(
    l1_embeddings: nn.Embedding, vocab_size: int, seed: int, std: float = 0.02, special_rows: Mapping[int, int] | None = None
) -> torch.Tensor:
    """A fresh L2 embedding matrix (BERT init, seeded) whose special rows are L1's
    (``special_rows``: {l2 id: l1 id}, default the first ``N_SPECIAL`` ids)."""
    g = torch.Generator().manual_seed(seed)
    weight = torch.randn(vocab_size, l1_embeddings.embedding_dim, generator=g) * std
    l1 = l1_embeddings.weight.detach().float()
    for l2_id, l1_id in default_rows(special_rows).items():
        weight[l2_id] = l1[l1_id]
    return weight.to(l1_embeddings.weight.dtype)


def make_l2_mlm(
    l1_model: PreTrainedModel, vocab_size: int, *, seed: int, adapter_size: int = 0, l2_positions: bool = False,
    special_rows: Mapping[int, int] | None = None, config_overrides: Mapping | None = None, init_std: float | None = None,
) -> PreTrainedModel:
    """The L1 masked LM with a new, randomly initialised L2 vocabulary (the primitive under
    :func:`floor_model`, for callers that set the rows themselves).

    Copies the whole body and MLM transform; the decoder stays tied to the new embeddings and
    gets a zero bias for the new vocabulary (special rows' bias from L1). ``l2_positions`` is
    accepted for symmetry: L2 position embeddings start as a copy of L1's in any case and train
    in step 2 when :func:`xlviz.models.monotrans.freeze_for_step2` is told so.
    ``config_overrides`` sets e.g. the L2 tokenizer's ``pad_token_id``. ``init_std`` (the new
    rows' std) defaults to the config's ``initializer_range``. Any supported ``*ForMaskedLM``;
    no MLM head -> XlvizError.
    """
    l1_out = output_layer(l1_model)
    rows = default_rows(special_rows)
    bad = [i for i in rows if not 0 <= i < vocab_size] + [j for j in rows.values() if not 0 <= j < l1_model.config.vocab_size]
    if bad:
        raise XlvizError(f"special rows {rows} do not fit vocabularies of {vocab_size} (L2) and {l1_model.config.vocab_size} (L1)")
    config = config_for(l1_model.config, vocab_size, adapter_size, **dict(config_overrides or {}))
    model = mlm_class(config)(config)
    out = output_layer(model)
    emb = word_embeddings(model)
    skip = set(names_of(model, emb.weight)) | set(names_of(model, out.weight))
    if out.bias is not None:
        skip |= set(names_of(model, out.bias))
    copy_matching(l1_model, model, skip_names=skip, skip_parts=(".adapter.",))
    with torch.no_grad():
        std = getattr(config, "initializer_range", 0.02) if init_std is None else init_std
        emb.weight.copy_(new_l2_embeddings(word_embeddings(l1_model), vocab_size, seed, std, rows))
        if out.weight is not emb.weight:  # untied decoder: start it as the new embeddings
            out.weight.copy_(emb.weight)
        if out.bias is not None:
            out.bias.zero_()
            if l1_out.bias is not None:
                for l2_id, l1_id in rows.items():
                    out.bias[l2_id] = l1_out.bias[l1_id]
    model.tie_weights()
    return model


def floor_model(
    body: PreTrainedModel, body_tok, new_tok, *, seed: int, init: str = "random", init_std: float | None = None,
    adapter_size: int = 0,
) -> PreTrainedModel:
    """Step 2's starting point, and (untrained) the floor: ``body`` (a masked LM read with
    ``body_tok``; the L1 model, or for xx→en an L2 one) with untrained rows for ``new_tok``'s
    vocabulary, drawn as the module docstring says. Each caller passes what its step 2 uses:
    ``seed`` (the run's seed + 1), ``init_std`` (the world's ``l2_init_std``; corpus sources:
    None, the model's ``initializer_range``), ``init`` (corpus sources' ``embedding_init``),
    ``adapter_size`` (``monotrans+adapters``)."""
    if init not in EMBEDDING_INITS:
        raise XlvizError(f"unknown embedding init '{init}'; use {' or '.join(EMBEDDING_INITS)}", field="embedding_init")
    pad = new_tok.pad_token_id
    if body.config.model_type in ROBERTA_LIKE and pad != body.config.pad_token_id:
        raise XlvizError(f"the new tokenizer pads with id {pad} but the model's positions assume {body.config.pad_token_id}; "
                         "learn its vocabulary with train_tokenizer_like(reference=the model's tokenizer)")
    overrides = {"pad_token_id": pad} if pad is not None else {}
    model = make_l2_mlm(body, len(new_tok), seed=seed, adapter_size=adapter_size, special_rows=special_row_map(body_tok, new_tok),
                        config_overrides=overrides, init_std=init_std)
    if init == "l1_stats":
        src = word_embeddings(body).weight.detach().float()
        keep = torch.ones(len(src), dtype=torch.bool)
        keep[special_ids_of(body_tok)] = False
        mean, std = src[keep].mean(0), src[keep].std(0)
        g = torch.Generator().manual_seed(seed + 1)
        w = word_embeddings(model).weight
        special = set(special_ids_of(new_tok))
        rows = [i for i in range(w.shape[0]) if i not in special]
        with torch.no_grad():
            w[rows] = (mean + std * torch.randn(len(rows), w.shape[1], generator=g)).to(w.dtype)
    return model


__all__ = ["EMBEDDING_INITS", "new_l2_embeddings", "make_l2_mlm", "floor_model"]
