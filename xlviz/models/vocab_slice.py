"""Turn a model trained on a disjoint joint vocabulary into one plain HF model per language.

Why: a JOINTPAIR-disjoint or Wu et al. model reads every language through one embedding
matrix (:class:`xlviz.data.joint_vocab.DisjointVocab`), but every page, ``predict_qa`` and
``load_model`` expect a plain model that reads a language's own tokenizer ids. Slicing the
language's rows out of the word embeddings (and out of the tied MLM decoder and its bias)
gives exactly that: a ``BertForMaskedLM`` / ``BertForQuestionAnswering`` / ``BertModel`` with
``vocab_size`` = the language's vocabulary, whose outputs on the language's ids equal the
joint model's outputs on the mapped ids (the rows of other languages only ever enter a
forward pass through the MLM softmax, and they are dropped from it).
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from xlviz.data.joint_vocab import DisjointVocab
from xlviz.errors import XlvizError
from xlviz.models.surgery import names_of, word_embeddings


def _vocab_tensors(model: nn.Module) -> list[torch.Tensor]:
    """The tensors with one row per vocabulary entry: word embeddings, and for MLM models the
    decoder weight (usually tied to them) and bias."""
    tensors = [word_embeddings(model).weight]
    out = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if out is not None:
        tensors.append(out.weight)
        if getattr(out, "bias", None) is not None:
            tensors.append(out.bias)
    return tensors


@torch.no_grad()
def slice_to_language(model: nn.Module, vocab: DisjointVocab, lang: str) -> nn.Module:
    """A new model of ``type(model)`` for ``lang`` alone: vocabulary rows
    ``vocab.language_rows(lang)`` (the language's tokenizer order), everything else copied.
    Tied input/output embeddings stay tied. The result saves with ``save_pretrained`` and
    loads with ``AutoModel*`` + the language's own tokenizer."""
    joint = word_embeddings(model).weight.shape[0]
    if joint != vocab.vocab_size:
        raise XlvizError(
            f"model has {joint} embedding rows but the disjoint vocabulary has {vocab.vocab_size}", field="vocab_size"
        )
    rows = vocab.language_rows(lang).to(word_embeddings(model).weight.device)
    sliced_names = {name for t in _vocab_tensors(model) for name in names_of(model, t)}
    state = {
        name: (t.index_select(0, rows) if name in sliced_names else t).detach().clone()
        for name, t in model.state_dict().items()
    }
    config = copy.deepcopy(model.config)
    config.vocab_size = len(rows)
    new = type(model)(config).to(dtype=word_embeddings(model).weight.dtype, device=rows.device)
    missing, unexpected = new.load_state_dict(state, strict=False)
    tied = {n for t in _vocab_tensors(new) for n in names_of(new, t)}
    if unexpected or set(missing) - tied:
        raise XlvizError(f"cannot slice {type(model).__name__}: missing {missing}, unexpected {unexpected}", field="model")
    if hasattr(new, "tie_weights"):
        new.tie_weights()
    new.train(model.training)
    return new
