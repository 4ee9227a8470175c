"""Extractive-QA features: question + sliding context windows, with character offsets.

Contexts are longer than a model's window, so each example becomes one feature per window
(``stride`` tokens of overlap, the usual HF recipe). Training needs the answer's character span
mapped to token start/end in each window (the CLS token when the window misses it); prediction
needs each token's character offsets to cut the answer back out of the context, with
non-context tokens' offsets set to None so they can never be chosen. Which tokens belong to the
context comes from ``sequence_ids()``, so tokenizers without token_type_ids (RoBERTa) work.

Everything returned is plain Python (lists per key, like a ``datasets`` map output); use
:func:`to_tensors` for model inputs.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from xlviz.errors import XlvizError

CONTEXT = 1  # sequence id of the context: the question comes first
MODEL_INPUT_KEYS = ("input_ids", "attention_mask", "token_type_ids")
_CHUNK = 256  # examples per tokenizer call: bounds memory on big files


def _get(example: Any, name: str) -> Any:
    return example[name] if isinstance(example, Mapping) else getattr(example, name)


MAX_QUESTION_TOKENS = 64


def _check_args(tokenizer: Any, max_length: int, doc_stride: int) -> int:
    """Validate settings; return the most question tokens that leave the context > stride tokens."""
    if not getattr(tokenizer, "is_fast", False):
        raise XlvizError(
            f"QA features need a fast (tokenizers-backed) tokenizer for offset mappings; got {type(tokenizer).__name__}"
        )
    if tokenizer.pad_token_id is None:
        raise XlvizError("the tokenizer has no padding token; QA features are padded to max_length")
    if doc_stride < 0 or max_length <= 0:
        raise XlvizError(f"max_length ({max_length}) must be positive and doc_stride ({doc_stride}) not negative")
    n_special = tokenizer.num_special_tokens_to_add(pair=True)
    # At most MAX_QUESTION_TOKENS (BERT's SQuAD code cut queries at 64) and at most half of
    # what the window has beyond the stride, so each window advances by at least that much:
    # a 9,000-token question once left one new context token per window (gigabytes of windows).
    max_question = min(MAX_QUESTION_TOKENS, (max_length - n_special - doc_stride) // 2)
    if max_question < 1:
        raise XlvizError(
            f"max_length={max_length} leaves no room for a question with doc_stride={doc_stride} "
            f"and {n_special} special tokens; raise max_length or lower doc_stride"
        )
    return max_question


def _fit_questions(tokenizer: Any, questions: list[str], max_question: int) -> list[str]:
    """Left-strip questions and cut over-long ones so every window keeps > stride context tokens.

    Without this the tokenizer panics on a question longer than the window (the original BERT
    SQuAD code likewise cut queries, at 64 tokens).
    """
    questions = [q.lstrip() for q in questions]
    enc = tokenizer(questions, add_special_tokens=False, return_offsets_mapping=True)
    out = []
    for q, ids, offsets in zip(questions, enc["input_ids"], enc["offset_mapping"]):
        n = max_question
        while len(ids) > max_question and n >= 1:
            q = q[: offsets[n - 1][1]]
            one = tokenizer(q, add_special_tokens=False, return_offsets_mapping=True)
            ids, offsets = one["input_ids"], one["offset_mapping"]
            n -= 1  # re-tokenizing a cut string can give more tokens: shrink until it fits
        out.append(q if len(ids) <= max_question else "")
    return out


def _tokenize(tokenizer: Any, examples: Sequence[Any], max_length: int, doc_stride: int):
    """Yield (chunk start, encoding) over the examples, windows and offsets included."""
    max_question = _check_args(tokenizer, max_length, doc_stride)
    for lo in range(0, len(examples), _CHUNK):
        chunk = examples[lo : lo + _CHUNK]
        questions = _fit_questions(tokenizer, [_get(ex, "question") for ex in chunk], max_question)
        contexts = [_get(ex, "context") for ex in chunk]
        try:
            enc = tokenizer(
                questions,
                contexts,
                truncation="only_second",
                max_length=max_length,
                stride=doc_stride,
                return_overflowing_tokens=True,
                return_offsets_mapping=True,
                padding="max_length",
            )
        except BaseException as e:  # the Rust side raises pyo3 PanicException (a BaseException)
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            raise XlvizError(
                f"tokenizing QA examples {lo}..{lo + len(chunk) - 1} failed (max_length={max_length}, "
                f"doc_stride={doc_stride}): {str(e).splitlines()[0] if str(e) else type(e).__name__}"
            ) from None
        yield lo, enc


def _new_features(enc: Any) -> dict[str, list]:
    return {k: [] for k in MODEL_INPUT_KEYS if k in enc}


def _context_span(seq_ids: list) -> tuple[int, int] | None:
    """First and last token index of the context in one window."""
    idx = [t for t, s in enumerate(seq_ids) if s == CONTEXT]
    return (idx[0], idx[-1]) if idx else None


def prepare_train_features(
    tokenizer: Any, examples: Sequence[Any], max_length: int = 384, doc_stride: int = 128
) -> dict[str, list]:
    """Features with ``start_positions`` / ``end_positions`` (token indices) for training.

    The label span covers the first answer's characters ``[answer_start, answer_start +
    len(text))``; a window that does not contain the whole span (or an example without
    answers) is labelled with the CLS index (0 for BERT/RoBERTa). Also returns
    ``example_index`` (position in ``examples``) and ``example_id`` per feature.
    """
    features: dict[str, list] | None = None
    for lo, enc in _tokenize(tokenizer, examples, max_length, doc_stride):
        if features is None:
            features = _new_features(enc)
            features.update(start_positions=[], end_positions=[], example_index=[], example_id=[])
        for i, input_ids in enumerate(enc["input_ids"]):
            for k in MODEL_INPUT_KEYS:
                if k in features:
                    features[k].append(list(enc[k][i]))
            ex_index = lo + enc["overflow_to_sample_mapping"][i]
            example = examples[ex_index]
            features["example_index"].append(ex_index)
            features["example_id"].append(_get(example, "id"))
            cls_index = input_ids.index(tokenizer.cls_token_id) if tokenizer.cls_token_id in input_ids else 0
            start_pos = end_pos = cls_index
            answers = _get(example, "answers")
            span = _context_span(enc.sequence_ids(i))
            if answers and span is not None:
                start_char = answers[0]["answer_start"]
                end_char = start_char + len(answers[0]["text"])
                offsets = enc["offset_mapping"][i]
                first, last = span
                if offsets[first][0] <= start_char and offsets[last][1] >= end_char:
                    # last context token starting at or before the answer's first character
                    s = first
                    while s + 1 <= last and offsets[s + 1][0] <= start_char:
                        s += 1
                    if offsets[s][1] <= start_char and s < last:  # answer starts in whitespace
                        s += 1
                    # first token from there ending at or after the answer's last character
                    e = s
                    while e < last and offsets[e][1] < end_char:
                        e += 1
                    start_pos, end_pos = s, e
            features["start_positions"].append(start_pos)
            features["end_positions"].append(end_pos)
    return features if features is not None else _empty(train=True)


def prepare_eval_features(
    tokenizer: Any, examples: Sequence[Any], max_length: int = 384, doc_stride: int = 128
) -> dict[str, list]:
    """Features for prediction: model inputs plus ``example_id``, ``example_index`` and
    ``offset_mapping`` (per token ``(start, end)`` character offsets into the context, None
    for question, special and padding tokens)."""
    features: dict[str, list] | None = None
    for lo, enc in _tokenize(tokenizer, examples, max_length, doc_stride):
        if features is None:
            features = _new_features(enc)
            features.update(offset_mapping=[], example_index=[], example_id=[])
        for i in range(len(enc["input_ids"])):
            for k in MODEL_INPUT_KEYS:
                if k in features:
                    features[k].append(list(enc[k][i]))
            ex_index = lo + enc["overflow_to_sample_mapping"][i]
            features["example_index"].append(ex_index)
            features["example_id"].append(_get(examples[ex_index], "id"))
            seq_ids = enc.sequence_ids(i)
            features["offset_mapping"].append(
                [tuple(o) if seq_ids[t] == CONTEXT else None for t, o in enumerate(enc["offset_mapping"][i])]
            )
    return features if features is not None else _empty(train=False)


def _empty(train: bool) -> dict[str, list]:
    keys = ["input_ids", "attention_mask", "example_index", "example_id"]
    keys += ["start_positions", "end_positions"] if train else ["offset_mapping"]
    return {k: [] for k in keys}


def to_tensors(features: Mapping[str, list], keys: Sequence[str] | None = None, rows: slice | None = None) -> dict:
    """LongTensors for the model-input keys present (plus start/end positions when present)."""
    import torch

    if keys is None:
        keys = [k for k in (*MODEL_INPUT_KEYS, "start_positions", "end_positions") if k in features]
    rows = rows if rows is not None else slice(None)
    return {k: torch.tensor(features[k][rows], dtype=torch.long) for k in keys}
