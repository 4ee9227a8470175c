"""VECO (Luo et al. 2021, §2): a BERT encoder with a plug-and-play cross-attention module in
every layer, saved as the registered model type ``xlviz_veco`` (no remote code).

Two streams share the self-attention and feed-forward parameters (θs):

- the self stream h (Eq. 2-5): a plain BERT pass over one sentence; what plug-out keeps;
- the cross stream s (Eq. 6-9): every layer runs self-attention over s^{l-1}, then the
  cross-attention module (θc) whose keys and values are the paired sentence's **last-layer**
  self-stream states h^L (the same h^L for every layer, as the text says: "the keys and values
  come from the last layer's representations of paired input"), then the feed-forward block.

Readings where the text is ambiguous (stated here, tested in tests/test_veco.py):

- Eq. 6 writes the cross-attention queries as s^{l-1} U^Q. We read the layer as Fig. 3 draws
  it (self-attention -> cross-attention -> feed-forward, stacked) and as §3.2 uses it (the
  module initialises a Transformer decoder's encoder-decoder attention): the queries are the
  layer input s^{l-1} *after* the layer's self-attention sub-layer, exactly a Transformer
  decoder layer without the causal mask. The cross-attention module is a full attention
  sub-layer (query/key/value projections, output projection, residual, LayerNorm).
- Eq. 7 writes K = h^L U^K: h^L is the last layer of the paired sentence's self stream, with
  the stop-gradient of §2 (h^L is a constant in the s terms, Eq. 12-13).
- s^0 is the sentence's own embedding output (word + position + segment), as h^0.
- Padding of the paired sentence is masked out of the keys (an additive -inf-like mask).

``plug_out`` drops every cross-attention parameter and returns a plain ``BertForMaskedLM`` /
``BertForQuestionAnswering`` (its self stream, weight for weight). The plug-in QA head reads
the concatenation [h^L_x ; s^L_x] (§3.1).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import AutoConfig, AutoModel, AutoModelForMaskedLM, AutoModelForQuestionAnswering, BertConfig
from transformers import BertForMaskedLM, BertForQuestionAnswering, BertModel
from transformers.models.bert.modeling_bert import BertAttention, BertLayer
from transformers.modeling_outputs import QuestionAnsweringModelOutput
from transformers.utils import ModelOutput

from xlviz.errors import XlvizError

MODEL_TYPE = "xlviz_veco"
CROSS = "crossattention"  # every cross-attention parameter's name contains this


class VecoConfig(BertConfig):
    """A BERT config whose layers carry a cross-attention module (``cross_attention`` True)."""

    model_type = MODEL_TYPE

    def __init__(self, cross_attention: bool = True, **kwargs):
        super().__init__(**kwargs)
        self.cross_attention = cross_attention


def has_cross_attention(model_or_config) -> bool:
    """Whether a model (or config) has VECO's cross-attention: what pages check, by type."""
    config = getattr(model_or_config, "config", model_or_config)
    return getattr(config, "model_type", "") == MODEL_TYPE and bool(getattr(config, "cross_attention", False))


