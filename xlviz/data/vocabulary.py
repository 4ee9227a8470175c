"""A new-language vocabulary shaped like an existing model's tokenizer.

Why: MONOTRANS step 2 gives a pre-trained L1 model a new vocabulary learned on an L2 corpus.
The L1 body expects its own special tokens where it saw them in pre-training: RoBERTa/XLM-R
compute position ids from the padding id, so L2 padding must keep L1's id; [CLS]/<s> and
[SEP]/</s> must be laid out as L1's tokenizer lays them out; a model without segment
embeddings must not receive ``token_type_ids``. :func:`train_tokenizer_like` learns the L2
subwords with :mod:`tokenizers` and copies all of that from the reference (L1) tokenizer:
the special tokens come first, in the order of their L1 ids (so ``<s> <pad> </s> <unk>
<mask>`` for RoBERTa keeps ``<pad>`` at 1, and ``[PAD] [UNK] [CLS] [SEP] [MASK]`` for BERT
keeps ``[PAD]`` at 0), the single/pair templates and the model input names. Without a
reference it is exactly :func:`xlviz.data.tokenization.train_tokenizer`.
"""

from __future__ import annotations

from typing import Iterable

from xlviz.errors import XlvizError

# tokenizer attributes naming special-token roles, in a fixed order
ROLES = ("pad_token", "unk_token", "cls_token", "sep_token", "mask_token", "bos_token", "eos_token")


def special_tokens_of(tokenizer) -> dict[str, str]:
    """``{role: token string}`` for the roles this tokenizer defines (pad, unk, cls, sep, mask, bos, eos)."""
    out = {}
    for role in ROLES:
        tok = getattr(tokenizer, role, None)
        if tok is not None and getattr(tokenizer, f"{role}_id", None) is not None:
            out[role] = str(tok)
    return out


def special_ids_of(tokenizer) -> list[int]:
    """Sorted ids of the role special tokens (the rows MONOTRANS shares between languages)."""
    return sorted({getattr(tokenizer, f"{role}_id") for role in special_tokens_of(tokenizer)})


def special_row_map(l1_tokenizer, l2_tokenizer) -> dict[int, int]:
    """``{l2 id: l1 id}`` for every special-token role both tokenizers define.

    These are the embedding rows step 2 copies from L1 (and keeps frozen) and step 4 takes
    from the fine-tuned L1 model. Roles are matched by name, so an xlviz ``[CLS]`` maps onto
    RoBERTa's ``<s>`` too.
    """
    mapping: dict[int, int] = {}
    for role in special_tokens_of(l2_tokenizer):
        l1_id = getattr(l1_tokenizer, f"{role}_id", None)
        if l1_id is not None:
            mapping.setdefault(getattr(l2_tokenizer, f"{role}_id"), l1_id)
    return mapping


def translation_rows(pairs: Iterable[tuple[str, str]], l1_tokenizer, l2_tokenizer) -> dict[int, int]:
    """``{l2 id: l1 id}`` for the gold translation pairs (L1 word, L2 word) that are whole
    tokens in both vocabularies: the rows a dictionary oracle copies from L1 (subword pieces
    have no gold counterpart and are left out)."""
    v1, v2 = l1_tokenizer.get_vocab(), l2_tokenizer.get_vocab()
    return {v2[b]: v1[a] for a, b in pairs if a in v1 and b in v2}


def _template(reference, pair: bool) -> str:
    """The reference's special-token layout as a ``TemplateProcessing`` string."""
    enc = reference("a", "b", return_special_tokens_mask=True, return_token_type_ids=True) if pair else reference(
        "a", return_special_tokens_mask=True, return_token_type_ids=True
    )
    ids, special = enc["input_ids"], enc["special_tokens_mask"]
    types = enc.get("token_type_ids") or [0] * len(ids)
    parts: list[str] = []
    segment = -1
    prev_special = True
    for tid, is_special, ttype in zip(ids, special, types):
        if is_special:
            parts.append(f"{reference.convert_ids_to_tokens(tid)}:{ttype}")
            prev_special = True
        else:
            if prev_special:  # a new run of ordinary tokens: the next sequence
                segment += 1
                parts.append(f"${'AB'[min(segment, 1)]}:{ttype}")
            prev_special = False
    if segment != (1 if pair else 0):
        raise XlvizError(f"cannot read the {'pair' if pair else 'single'} template of the reference tokenizer ({type(reference).__name__})")
    return " ".join(parts)


def train_tokenizer_like(
    texts: Iterable[str],
    vocab_size: int,
    reference=None,
    *,
    algorithm: str = "wordpiece",
    lowercase: bool = True,
    model_max_length: int = 512,
):
    """Learn a subword vocabulary on ``texts`` whose special tokens, ids, templates and input
    names follow ``reference`` (the L1 tokenizer); see the module docstring."""
    from tokenizers import normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    from xlviz.data.tokenization import ALGORITHMS, learn_tokenizer, train_tokenizer

    if reference is None:
        return train_tokenizer(texts, vocab_size, algorithm=algorithm, lowercase=lowercase, model_max_length=model_max_length)
    if algorithm not in ALGORITHMS:
        raise XlvizError(f"unknown tokenizer algorithm {algorithm!r}; choose from {list(ALGORITHMS)}", field="tokenizer")
    roles = special_tokens_of(reference)
    for needed in ("pad_token", "unk_token", "mask_token"):
        if needed not in roles:
            raise XlvizError(f"the reference tokenizer has no {needed.replace('_token', '')} token; MONOTRANS needs one", field="tokenizer")
    if not getattr(reference, "is_fast", False):
        raise XlvizError(f"the reference tokenizer must be a fast tokenizer, got {type(reference).__name__}", field="tokenizer")
    by_id = sorted({(getattr(reference, f"{r}_id"), t) for r, t in roles.items()})
    specials = [t for _, t in by_id]
    if len(set(specials)) != len(specials):
        raise XlvizError(f"the reference tokenizer reuses one string for two special ids: {by_id}", field="tokenizer")
    unk = roles["unk_token"]
    # the deterministic trainer shared with train_tokenizer (same vocabulary in every process)
    tok = learn_tokenizer(texts, vocab_size, specials, unk, algorithm,
                          normalizers.Sequence([normalizers.NFKC()] + ([normalizers.Lowercase()] if lowercase else [])),
                          pre_tokenizers.BertPreTokenizer())
    for i, t in enumerate(specials):
        if tok.token_to_id(t) != i:
            raise AssertionError(f"special token {t} must have id {i}")
    used = {t.split(":")[0] for t in _template(reference, False).split() + _template(reference, True).split() if not t.startswith("$")}
    tok.post_processor = processors.TemplateProcessing(
        single=_template(reference, False),
        pair=_template(reference, True),
        special_tokens=[(t, tok.token_to_id(t)) for t in specials if t in used],
    )
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tok, model_max_length=model_max_length,
        model_input_names=list(getattr(reference, "model_input_names", ["input_ids", "attention_mask"])),
        **{role: t for role, t in roles.items()},
    )
    return wrapped


__all__ = ["ROLES", "special_tokens_of", "special_ids_of", "special_row_map", "train_tokenizer_like"]
