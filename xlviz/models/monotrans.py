"""Model surgery for MONOTRANS (Artetxe et al. 2020, §2): what each step trains, freezes and
swaps, on plain Hugging Face encoders (BERT, RoBERTa / XLM-R, DistilBERT, ELECTRA generator).

- Step 2 builds an L2 masked LM from the L1 one: same body, a new token-embedding matrix for
  the L2 vocabulary (the MLM decoder tied to it), special-token rows shared with L1; that
  starting point, untrained the floor, is built in :mod:`xlviz.models.floor` alone.
- Step 3 fine-tunes on L1 with the L1 token embeddings frozen except the shared special rows.
- Step 4 plugs the L2 embeddings (and L2 position embeddings / adapters for those variants)
  into the fine-tuned model.
Variants: L2 position embeddings with [CLS] carrying no position/segment embedding, Gaussian
noise on the embeddings while fine-tuning, Houlsby adapters learned in step 2 (BERT only).

Special rows: by default the first ``N_SPECIAL`` ids ([PAD] [UNK] [CLS] [SEP] [MASK], the
xlviz convention) are shared and identical in both vocabularies. For a pre-trained L1 model
whose special ids differ (an English BERT: [CLS]=101), pass ``special_rows={l2 id: l1 id}``
(:func:`xlviz.data.vocabulary.special_row_map`) and the L1 ``special_ids`` to step 3.
Parts are found through :mod:`xlviz.models.surgery`, so every function here works on every
supported architecture; a model without an MLM head raises :class:`XlvizError`.
"""

from __future__ import annotations

from typing import Iterable, Mapping

import torch
from torch import nn
from transformers import BertConfig, BertForMaskedLM, BertForQuestionAnswering, PretrainedConfig, PreTrainedModel

from xlviz.errors import XlvizError
from xlviz.models.adapters import XlvizBertConfig, XlvizBertForMaskedLM, XlvizBertForQuestionAnswering, add_adapters, adapter_parameters
from xlviz.models.surgery import (
    copy_matching, first_position_row, names_of, output_layer, position_embeddings, segment_embeddings, word_embeddings,
)

N_SPECIAL = 5  # [PAD] [UNK] [CLS] [SEP] [MASK] share ids 0-4 in every language's vocabulary
NOISE_STD = 0.075  # Appendix A, for BERT-base
# BERT-base's word-embedding row norm at initialisation (std 0.02, 768 wide): the reference the
# paper's sigma is scaled against (noise_std_for); no BERT-base weights are read.
BERT_BASE_INIT_STD, BERT_BASE_WIDTH = 0.02, 768
REFERENCE_NORM = BERT_BASE_INIT_STD * BERT_BASE_WIDTH ** 0.5
NOISE_RULES = ("scaled", "absolute")
TOKEN_ID_KEYS = ("pad_token_id", "bos_token_id", "eos_token_id")