def additive_mask(mask: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """[B, Lk] 1/0 padding mask -> [B, 1, 1, Lk] additive mask (0 kept, dtype's min masked)."""
    if mask is None:
        return None
    return (1.0 - mask[:, None, None, :].to(dtype)) * torch.finfo(dtype).min


def no_padding(mask: torch.Tensor | None) -> torch.Tensor | None:
    """None for a mask without padding: attention then runs unmasked (SDPA's fast path; the
    same numbers)."""
    return None if mask is None or bool(mask.all()) else mask


class VecoLayer(BertLayer):
    """A BERT layer plus the plug-and-play cross-attention; without a paired sentence it is
    exactly ``BertLayer`` (the self stream)."""

    def __init__(self, config, layer_idx: int | None = None):
        super().__init__(config, layer_idx=layer_idx)
        self.crossattention = BertAttention(config, is_causal=False, layer_idx=layer_idx, is_cross_attention=True)

    def cross_forward(self, hidden: torch.Tensor, mask, pair: torch.Tensor, pair_mask) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One layer of the cross stream: self-attention, cross-attention over ``pair``
        (keys/values), feed-forward. Returns (output, cross-attention probabilities or None)."""
        attended, _ = self.attention(hidden, mask)
        crossed, probs = self.crossattention(attended, None, pair, pair_mask)
        return self.feed_forward_chunk(crossed), probs


class VecoModel(BertModel):
    config_class = VecoConfig

    def __init__(self, config, add_pooling_layer: bool = True):
        super().__init__(config, add_pooling_layer=add_pooling_layer)
        self.encoder.layer = nn.ModuleList([VecoLayer(config, layer_idx=i) for i in range(config.num_hidden_layers)])
        self.post_init()

    def self_stream(self, input_ids, attention_mask=None, token_type_ids=None) -> torch.Tensor:
        """h^L (Eq. 2-5): the plain BERT pass, [B, L, H]."""
        attention_mask = no_padding(attention_mask)
        return super().forward(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).last_hidden_state

    def cross_stream(self, input_ids, attention_mask, token_type_ids, pair_states: torch.Tensor, pair_mask: torch.Tensor | None,
                     output_attentions: bool = False) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """s^L (Eq. 6-9) of ``input_ids`` attending over ``pair_states`` (the paired sentence's
        h^L, [B, Lp, H]; its padding ``pair_mask`` [B, Lp]); with ``output_attentions`` the
        cross-attention probabilities per layer [B, heads, L, Lp] (eager attention)."""
        attention_mask, pair_mask = no_padding(attention_mask), no_padding(pair_mask)
        hidden = self.embeddings(input_ids=input_ids, token_type_ids=token_type_ids)
        mask, _ = self._create_attention_masks(attention_mask=attention_mask, encoder_attention_mask=None, embedding_output=hidden,
                                               encoder_hidden_states=None, past_key_values=None)
        pmask = additive_mask(pair_mask, hidden.dtype)
        pair_states = pair_states.to(hidden.dtype)
        probs = []
        saved = self.config._attn_implementation
        if output_attentions:
            self.config._attn_implementation = "eager"  # the only interface that returns probabilities
        try:
            for layer in self.encoder.layer:
                hidden, p = layer.cross_forward(hidden, mask, pair_states, pmask)
                probs.append(p)
        finally:
            self.config._attn_implementation = saved
        return hidden, probs

    def streams(self, input_ids, attention_mask, token_type_ids, pair_input_ids, pair_attention_mask, pair_token_type_ids=None,
                output_attentions: bool = False):
        """(h^L_x, s^L_x, cross-attention probabilities): x's self stream and its cross stream
        over y's last layer h^L_y, under the stop-gradient of §2."""
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        if pair_attention_mask is None:
            pair_attention_mask = torch.ones_like(pair_input_ids)
        h = self.self_stream(input_ids, attention_mask, token_type_ids)
        pair = self.self_stream(pair_input_ids, pair_attention_mask, pair_token_type_ids).detach()
        s, probs = self.cross_stream(input_ids, attention_mask, token_type_ids, pair, pair_attention_mask, output_attentions)
        return h, s, probs


@dataclass
class VecoMLMOutput(ModelOutput):
    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    loss_terms: dict | None = None  # CA-MLM: the four terms of Eq. 1 (h_x, s_x, h_y, s_y)


def masked_ce(cls: nn.Module, hidden: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of the vocabulary head at the masked positions only (labels != -100)."""
    flat = labels.reshape(-1)
    index = (flat != -100).nonzero().squeeze(1)
    if index.numel() == 0:
        return hidden.sum() * 0.0
    rows = hidden.reshape(-1, hidden.size(-1))[index]
    return F.cross_entropy(cls(rows).float(), flat[index])


class VecoForMaskedLM(BertForMaskedLM):
    """Masked LM with the two streams. Without ``pair_input_ids``: plain MLM on the self stream
    (MLM, TLM). With them: CA-MLM, Eq. 1, in both directions: x from h_x and s_x (over y),
    y (``pair_labels``) from h_y and s_y (over x); the loss is the sum of the four terms, each
    the mean over its masked tokens."""

    config_class = VecoConfig

    def __init__(self, config):
        super().__init__(config)
        self.bert = VecoModel(config, add_pooling_layer=False)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, labels=None, pair_input_ids=None,
                pair_attention_mask=None, pair_token_type_ids=None, pair_labels=None, **kwargs):
        if pair_input_ids is None:
            h = self.bert.self_stream(input_ids, attention_mask, token_type_ids)
            logits = self.cls(h)
            loss = None if labels is None else F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), labels.reshape(-1))
            return VecoMLMOutput(loss=loss, logits=logits)
        return VecoMLMOutput(**ca_mlm(self, input_ids, attention_mask, labels, pair_input_ids, pair_attention_mask, pair_labels))


def pad_to(t: torch.Tensor, width: int, value: int) -> torch.Tensor:
    return F.pad(t, (0, width - t.size(1)), value=value) if t.size(1) < width else t


def ca_mlm(model: VecoForMaskedLM, x, x_mask, x_labels, y, y_mask, y_labels) -> dict:
    """CA-MLM (Eq. 1) in one batched pass per stream: the rows [x; y] run the self stream
    once, then the cross stream with the halves' last layers swapped (x attends over h^L_y,
    y over h^L_x), detached (§2's stop-gradient). Returns {loss, loss_terms}."""
    if x_labels is None or y_labels is None:
        raise XlvizError("CA-MLM needs labels for both sentences of a pair", field="pair_labels")
    b, width = x.size(0), max(x.size(1), y.size(1))
    x_mask = torch.ones_like(x) if x_mask is None else x_mask
    y_mask = torch.ones_like(y) if y_mask is None else y_mask
    ids = torch.cat([pad_to(x, width, 0), pad_to(y, width, 0)])
    mask = torch.cat([pad_to(x_mask, width, 0), pad_to(y_mask, width, 0)])
    labels = torch.cat([pad_to(x_labels, width, -100), pad_to(y_labels, width, -100)])
    h = model.bert.self_stream(ids, mask)
    pair = torch.cat([h[b:], h[:b]]).detach()
    pair_mask = torch.cat([mask[b:], mask[:b]])
    s, _ = model.bert.cross_stream(ids, mask, None, pair, pair_mask)
    terms = {"h_x": masked_ce(model.cls, h[:b], labels[:b]), "s_x": masked_ce(model.cls, s[:b], labels[:b]),
             "h_y": masked_ce(model.cls, h[b:], labels[b:]), "s_y": masked_ce(model.cls, s[b:], labels[b:])}
    return {"loss": sum(terms.values()), "loss_terms": terms}


class VecoForQuestionAnswering(BertForQuestionAnswering):
    """Plug-in fine-tuning (§3.1): span logits from [h^L_x ; s^L_x], x attending over its
    paired sentence (its translation). Needs ``pair_input_ids``."""

    config_class = VecoConfig

    def __init__(self, config):
        super().__init__(config)
        self.bert = VecoModel(config, add_pooling_layer=False)
        self.qa_outputs = nn.Linear(2 * config.hidden_size, config.num_labels)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, start_positions=None, end_positions=None,
                pair_input_ids=None, pair_attention_mask=None, pair_token_type_ids=None, **kwargs):
        if pair_input_ids is None:
            raise XlvizError("a plug-in VECO QA model reads a sentence with its translation: pass pair_input_ids", field="pair_input_ids")
        h, s, _ = self.bert.streams(input_ids, attention_mask, token_type_ids, pair_input_ids, pair_attention_mask, pair_token_type_ids)
        start, end = self.qa_outputs(torch.cat([h, s], -1)).split(1, dim=-1)
        start, end = start.squeeze(-1).contiguous(), end.squeeze(-1).contiguous()
        loss = None
        if start_positions is not None and end_positions is not None:
            from xlviz.models.losses import span_loss

            loss = span_loss(start, end, start_positions, end_positions)
        return QuestionAnsweringModelOutput(loss=loss, start_logits=start, end_logits=end)


# --------------------------------------------------------------------------- plug-in / plug-out
def plain_config(config: VecoConfig) -> BertConfig:
    """The BERT config of the self stream (no VECO fields, model_type bert)."""
    d = config.to_dict()
    for key in ("model_type", "cross_attention", "architectures", "transformers_version"):
        d.pop(key, None)
    return BertConfig(**d)


def veco_config(config: BertConfig) -> VecoConfig:
    d = config.to_dict()
    for key in ("model_type", "architectures", "transformers_version", "adapter_size"):
        d.pop(key, None)
    return VecoConfig(**d)


def _load(dst: nn.Module, state: dict, allowed_missing: str) -> nn.Module:
    missing, unexpected = dst.load_state_dict(state, strict=False)
    bad = [m for m in missing if allowed_missing not in m and m not in _tied(dst)]
    if bad or unexpected:
        raise XlvizError(f"cannot convert {type(dst).__name__}: missing {bad}, unexpected {unexpected}", field="model")
    if hasattr(dst, "tie_weights"):
        dst.tie_weights()
    return dst


def _tied(model: nn.Module) -> set[str]:
    return {"cls.predictions.decoder.weight", "cls.predictions.decoder.bias"} if isinstance(model, BertForMaskedLM) else set()


@torch.no_grad()
def plug_out(model: nn.Module) -> nn.Module:
    """Unplug the cross-attention: a plain ``BertForMaskedLM`` (from VecoForMaskedLM) or
    ``BertForQuestionAnswering`` (from a VecoForMaskedLM's body via :func:`qa_from_mlm`) with
    every other weight copied; it computes the self stream exactly and reloads with
    ``AutoModel*``. Plain models pass through."""
    if not has_cross_attention(model):
        return model
    if not isinstance(model, VecoForMaskedLM):
        raise XlvizError(f"plug-out takes a VECO masked LM, got {type(model).__name__}", field="model")
    state = {k: v.detach().clone() for k, v in model.state_dict().items() if CROSS not in k}
    out = _load(BertForMaskedLM(plain_config(model.config)), state, allowed_missing="\0")
    return out.to(dtype=model.dtype).train(model.training)


@torch.no_grad()
def plug_in(mlm: nn.Module, seed: int = 0) -> VecoForMaskedLM:
    """A VECO masked LM from a plain BERT masked LM (e.g. jointpair-disjoint's joint model):
    every weight copied, the cross-attention new (BERT's initialisation, seeded)."""
    torch.manual_seed(seed)
    out = VecoForMaskedLM(veco_config(mlm.config))
    return _load(out, {k: v.detach().clone() for k, v in mlm.state_dict().items()}, allowed_missing=CROSS)


@torch.no_grad()
def plugin_qa(mlm: VecoForMaskedLM, seed: int = 0) -> VecoForQuestionAnswering:
    """Plug-in fine-tuning's start: the VECO body (cross-attention in) and a fresh span head
    over [h ; s]."""
    torch.manual_seed(seed)
    qa = VecoForQuestionAnswering(copy.deepcopy(mlm.config))
    state = {k: v.detach().clone() for k, v in mlm.state_dict().items() if k.startswith("bert.")}
    return _load(qa, state, allowed_missing="qa_outputs")


@torch.no_grad()
def plug_out_qa(model: VecoForQuestionAnswering) -> BertForQuestionAnswering:
    """A plug-in fine-tuned QA model with the cross-attention unplugged at test time: a plain
    ``BertForQuestionAnswering`` that reads no translation. Without the cross-attention
    sub-layers the cross stream's layers are self-attention then feed-forward, the self
    stream's layers, so s^L = h^L and the span head over [h ; s] becomes one over h with
    weight W_h + W_s (same bias)."""
    if not isinstance(model, VecoForQuestionAnswering):
        raise XlvizError(f"plug-out at test time takes a plug-in VECO QA model, got {type(model).__name__}", field="model")
    hidden = model.config.hidden_size
    state = {k: v.detach().clone() for k, v in model.state_dict().items() if CROSS not in k and not k.startswith("qa_outputs.")}
    w = model.qa_outputs.weight.detach()
    state["qa_outputs.weight"] = (w[:, :hidden] + w[:, hidden:]).clone()
    state["qa_outputs.bias"] = model.qa_outputs.bias.detach().clone()
    out = _load(BertForQuestionAnswering(plain_config(model.config)), state, allowed_missing="\0")
    return out.to(dtype=model.dtype).train(model.training)


def cross_attention_parameters(model: nn.Module) -> list[str]:
    return [n for n, _ in model.named_parameters() if CROSS in n]


AutoConfig.register(MODEL_TYPE, VecoConfig, exist_ok=True)
AutoModel.register(VecoConfig, VecoModel, exist_ok=True)
AutoModelForMaskedLM.register(VecoConfig, VecoForMaskedLM, exist_ok=True)
AutoModelForQuestionAnswering.register(VecoConfig, VecoForQuestionAnswering, exist_ok=True)

__all__ = ["VecoConfig", "VecoModel", "VecoForMaskedLM", "VecoForQuestionAnswering", "plug_out", "plug_in", "plugin_qa", "plug_out_qa",
           "has_cross_attention", "cross_attention_parameters", "ca_mlm", "MODEL_TYPE"]
