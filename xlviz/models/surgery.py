"""Architecture-generic access to the parts of an encoder that MONOTRANS swaps, freezes and copies.

Why: BERT keeps its MLM head in ``model.cls``, RoBERTa/XLM-R in ``model.lm_head``, DistilBERT
in four loose modules (``vocab_transform`` ... ``vocab_projector``) and the ELECTRA generator
in ``generator_predictions`` + ``generator_lm_head``; RoBERTa positions start after the
padding id; DistilBERT has no segment embeddings. Everything MONOTRANS does goes through the
accessors here (``get_input_embeddings`` / ``get_output_embeddings`` / ``base_model`` where
transformers offers them), so :mod:`xlviz.models.monotrans` works on every supported
encoder, and an architecture without an MLM head (an ELECTRA discriminator, a QA model) is
refused with one clear :class:`~xlviz.errors.XlvizError`.
"""

from __future__ import annotations

from typing import Iterable

import torch
import torch.nn.functional as F
from torch import nn

from xlviz.errors import XlvizError

# Position ids of these start at padding_idx + 1 (computed from input_ids != padding_idx).
ROBERTA_LIKE = ("roberta", "xlm-roberta", "camembert")


def model_type(model) -> str:
    return str(getattr(model.config, "model_type", "?"))


def base_encoder(model) -> nn.Module:
    """The bare encoder inside a task model (``model.bert``, ``model.roberta``, ...)."""
    base = getattr(model, "base_model", None)
    return base if base is not None else model


def embeddings_module(model) -> nn.Module:
    emb = getattr(base_encoder(model), "embeddings", None)
    if emb is None:
        raise XlvizError(f"{type(model).__name__} has no embeddings module; xlviz transfers BERT-style encoders")
    return emb


def word_embeddings(model) -> nn.Embedding:
    return model.get_input_embeddings()


def position_embeddings(model) -> nn.Embedding | None:
    return getattr(embeddings_module(model), "position_embeddings", None)


def segment_embeddings(model) -> nn.Embedding | None:
    """Token-type embeddings, or None (DistilBERT has none)."""
    return getattr(embeddings_module(model), "token_type_embeddings", None)


def first_position_row(model) -> int:
    """Row of the position matrix used by the first token ([CLS] / <s>)."""
    if model_type(model) in ROBERTA_LIKE:
        return int(model.config.pad_token_id) + 1
    return 0


def output_layer(model) -> nn.Linear:
    """The MLM decoder (vocabulary projection); a clear error when the model has no MLM head."""
    out = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if out is None or not hasattr(out, "weight"):
        archs = ", ".join(getattr(model.config, "architectures", None) or [type(model).__name__])
        hint = (
            " (an ELECTRA discriminator: use the ELECTRA *generator* checkpoint, which has the MLM head)"
            if model_type(model) == "electra" else ""
        )
        raise XlvizError(
            f"{type(model).__name__} ({archs}) has no masked-LM head{hint}; MONOTRANS step 2 and MLM probing need a "
            "*ForMaskedLM model: load it with load_model(path, task='mlm')"
        )
    return out


def output_bias(model) -> nn.Parameter | None:
    return getattr(output_layer(model), "bias", None)


def is_tied(model) -> bool:
    return output_layer(model).weight is word_embeddings(model).weight


def names_of(model, tensor: torch.Tensor) -> list[str]:
    """Every state-dict name under which ``tensor`` (a parameter, maybe tied) is stored."""
    return [n for n, t in model.state_dict(keep_vars=True).items() if t is tensor]


def mlm_logits(model, hidden: torch.Tensor) -> torch.Tensor:
    """Vocabulary logits from encoder outputs, through the model's own MLM head."""
    if hasattr(model, "cls") and hasattr(model.cls, "predictions"):  # BERT
        return model.cls(hidden)
    if hasattr(model, "lm_head"):  # RoBERTa, XLM-R, CamemBERT
        return model.lm_head(hidden)
    if hasattr(model, "vocab_projector"):  # DistilBERT
        h = model.vocab_layer_norm(model.activation(model.vocab_transform(hidden)))
        return model.vocab_projector(h)
    if hasattr(model, "generator_lm_head"):  # ELECTRA generator
        return model.generator_lm_head(model.generator_predictions(hidden))
    output_layer(model)  # raises the no-MLM-head error for heads we cannot see
    raise XlvizError(f"xlviz does not know the MLM head layout of {type(model).__name__}")


class MaskedOnlyLoss(nn.Module):
    """MLM loss with vocabulary logits at masked positions only, for any supported encoder.

    ``denominator`` (optional) replaces the number of masked tokens in the mean: a
    multi-process run passes ``global masked tokens / (processes x accumulation steps)`` so
    that the averaged gradients equal those of one process on the whole global batch.
    Wrapping the model (instead of calling its parts from outside) keeps DDP's gradient sync.
    """

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model
        output_layer(model)

    def forward(
        self,
        input_ids: torch.Tensor,
        labels: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        denominator: torch.Tensor | None = None,
    ) -> torch.Tensor:
        hidden = base_encoder(self.model)(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        selected = labels != -100
        logits = mlm_logits(self.model, hidden[selected])
        if denominator is None:
            return F.cross_entropy(logits.float(), labels[selected])
        return F.cross_entropy(logits.float(), labels[selected], reduction="sum") / denominator.float().reshape(())


def copy_matching(src: nn.Module, dst: nn.Module, *, skip_names: Iterable[str] = (), skip_parts: Iterable[str] = (),
                  require_all: bool = True) -> list[str]:
    """Copy every parameter/buffer of ``dst`` from the same name in ``src``.

    Names in ``skip_names`` or containing one of ``skip_parts`` are left alone. A shape
    mismatch raises; with ``require_all`` a parameter of ``dst`` that ``src`` lacks raises too
    (it would silently stay random). Returns the names copied.
    """
    skip_names, skip_parts = set(skip_names), tuple(skip_parts)
    src_state = src.state_dict()
    copied, missing = [], []
    with torch.no_grad():
        for name, t in dst.state_dict().items():
            if name in skip_names or any(s in name for s in skip_parts):
                continue
            if name not in src_state:
                missing.append(name)
                continue
            if src_state[name].shape != t.shape:
                raise XlvizError(f"shape mismatch for {name}: {tuple(src_state[name].shape)} vs {tuple(t.shape)}")
            t.copy_(src_state[name])
            copied.append(name)
    param_names = {n for n, _ in dst.named_parameters()}
    missing = [n for n in missing if n in param_names]
    if require_all and missing:
        shown = ", ".join(missing[:4]) + (f" (+{len(missing) - 4} more)" if len(missing) > 4 else "")
        raise XlvizError(
            f"cannot build {type(dst).__name__} from {type(src).__name__}: no weights for {shown}"
        )
    return copied


__all__ = [
    "ROBERTA_LIKE", "model_type", "base_encoder", "embeddings_module", "word_embeddings", "position_embeddings",
    "segment_embeddings", "first_position_row", "output_layer", "output_bias", "is_tied", "names_of", "mlm_logits",
    "MaskedOnlyLoss", "copy_matching",
]