MODEL_SIZES = {
    # name: (layers, hidden, heads, intermediate)
    "tiny": (2, 64, 2, 256),
    "small": (4, 128, 4, 512),
    "medium": (6, 256, 4, 1024),
    # the scale axis toward the paper's model (bench/realism_gpu.sh): GPU sizes, far too slow
    # for the 2-core CPU budgets of the demo; "base" is BERT-base's shape
    "large": (8, 512, 8, 2048),
    "base": (12, 768, 12, 3072),
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


def config_for(base: PretrainedConfig, vocab_size: int, adapter_size: int = 0, **overrides) -> PretrainedConfig:
    """``base`` for another vocabulary (same class; BERT + adapters when ``adapter_size``)."""
    d = base.to_dict()
    for k in ("model_type", "architectures", "transformers_version", "adapter_size"):
        d.pop(k, None)
    d["vocab_size"] = vocab_size
    d.update(overrides)
    if adapter_size:
        if base.model_type not in ("bert", XlvizBertConfig.model_type):
            raise XlvizError(f"adapters are implemented for BERT models only, not {base.model_type}", field="variants")
        return XlvizBertConfig(adapter_size=adapter_size, **d)
    cls = BertConfig if isinstance(base, XlvizBertConfig) else type(base)
    return cls(**d)


def mlm_class(config: PretrainedConfig):
    """The masked-LM class that builds a model from ``config`` (xlviz's adapter BERT included)."""
    if isinstance(config, XlvizBertConfig):
        return XlvizBertForMaskedLM
    if type(config) is BertConfig:
        return BertForMaskedLM
    from transformers import AutoModelForMaskedLM

    return lambda c: AutoModelForMaskedLM.from_config(c)


def _qa_class(config: PretrainedConfig):
    if isinstance(config, XlvizBertConfig):
        return XlvizBertForQuestionAnswering
    if type(config) is BertConfig:
        return BertForQuestionAnswering
    from transformers import AutoModelForQuestionAnswering

    return lambda c: AutoModelForQuestionAnswering.from_config(c)


def default_rows(special_rows: Mapping[int, int] | None) -> dict[int, int]:
    """``{l2 id: l1 id}`` of the special rows shared with L1: ``special_rows``, else the first ``N_SPECIAL`` ids."""
    return dict(special_rows) if special_rows is not None else {i: i for i in range(N_SPECIAL)}


def _copy_body(src: PreTrainedModel, dst: PreTrainedModel, skip: tuple[str, ...]) -> None:
    """Copy every parameter/buffer with a matching name and shape, except names containing ``skip``."""
    copy_matching(src, dst, skip_parts=skip, require_all=False)


class _RowMask:
    """Gradient hook that zeroes the gradient of some embedding rows (they stay frozen).

    ``train_special``: only the ``special`` rows train (step 3); else all rows but them (step 2).
    """

    def __init__(self, n_rows: int, train_special: bool, special: Iterable[int] | None = None):
        special = list(range(N_SPECIAL)) if special is None else list(special)
        self.mask = torch.zeros(n_rows, 1) if train_special else torch.ones(n_rows, 1)
        self.mask[special] = 1.0 if train_special else 0.0

    def __call__(self, grad: torch.Tensor) -> torch.Tensor:
        return grad * self.mask.to(grad.device, grad.dtype)


def freeze_for_step2(model: PreTrainedModel, *, l2_positions: bool = False, special_ids: Iterable[int] | None = None) -> list[str]:
    """Train only the L2 token embeddings (special rows, ``special_ids`` of the L2 vocabulary,
    stay shared with L1), the MLM output bias of the new vocabulary (and an untied decoder),
    and, for those variants, L2 position embeddings and adapters.
    Returns the names of trainable parameters."""
    out = output_layer(model)
    for p in model.parameters():
        p.requires_grad_(False)
    emb = word_embeddings(model)
    emb.weight.requires_grad_(True)
    emb.weight.register_hook(_RowMask(emb.num_embeddings, train_special=False, special=special_ids))
    if out.bias is not None:
        out.bias.requires_grad_(True)
    if out.weight is not emb.weight:
        out.weight.requires_grad_(True)
        out.weight.register_hook(_RowMask(emb.num_embeddings, train_special=False, special=special_ids))
    if l2_positions:
        pos = position_embeddings(model)
        if pos is None:
            raise XlvizError(f"{type(model).__name__} has no learned position embeddings to make language-specific")
        pos.weight.requires_grad_(True)
    for p in adapter_parameters(model):
        p.requires_grad_(True)
    return [n for n, p in model.named_parameters() if p.requires_grad]


def freeze_for_step3(model: PreTrainedModel, *, freeze_positions: bool = False, special_ids: Iterable[int] | None = None) -> list[str]:
    """Fine-tune everything except the L1 token embeddings, whose shared special-token rows
    (``special_ids`` of the L1 vocabulary) still train (footnote 2); with L2 position
    embeddings, L1's are frozen too (footnote 3)."""
    for p in model.parameters():
        p.requires_grad_(True)
    emb = word_embeddings(model)
    emb.weight.register_hook(_RowMask(emb.num_embeddings, train_special=True, special=special_ids))
    if freeze_positions:
        pos = position_embeddings(model)
        if pos is not None:
            pos.weight.requires_grad_(False)
    return [n for n, p in model.named_parameters() if p.requires_grad]


def _embedding_parts(model: PreTrainedModel) -> list[nn.Module]:
    return [m for m in (word_embeddings(model), position_embeddings(model), segment_embeddings(model)) if m is not None]


def add_embedding_noise(model: PreTrainedModel, std: float = NOISE_STD) -> list:
    """Noised fine-tuning: Gaussian noise N(0, std^2) on word, position and segment embeddings,
    in training mode only. Returns hook handles (``h.remove()`` to undo)."""

    def hook(module, inputs, output):
        return output + torch.randn_like(output) * std if module.training else output

    return [m.register_forward_hook(hook) for m in _embedding_parts(model)]


def embedding_norm(model: PreTrainedModel, special: Iterable[int] | None = None) -> float:
    """Mean L2 norm of the word-embedding rows, special rows (ids ``special``, default the
    first ``N_SPECIAL``) left out: recorded beside the noise's sigma, to compare with
    :func:`init_norm`."""
    weight = word_embeddings(model).weight.detach().float()
    keep = torch.ones(weight.shape[0], dtype=torch.bool)
    keep[list(special) if special is not None else list(range(min(N_SPECIAL, weight.shape[0])))] = False
    if not bool(keep.any()):
        raise XlvizError("the word embeddings have no non-special rows to measure", field="word_embeddings")
    return float(weight[keep].norm(dim=1).mean())


def init_norm(model: PreTrainedModel) -> float:
    """Expected L2 norm of a word-embedding row as the model was initialised: its config's
    ``initializer_range`` (BERT's 0.02 where the config has none) x sqrt(embedding width)."""
    width = word_embeddings(model).embedding_dim
    return float(getattr(model.config, "initializer_range", BERT_BASE_INIT_STD)) * width ** 0.5


def noise_std_for(model: PreTrainedModel, std: float = NOISE_STD, rule: str = "scaled") -> float:
    """The noised fine-tuning's sigma for ``model``: ``std`` itself (``"absolute"``, the paper's
    0.075 as is) or ``std x init_norm(model) / REFERENCE_NORM`` (``"scaled"``).

    Why: what the noise does depends on its size against the embeddings, not on its absolute
    value. N(0, sigma^2) on a d-wide row moves it by about sigma along the direction that
    separates two tokens, whose rows lie about a row norm apart, so sigma / ||e|| is what to
    keep. The paper chose 0.075 for BERT-base, whose rows start 0.02 x sqrt(768) = 0.554 long
    (ratio 0.135); the rule keeps that ratio against the model's own starting norm, so
    BERT-base gets exactly 0.075 and a 128-wide model with BERT's init 0.075 x sqrt(128/768) =
    0.0306. Starting norms, not trained ones: BERT-base's trained norms are not available here
    to compare with, and a trained norm set against an initial one mixes two scales (the
    bench's 128-wide model ends step 1 with rows of std ~0.06, norm ~0.69, which against 0.554
    would give 0.093: more noise than the paper's absolute value)."""
    if rule not in NOISE_RULES:
        raise XlvizError(f"unknown noise rule {rule!r}; choose from {list(NOISE_RULES)}", field="noise_rule")
    if rule == "absolute":
        return float(std)
    return float(std) * init_norm(model) / REFERENCE_NORM


def drop_cls_position_and_segment(model: PreTrainedModel) -> list:
    """[CLS] (always the first token) gets no position or segment embedding (§2). Hooks zero
    those embeddings at the first position; :func:`fold_cls_position` makes it permanent."""

    def hook(module, inputs, output):
        keep = torch.ones(output.shape[-2], 1, device=output.device, dtype=output.dtype)
        keep[0] = 0
        return output * keep

    parts = [m for m in (position_embeddings(model), segment_embeddings(model)) if m is not None]
    return [m.register_forward_hook(hook) for m in parts]


def fold_cls_position(model: PreTrainedModel) -> None:
    """Bake "no position/segment embedding for [CLS]" into plain weights: the first position
    only ever holds [CLS] with segment 0, so setting pos[first] = -seg[0] makes their sum
    vanish exactly (pos[first] = 0 for models without segment embeddings)."""
    pos, seg = position_embeddings(model), segment_embeddings(model)
    if pos is None:
        return
    with torch.no_grad():
        row = first_position_row(model)
        pos.weight[row] = -seg.weight[0] if seg is not None else 0.0


def qa_from_mlm(mlm: PreTrainedModel, seed: int) -> PreTrainedModel:
    """Step 3's starting point: the pre-trained body with a fresh span-prediction head."""
    torch.manual_seed(seed)
    config = config_for(mlm.config, mlm.config.vocab_size)
    qa = _qa_class(config)(config)
    copy_matching(mlm, qa, skip_parts=("qa_outputs",))
    return qa


def zero_shot_model(
    qa_l1: PreTrainedModel, l2_mlm: PreTrainedModel, *, l2_positions: bool = False, adapter_size: int = 0,
    special_rows: Mapping[int, int] | None = None, dictionary_rows: Mapping[int, int] | None = None,
) -> PreTrainedModel:
    """Step 4: the fine-tuned L1 model with L2 token embeddings swapped in.

    Special-token rows come from the fine-tuned L1 matrix (they were shared and fine-tuned in
    step 3; ``special_rows`` = {l2 id: l1 id}); L2 position embeddings and adapters come from
    ``l2_mlm`` for those variants; with L2 positions, [CLS]'s position row is folded against the
    fine-tuned segment row (:func:`fold_cls_position`: the variant's [CLS] has neither, §2).
    ``dictionary_rows`` ({l2 id: l1 id} of gold translations)
    replaces those L2 rows by their translation's L1 row: the dictionary oracle, what a
    perfectly aligned step 2 would give. The result is a plain ``*ForQuestionAnswering`` of
    the L1 architecture (or the adapter subclass) for the L2 vocabulary.
    """
    vocab = l2_mlm.config.vocab_size
    ids = {k: getattr(l2_mlm.config, k) for k in TOKEN_ID_KEYS if hasattr(l2_mlm.config, k)}
    config = config_for(qa_l1.config, vocab, adapter_size, **ids)
    model = _qa_class(config)(config)
    emb = word_embeddings(model)
    copy_matching(qa_l1, model, skip_names=names_of(model, emb.weight), skip_parts=(".adapter.",))
    with torch.no_grad():
        weight = word_embeddings(l2_mlm).weight.detach().clone()
        l1_weight = word_embeddings(qa_l1).weight.detach()
        for l2_id, l1_id in {**default_rows(special_rows), **dict(dictionary_rows or {})}.items():
            weight[l2_id] = l1_weight[l1_id]
        emb.weight.copy_(weight)
        if l2_positions:
            position_embeddings(model).weight.copy_(position_embeddings(l2_mlm).weight)
            # Step 2 folded [CLS]'s L2 position row against the pre-trained segment row, but step 3
            # fine-tuned the segment embeddings this model now carries: fold again against them,
            # so [CLS] keeps no position/segment embedding here as it had in both training steps.
            fold_cls_position(model)
        if adapter_size:
            src = {n: p for n, p in l2_mlm.named_parameters() if ".adapter." in n}
            for n, p in model.named_parameters():
                if ".adapter." in n:
                    p.copy_(src[n])
    return model


__all__ = [
    "MODEL_SIZES", "N_SPECIAL", "NOISE_RULES", "NOISE_STD", "REFERENCE_NORM", "embedding_norm", "init_norm", "noise_std_for", "bert_config",
    "config_for", "mlm_class", "default_rows", "freeze_for_step2", "freeze_for_step3",
    "add_embedding_noise", "drop_cls_position_and_segment", "fold_cls_position", "qa_from_mlm", "zero_shot_model",
    "add_adapters",
]
