"""MONOTRANS step 1b: give a pre-trained encoder without a masked-LM head (a sentence-embedding
BERT such as all-MiniLM-L6-v2) a head learned on L1, with the body frozen.

Why: step 2 learns L2 token embeddings by masked-LM through the frozen L1 body, so it needs
an MLM head that reads that body. The paper starts from a BERT that has one; a sentence
encoder does not. Here the head is BERT's own (transform: dense + GELU + LayerNorm, then the
output layer) with the output layer tied to the input embeddings. The transform, the output
bias and the ``[MASK]`` input row train; the body and every other embedding row stay exactly
the pre-trained ones, so everything else step 2 and the floor inherit is the original model.
The ``[MASK]`` row has to learn: a sentence encoder never read ``[MASK]`` (all-MiniLM-L6-v2's
row is near zero), and with it frozen the head learned word frequencies only.

The transform starts as the identity (dense weight = I, bias 0), so before any training the
logits are already the last layer, through GELU and LayerNorm, against the tied embeddings.
That reads more from the body than a random head and converges in a few hundred steps.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from xlviz.errors import XlvizError

# Names of MLM-head weights in the checkpoints of the architectures xlviz loads (BERT, RoBERTa
# family, DistilBERT, ELECTRA generator).
MLM_HEAD_MARKERS = ("cls.predictions.", "lm_head.", "vocab_transform.", "vocab_projector.", "generator_lm_head.")


def _weight_names(folder: Path) -> list[str] | None:
    from safetensors import safe_open

    from xlviz.io import read_json

    single, index = folder / "model.safetensors", folder / "model.safetensors.index.json"
    if index.is_file():
        return list(read_json(index, what="safetensors index").get("weight_map", {}))
    if single.is_file():
        try:
            with safe_open(str(single), framework="pt") as st:
                return list(st.keys())
        except Exception as e:  # SafetensorError
            raise XlvizError(f"corrupt safetensors file: {e}", path=single) from None
    return None


def has_mlm_head(name_or_path: str | os.PathLike) -> bool:
    """Whether a local model folder's weights include a masked-LM head. Hub ids (and folders
    without safetensors, which ``load_model`` refuses with its own message) count as having
    one: their check is ``load_model(..., task="mlm")``'s."""
    folder = Path(name_or_path).expanduser()
    if not folder.is_dir():
        return True
    names = _weight_names(folder)
    if names is None:
        return True
    return any(marker in name for name in names for marker in MLM_HEAD_MARKERS)


def learns_mlm_head(name_or_path: str | os.PathLike) -> bool:
    """Whether step 1b applies: a local BERT folder whose weights have no MLM head. (Other
    architectures without one keep ``load_model``'s clear refusal, e.g. for an ELECTRA
    discriminator, whose generator checkpoint is the right model.)"""
    from xlviz.io import read_json

    config = Path(name_or_path).expanduser() / "config.json"
    if not config.is_file() or has_mlm_head(name_or_path):
        return False
    cfg = read_json(config, what="model config")
    return isinstance(cfg, dict) and cfg.get("model_type") == "bert"


def mlm_from_encoder(name_or_path: str | os.PathLike, tokenizer=None):
    """``(masked LM, tokenizer)``: the encoder with a new BERT MLM head whose output layer is
    tied to the input embeddings and whose transform starts as the identity."""
    from xlviz.models.loading import load_model
    from xlviz.models.surgery import output_layer, word_embeddings

    model, tok = load_model(name_or_path, task="mlm", attn_implementation="sdpa", new_head="ok", tokenizer=tokenizer)
    if model.config.model_type != "bert":
        raise XlvizError(f"step 1b learns a BERT MLM head; this is a {model.config.model_type} model without one",
                         path=name_or_path, field="init_model")
    model.tie_weights()
    if output_layer(model).weight.data_ptr() != word_embeddings(model).weight.data_ptr():
        raise XlvizError("the output layer could not be tied to the input embeddings (tie_word_embeddings is off?)",
                         path=name_or_path, field="tie_word_embeddings")
    transform = model.cls.predictions.transform
    with torch.no_grad():
        transform.dense.weight.copy_(torch.eye(transform.dense.weight.shape[0]))
        transform.dense.bias.zero_()
        transform.LayerNorm.weight.fill_(1.0)
        transform.LayerNorm.bias.zero_()
        model.cls.predictions.bias.zero_()
    return model, tok


class _OnlyRows:
    """Gradient hook: keep the gradient of the given embedding rows, zero the rest."""

    def __init__(self, n_rows: int, rows: list[int]):
        self.keep = torch.zeros(n_rows, 1)
        self.keep[rows] = 1.0

    def __call__(self, grad: torch.Tensor) -> torch.Tensor:
        return grad * self.keep.to(grad.device, grad.dtype)


def freeze_for_head(model, *, mask_id: int | None = None, top_layers: int = 0) -> list[str]:
    """Train the MLM head's own weights (not the tied output layer = input embeddings).
    Returns the names of the trainable parameters.

    ``mask_id`` (the tokenizer's ``[MASK]`` id): that input embedding trains too (its gradient is kept for that row
    only, every other row stays bit for bit). A sentence encoder never read ``[MASK]``: in
    all-MiniLM-L6-v2 its row has norm 0.25 against 1.07 for a word (smaller than the
    never-used ``[unusedN]`` rows), so the frozen body cannot tell a masked position from
    noise, and a head on top of it learns little more than word frequencies (docs/real-models.md).
    ``[MASK]`` is never a target, and step 2 shares the row with L2 as a special row.
    ``top_layers``: the last K transformer layers train too (continued English MLM of the
    top of the body: a deviation from the paper's frozen step 1, documented where used).
    """
    from xlviz.models.surgery import base_encoder, word_embeddings

    emb = word_embeddings(model)
    tied = emb.weight
    prefix = f"{model.base_model_prefix}."
    trainable = []
    for name, p in model.named_parameters():
        train = not name.startswith(prefix) and p is not tied
        p.requires_grad_(train)
        if train:
            trainable.append(name)
    if not trainable:
        raise XlvizError(f"{type(model).__name__} has no MLM head parameters to train")
    if mask_id is not None:
        if not 0 <= mask_id < emb.num_embeddings:
            raise XlvizError(f"[MASK] id {mask_id} is outside the vocabulary of {emb.num_embeddings}", field="mask_token_id")
        tied.requires_grad_(True)
        tied.register_hook(_OnlyRows(emb.num_embeddings, [int(mask_id)]))
        trainable.append(f"{prefix}embeddings.word_embeddings.weight[{int(mask_id)}]")
    if top_layers:
        layers = base_encoder(model).encoder.layer
        if not 0 < top_layers <= len(layers):
            raise XlvizError(f"must be between 0 and {len(layers)} (the model's layers)", field="mlm_head_top_layers")
        for i in range(len(layers) - top_layers, len(layers)):
            for name, p in layers[i].named_parameters():
                p.requires_grad_(True)
                trainable.append(f"{prefix}encoder.layer.{i}.{name}")
    return trainable


__all__ = ["MLM_HEAD_MARKERS", "freeze_for_head", "has_mlm_head", "learns_mlm_head", "mlm_from_encoder"]
