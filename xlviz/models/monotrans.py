"""Model surgery for MONOTRANS (Artetxe et al. 2020, §2): what each step trains, freezes and
swaps, on plain Hugging Face BERT classes.

- Step 2 builds an L2 masked LM from the L1 one: same body, a new token-embedding matrix for
  the L2 vocabulary (the MLM decoder tied to it), special-token rows shared with L1.
- Step 3 fine-tunes on L1 with the L1 token embeddings frozen except the shared special rows.
- Step 4 plugs the L2 embeddings (and L2 position embeddings / adapters for those variants)
  into the fine-tuned model.
Variants: L2 position embeddings with [CLS] carrying no position/segment embedding, Gaussian
noise on the embeddings while fine-tuning, Houlsby adapters learned in step 2.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import BertConfig, BertForMaskedLM, BertForQuestionAnswering, PreTrainedModel

from xlviz.errors import XlvizError
from xlviz.models.adapters import XlvizBertConfig, XlvizBertForMaskedLM, XlvizBertForQuestionAnswering, add_adapters, adapter_parameters

N_SPECIAL = 5  # [PAD] [UNK] [CLS] [SEP] [MASK] share ids 0-4 in every language's vocabulary
NOISE_STD = 0.075  # Appendix A

MODEL_SIZES = {
    # name: (layers, hidden, heads, intermediate)
    "tiny": (2, 64, 2, 256),
    "small": (4, 128, 4, 512),
    "medium": (6, 256, 4, 1024),
}


def bert_config(vocab_size: int, size: str = "small", max_position_embeddings: int = 256, dropout: float = 0.0) -> BertConfig:
    """A small BERT for CPU training. Dropout defaults to 0: for minutes-long runs on generated
    data it only slows learning, and CPU dropout costs a quarter of the step time."""
    if size not in MODEL_SIZES:
        raise XlvizError(f"unknown model size {size!r}; choose from {list(MODEL_SIZES)}", field="model_size")
    layers, hidden, heads, ff = MODEL_SIZES[size]
    return BertConfig(
        vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
        intermediate_size=ff, max_position_embeddings=max_position_embeddings,
        hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout, type_vocab_size=2,
    )


def _config_for(base: BertConfig, vocab_size: int, adapter_size: int = 0) -> BertConfig:
    d = base.to_dict()
    for k in ("model_type", "architectures", "transformers_version", "adapter_size"):
        d.pop(k, None)
    d["vocab_size"] = vocab_size
    if adapter_size:
        return XlvizBertConfig(adapter_size=adapter_size, **d)
    return BertConfig(**d)


def _copy_body(src: PreTrainedModel, dst: PreTrainedModel, skip: tuple[str, ...]) -> None:
    """Copy every parameter/buffer with a matching name and shape, except names containing ``skip``."""
    src_state = src.state_dict()
    dst_state = dst.state_dict()
    with torch.no_grad():
        for name, t in dst_state.items():
            if any(s in name for s in skip) or name not in src_state:
                continue
            if src_state[name].shape != t.shape:
                raise XlvizError(f"shape mismatch for {name}: {tuple(src_state[name].shape)} vs {tuple(t.shape)}")
            t.copy_(src_state[name])


def new_l2_embeddings(l1_embeddings: nn.Embedding, vocab_size: int, seed: int, std: float = 0.02) -> torch.Tensor:
    """A fresh L2 embedding matrix (BERT init, seeded) whose special rows are L1's."""
    g = torch.Generator().manual_seed(seed)
    weight = torch.randn(vocab_size, l1_embeddings.embedding_dim, generator=g) * std
    weight[:N_SPECIAL] = l1_embeddings.weight.detach()[:N_SPECIAL]
    return weight


def make_l2_mlm(l1_model: BertForMaskedLM, vocab_size: int, *, seed: int, adapter_size: int = 0, l2_positions: bool = False) -> BertForMaskedLM:
    """Step 2's starting point: the L1 masked LM with a new, randomly initialised L2 vocabulary.

    Copies the whole body and MLM transform; the decoder stays tied to the new embeddings and
    gets a zero bias for the new vocabulary. ``l2_positions`` starts L2 position embeddings as
    a copy of L1's (they then train in step 2).
    """
    config = _config_for(l1_model.config, vocab_size, adapter_size)
    model = (XlvizBertForMaskedLM if adapter_size else BertForMaskedLM)(config)
    _copy_body(l1_model, model, skip=("word_embeddings", "cls.predictions.decoder", "cls.predictions.bias", ".adapter."))
    with torch.no_grad():
        model.bert.embeddings.word_embeddings.weight.copy_(new_l2_embeddings(l1_model.bert.embeddings.word_embeddings, vocab_size, seed))
        model.cls.predictions.bias.zero_()
    model.tie_weights()
    return model


class _RowMask:
    """Gradient hook that zeroes the gradient of some embedding rows (they stay frozen)."""

    def __init__(self, n_rows: int, train_special: bool):
        self.mask = torch.zeros(n_rows, 1)
        if train_special:
            self.mask[:N_SPECIAL] = 1.0
        else:
            self.mask[N_SPECIAL:] = 1.0

    def __call__(self, grad: torch.Tensor) -> torch.Tensor:
        return grad * self.mask.to(grad.device, grad.dtype)


