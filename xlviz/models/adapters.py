"""Houlsby et al. (2019) bottleneck adapters for BERT, as MONOTRANS uses them in step 2: one
after the projection following multi-head attention and one after the feed-forward block of
every layer, before the residual connection and layer norm. The original body stays frozen.

Models with adapters are saved as ``model_type="xlviz_bert"``; importing this module (which
:func:`xlviz.models.register_model_types` does) registers that type with the ``AutoModel*``
classes (no remote code involved).
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import AutoConfig, AutoModel, AutoModelForMaskedLM, AutoModelForQuestionAnswering, BertConfig
from transformers import BertForMaskedLM, BertForQuestionAnswering, BertModel


class Adapter(nn.Module):
    """x + up(gelu(down(x))), initialised near the identity as Houlsby et al. do: both
    projections drawn from a near-zero normal (std 1e-2). (A zero ``up`` would also start at
    the identity, but then ``down`` gets no gradient on the first step.)"""

    def __init__(self, hidden: int, size: int):
        super().__init__()
        self.down = nn.Linear(hidden, size)
        self.up = nn.Linear(size, hidden)
        self.act = nn.GELU()
        nn.init.normal_(self.down.weight, std=1e-2)
        nn.init.zeros_(self.down.bias)
        nn.init.normal_(self.up.weight, std=1e-2)
        nn.init.zeros_(self.up.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.up(self.act(self.down(x)))


class AdaptedOutput(nn.Module):
    """BertSelfOutput / BertOutput with an adapter between the projection and the residual."""

    def __init__(self, base: nn.Module, size: int):
        super().__init__()
        self.dense = base.dense
        self.LayerNorm = base.LayerNorm
        self.dropout = base.dropout
        self.adapter = Adapter(base.dense.out_features, size)

    def forward(self, hidden_states: torch.Tensor, input_tensor: torch.Tensor) -> torch.Tensor:
        h = self.dropout(self.dense(hidden_states))
        return self.LayerNorm(self.adapter(h) + input_tensor)


def add_adapters(bert: BertModel, size: int) -> None:
    """Insert adapters into every layer of ``bert`` in place (keeps parameter names)."""
    for layer in bert.encoder.layer:
        if not isinstance(layer.attention.output, AdaptedOutput):
            layer.attention.output = AdaptedOutput(layer.attention.output, size)
        if not isinstance(layer.output, AdaptedOutput):
            layer.output = AdaptedOutput(layer.output, size)


def adapter_parameters(model: nn.Module) -> list[nn.Parameter]:
    return [p for n, p in model.named_parameters() if ".adapter." in n]


class XlvizBertConfig(BertConfig):
    model_type = "xlviz_bert"

    def __init__(self, adapter_size: int = 64, **kwargs):
        super().__init__(**kwargs)
        self.adapter_size = adapter_size


class XlvizBertModel(BertModel):
    config_class = XlvizBertConfig

    def __init__(self, config, add_pooling_layer: bool = True):
        super().__init__(config, add_pooling_layer=add_pooling_layer)
        add_adapters(self, config.adapter_size)


class XlvizBertForMaskedLM(BertForMaskedLM):
    config_class = XlvizBertConfig

    def __init__(self, config):
        super().__init__(config)
        add_adapters(self.bert, config.adapter_size)


class XlvizBertForQuestionAnswering(BertForQuestionAnswering):
    config_class = XlvizBertConfig

    def __init__(self, config):
        super().__init__(config)
        add_adapters(self.bert, config.adapter_size)


AutoConfig.register("xlviz_bert", XlvizBertConfig, exist_ok=True)
AutoModel.register(XlvizBertConfig, XlvizBertModel, exist_ok=True)
AutoModelForMaskedLM.register(XlvizBertConfig, XlvizBertForMaskedLM, exist_ok=True)
AutoModelForQuestionAnswering.register(XlvizBertConfig, XlvizBertForQuestionAnswering, exist_ok=True)
