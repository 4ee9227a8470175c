"""Wu et al. (2020)'s partially shared bilingual BERT: the bottom L-K encoder layers are
language-specific (one copy per language), only the top K are shared.

Wu et al. find that "the only requirement [for transfer] is that there are some shared
parameters in the top layers" (abstract); ``xlviz demo --methods wu-sweep`` sweeps K to see
it on the generated world. Here every language gets
its own ``BertForMaskedLM`` view whose encoder is ``[its own bottom layers] + [the shared top
layers]`` and whose embeddings and MLM head are the shared modules themselves (the same
``nn.Module`` objects, so the same parameters): a batch of one language runs through that
language's view with transformers' own forward, gradients reach only the modules that batch
used, ``parameters()`` lists each shared tensor once, and :class:`xlviz.training.mlm.MaskedOnlyMLM`
wraps a view (``model.views[lang]``) as it wraps any ``BertForMaskedLM``.

The embeddings are shared as a module: with the disjoint joint vocabulary
(:class:`xlviz.data.joint_vocab.DisjointVocab`) two languages share only the special rows,
positions, segments and the embedding LayerNorm; likewise the MLM head's transform
(dense + LayerNorm) is shared and its tied decoder rows are the disjoint ones. K = L shares
the whole encoder (JOINTPAIR-disjoint); K = 0 shares no encoder layer: nothing of the
Transformer body is shared, Wu et al.'s no-transfer extreme, although the embedding module's
non-word parts and the MLM head transform named above still are.
"""

from __future__ import annotations

import copy
from typing import Mapping, Sequence

import torch
from torch import nn
from transformers import BertConfig, BertForMaskedLM

from xlviz.errors import XlvizError


class SharedTopLayers(nn.Module):
    """Per-language bottom layers, shared top ``shared_top`` layers, shared embeddings and head.

    ``model``: a ``BertForMaskedLM`` (its weights seed every copy: each language's bottom
    layers start as copies of the model's, so all languages start identical, as one model
    whose bottom layers are then untied) or a ``BertConfig`` (a fresh random model)."""

    def __init__(self, model: BertForMaskedLM | BertConfig, languages: Sequence[str], shared_top: int):
        super().__init__()
        base = BertForMaskedLM(model) if isinstance(model, BertConfig) else model
        n_layers = base.config.num_hidden_layers
        if not 0 <= shared_top <= n_layers:
            raise XlvizError(f"shared_top must be within 0..{n_layers}, got {shared_top}", field="shared_top")
        languages = list(languages)
        if not languages or len(set(languages)) != len(languages):
            raise XlvizError(f"need distinct languages, got {languages}", field="languages")
        self.config = base.config
        self.languages = languages
        self.shared_top = shared_top
        self.n_specific = n_layers - shared_top
        layers = list(base.bert.encoder.layer)
        self.embeddings = base.bert.embeddings
        self.head = base.cls
        self.shared = nn.ModuleList(layers[self.n_specific:])
        # The memo keeps one config object: attention modules read ``config._attn_implementation``
        # from it, and set_attn_implementation (e.g. Bf16Weights') changes it on the model's config.
        self.specific = nn.ModuleDict({
            lang: nn.ModuleList(copy.deepcopy(layers[: self.n_specific], {id(self.config): self.config})) for lang in languages
        })
        self.views = nn.ModuleDict({lang: self._view(base, lang) for lang in languages})

    @classmethod
    def from_plain(cls, models: Mapping[str, BertForMaskedLM], shared_top: int) -> "SharedTopLayers":
        """Rebuild from the per-language plain models :meth:`to_plain` exported (e.g. after a
        stage saved them with ``save_pretrained``): shared parts from the first language, each
        language's own bottom layers copied from its model (the first model's modules are used, not
        copied). Refuses models whose shared parts differ."""
        langs = list(models)
        if not langs:
            raise XlvizError("no per-language models given", field="models")
        first = models[langs[0]]
        model = cls(first, langs, shared_top)
        bottom = model.n_specific
        for lang in langs:
            other = models[lang]
            shared_other = [other.bert.embeddings, other.cls, *list(other.bert.encoder.layer)[bottom:]]
            shared_first = [first.bert.embeddings, first.cls, *list(first.bert.encoder.layer)[bottom:]]
            for a, b in zip(shared_first, shared_other):
                if any(not torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values())):
                    raise XlvizError(f"the shared layers of {lang!r} differ from those of {langs[0]!r}", field="models")
            with torch.no_grad():
                for mine, theirs in zip(model.specific[lang], list(other.bert.encoder.layer)[:bottom]):
                    mine.load_state_dict(theirs.state_dict())
        return model

    def _view(self, base: BertForMaskedLM, lang: str) -> BertForMaskedLM:
        """A BertForMaskedLM whose modules are this module's (built on the meta device, so no
        throw-away weights are allocated, then every submodule replaced)."""
        with torch.device("meta"):
            view = BertForMaskedLM(self.config)
        view.bert.embeddings = self.embeddings
        view.cls = self.head
        view.bert.encoder.layer = nn.ModuleList(list(self.specific[lang]) + list(self.shared))
        left = [n for n, t in list(view.named_parameters()) + list(view.named_buffers()) if t.is_meta]
        if left:
            raise AssertionError(f"view of {lang!r} kept meta tensors: {left}")
        view.train(base.training)
        return view

    def _language(self, language: str) -> str:
        if language not in self.views:
            raise XlvizError(f"unknown language {language!r}; this model has {self.languages}", field="language")
        return language

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                labels: torch.Tensor | None = None, *, language: str, **kwargs):
        """``BertForMaskedLM``'s forward (``MaskedLMOutput``) for a batch of one ``language``
        (ids in the joint vocabulary's space)."""
        return self.views[self._language(language)](input_ids=input_ids, attention_mask=attention_mask, labels=labels, **kwargs)

    def language_layers(self, language: str) -> nn.ModuleList:
        """The language-specific (bottom) layers of ``language``."""
        return self.specific[self._language(language)]

    def to_plain(self, language: str) -> BertForMaskedLM:
        """An independent plain ``BertForMaskedLM`` (joint vocabulary) for ``language``: its
        bottom layers, the shared top layers, embeddings and head, copied (tied decoder kept
        tied). Same outputs as ``forward(..., language=language)``. Slice it to the
        language's own vocabulary with :func:`xlviz.models.vocab_slice.slice_to_language`."""
        plain = copy.deepcopy(self.views[self._language(language)])
        plain.tie_weights()
        return plain


def with_bottom_layers(model: nn.Module, layers: Sequence[nn.Module]) -> nn.Module:
    """A copy of a plain BERT-style ``model`` (``*ForMaskedLM``, ``*ForQuestionAnswering``,
    ``BertModel``) whose bottom ``len(layers)`` encoder layers are copies of ``layers``:
    zero-shot transfer of a model fine-tuned on L1 (shared top layers and task head from the
    fine-tuned model, the L2's own bottom layers from pre-training)."""
    new = copy.deepcopy(model)
    encoder = new.base_model.encoder.layer
    if len(layers) > len(encoder):
        raise XlvizError(f"{len(layers)} bottom layers for a model of {len(encoder)}", field="layers")
    for i, layer in enumerate(layers):
        encoder[i] = copy.deepcopy(layer)
    return new