def freeze_for_step2(model: BertForMaskedLM, *, l2_positions: bool = False) -> list[str]:
    """Train only the L2 token embeddings (special rows stay shared with L1), the MLM output
    bias of the new vocabulary, and, for those variants, L2 position embeddings and adapters.
    Returns the names of trainable parameters."""
    for p in model.parameters():
        p.requires_grad_(False)
    emb = model.bert.embeddings
    emb.word_embeddings.weight.requires_grad_(True)
    emb.word_embeddings.weight.register_hook(_RowMask(emb.word_embeddings.num_embeddings, train_special=False))
    model.cls.predictions.bias.requires_grad_(True)
    if l2_positions:
        emb.position_embeddings.weight.requires_grad_(True)
    for p in adapter_parameters(model):
        p.requires_grad_(True)
    return [n for n, p in model.named_parameters() if p.requires_grad]


def freeze_for_step3(model: PreTrainedModel, *, freeze_positions: bool = False) -> list[str]:
    """Fine-tune everything except the L1 token embeddings, whose shared special-token rows
    still train (footnote 2); with L2 position embeddings, L1's are frozen too (footnote 3)."""
    for p in model.parameters():
        p.requires_grad_(True)
    emb = model.bert.embeddings
    emb.word_embeddings.weight.register_hook(_RowMask(emb.word_embeddings.num_embeddings, train_special=True))
    if freeze_positions:
        emb.position_embeddings.weight.requires_grad_(False)
    return [n for n, p in model.named_parameters() if p.requires_grad]


def add_embedding_noise(model: PreTrainedModel, std: float = NOISE_STD) -> list:
    """Noised fine-tuning: Gaussian noise N(0, std^2) on word, position and segment embeddings,
    in training mode only. Returns hook handles (``h.remove()`` to undo)."""
    emb = model.bert.embeddings

    def hook(module, inputs, output):
        return output + torch.randn_like(output) * std if module.training else output

    return [m.register_forward_hook(hook) for m in (emb.word_embeddings, emb.position_embeddings, emb.token_type_embeddings)]


def drop_cls_position_and_segment(model: PreTrainedModel) -> list:
    """[CLS] (always at position 0) gets no position or segment embedding (§2). Hooks zero those
    embeddings at position 0; :func:`fold_cls_position` makes the change permanent for export."""

    def hook(module, inputs, output):
        keep = torch.ones(output.shape[-2], 1, device=output.device, dtype=output.dtype)
        keep[0] = 0
        return output * keep

    emb = model.bert.embeddings
    return [emb.position_embeddings.register_forward_hook(hook), emb.token_type_embeddings.register_forward_hook(hook)]


def fold_cls_position(model: PreTrainedModel) -> None:
    """Bake "no position/segment embedding for [CLS]" into plain BERT weights: position 0 only
    ever holds [CLS] with segment 0, so setting pos[0] = -seg[0] makes their sum vanish exactly."""
    emb = model.bert.embeddings
    with torch.no_grad():
        emb.position_embeddings.weight[0] = -emb.token_type_embeddings.weight[0]


def qa_from_mlm(mlm: BertForMaskedLM, seed: int) -> BertForQuestionAnswering:
    """Step 3's starting point: the pre-trained body with a fresh span-prediction head."""
    torch.manual_seed(seed)
    config = _config_for(mlm.config, mlm.config.vocab_size)
    qa = BertForQuestionAnswering(config)
    _copy_body(mlm, qa, skip=("qa_outputs",))
    return qa


def zero_shot_model(
    qa_l1: BertForQuestionAnswering, l2_mlm: BertForMaskedLM, *, l2_positions: bool = False, adapter_size: int = 0
) -> BertForQuestionAnswering:
    """Step 4: the fine-tuned L1 model with L2 token embeddings swapped in.

    Special-token rows come from the fine-tuned L1 matrix (they were shared and fine-tuned in
    step 3); L2 position embeddings and adapters come from ``l2_mlm`` for those variants. The
    result is a plain ``BertForQuestionAnswering`` (or the adapter subclass) for the L2 vocabulary.
    """
    vocab = l2_mlm.config.vocab_size
    config = _config_for(qa_l1.config, vocab, adapter_size)
    model = (XlvizBertForQuestionAnswering if adapter_size else BertForQuestionAnswering)(config)
    _copy_body(qa_l1, model, skip=("word_embeddings", ".adapter."))
    with torch.no_grad():
        weight = l2_mlm.bert.embeddings.word_embeddings.weight.detach().clone()
        weight[:N_SPECIAL] = qa_l1.bert.embeddings.word_embeddings.weight.detach()[:N_SPECIAL]
        model.bert.embeddings.word_embeddings.weight.copy_(weight)
        if l2_positions:
            model.bert.embeddings.position_embeddings.weight.copy_(l2_mlm.bert.embeddings.position_embeddings.weight)
        if adapter_size:
            src = {n: p for n, p in l2_mlm.named_parameters() if ".adapter." in n}
            for n, p in model.named_parameters():
                if ".adapter." in n:
                    p.copy_(src[n])
    return model


__all__ = [
    "MODEL_SIZES", "N_SPECIAL", "NOISE_STD", "bert_config", "make_l2_mlm", "freeze_for_step2", "freeze_for_step3",
    "add_embedding_noise", "drop_cls_position_and_segment", "fold_cls_position", "qa_from_mlm", "zero_shot_model",
    "add_adapters",
]
