"""Per-layer hidden states of any Hugging Face encoder, pooled per sentence or per word.

Why: cross-lingual analyses (retrieval, CKA, Procrustes, word translation) compare the
vectors two languages get at every layer. These functions turn text into numpy arrays for
BERT, RoBERTa/XLM-R, DistilBERT and ELECTRA alike: only ``input_ids`` / ``attention_mask``
(and ``token_type_ids`` where the model takes them) are fed, and ``hidden_states[0]`` is the
embedding output, so arrays are [n_layers + 1, ...].

Helpers prefixed ``_`` are shared with ``xlviz.analysis.attention`` (same owner).
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Sequence

import numpy as np

from xlviz.errors import XlvizError

POOLINGS = ("mean", "mean_no_special", "cls")
# Models whose position ids start after the padding index, so usable length is shorter.
_OFFSET_POSITION_TYPES = {"roberta", "xlm-roberta", "camembert", "xlm-roberta-xl", "longformer"}


def _encoder(model):
    """The bare encoder inside a task model (skips computing MLM/QA heads we don't need)."""
    base = getattr(model, "base_model", None)
    return base if base is not None else model


def _usable_length(model, max_length: int) -> int:
    """``max_length`` capped at the number of positions the model actually has."""
    if max_length < 2:
        raise XlvizError(f"must be at least 2, got {max_length}", field="max_length")
    cfg = model.config
    limit = getattr(cfg, "max_position_embeddings", None)
    if limit is None:
        return max_length
    if getattr(cfg, "model_type", "") in _OFFSET_POSITION_TYPES:
        limit -= (getattr(cfg, "pad_token_id", 1) or 0) + 1
    return max(2, min(max_length, int(limit)))


def _require_fast(tokenizer) -> None:
    if not getattr(tokenizer, "is_fast", False):
        raise XlvizError(
            f"{type(tokenizer).__name__} is not a fast (Rust) tokenizer; word alignment needs word_ids(), "
            "load a fast tokenizer"
        )


def _model_inputs(model, enc) -> dict:
    """The tensors from a BatchEncoding that this model's forward accepts, on its device."""
    fwd_params = inspect.signature(model.forward).parameters
    inputs = {"input_ids": enc["input_ids"]}
    if "attention_mask" in enc:
        inputs["attention_mask"] = enc["attention_mask"]
    tti = enc.get("token_type_ids")
    if tti is not None and "token_type_ids" in fwd_params:
        # e.g. a BERT-style tokenizer's segment 1 fed to RoBERTa (type_vocab_size=1) would crash.
        if int(tti.max()) < int(getattr(model.config, "type_vocab_size", 1 << 30) or 1):
            inputs["token_type_ids"] = tti
    n_vocab = model.get_input_embeddings().num_embeddings
    max_id = int(inputs["input_ids"].max()) if inputs["input_ids"].numel() else -1
    if max_id >= n_vocab:
        raise XlvizError(
            f"tokenizer produced id {max_id} but the model has only {n_vocab} embeddings; "
            "this tokenizer does not belong to this model"
        )
    return {k: v.to(model.device) for k, v in inputs.items()}


def _length_order(tokenizer, batch_texts: list, max_length: int, **kw) -> np.ndarray:
    """Indices sorting inputs by token length, so batches carry little padding."""
    lens = [len(ids) for ids in tokenizer(batch_texts, truncation=True, max_length=max_length, **kw)["input_ids"]]
    return np.argsort(lens, kind="stable")


def _n_layers_hidden(model) -> tuple[int, int]:
    cfg = model.config
    return int(cfg.num_hidden_layers), int(cfg.hidden_size)


def sentence_embeddings(
    model,
    tokenizer,
    sentences: Sequence[str],
    pooling: str = "mean",
    batch_size: int = 32,
    max_length: int = 128,
    progress: Callable[[int, int], None] | None = None,
) -> np.ndarray:
    """One vector per sentence per layer: float32 [n_layers + 1, n, hidden].

    Layer 0 is the embedding output. ``pooling``: ``"mean"`` averages all attended tokens
    (padding excluded), ``"mean_no_special"`` also excludes special tokens such as
    [CLS]/[SEP]/<s> (the tokenizer's special-token mask; a sentence with no other tokens
    falls back to "mean" with a warning), ``"cls"`` takes the first token. Inputs longer
    than ``max_length`` tokens are truncated. ``progress(done, total)`` is called after
    each batch.
    """
    import torch

    if pooling not in POOLINGS:
        raise XlvizError(f"unknown pooling '{pooling}'; use one of {', '.join(POOLINGS)}", field="pooling")
    if batch_size < 1:
        raise XlvizError(f"must be at least 1, got {batch_size}", field="batch_size")
    sentences = list(sentences)
    for i, s in enumerate(sentences):
        if not isinstance(s, str):
            raise XlvizError(f"sentence {i} is {type(s).__name__}, not text", field="sentences")
    enc_model = _encoder(model)
    n_layers, hidden = _n_layers_hidden(enc_model)
    if not sentences:
        return np.zeros((n_layers + 1, 0, hidden), dtype=np.float32)
    max_length = _usable_length(enc_model, max_length)
    model.eval()
    order = _length_order(tokenizer, sentences, max_length)
    out: np.ndarray | None = None
    n_fallback = 0
    with torch.no_grad():
        for start in range(0, len(sentences), batch_size):
            idx = order[start : start + batch_size]
            enc = tokenizer(
                [sentences[i] for i in idx],
                padding=True,
                truncation=True,
                max_length=max_length,
                return_special_tokens_mask=pooling == "mean_no_special",
                return_tensors="pt",
            )
            out, states, fallback = _pool_batch(enc_model, enc, pooling, out, idx, len(sentences))
            n_fallback += fallback
            if progress is not None:
                progress(min(start + batch_size, len(sentences)), len(sentences))
    _warn_fallback(n_fallback)
    return out


def sentence_and_word_embeddings(
    model,
    tokenizer,
    sentences: Sequence[str],
    words: Sequence[Sequence[str]],
    pooling: str = "mean",
    batch_size: int = 32,
    max_length: int = 128,
):
    """``sentence_embeddings(sentences)`` and ``word_embeddings_in_context(words)`` from one
    forward pass over the sentences, when ``words`` are the sentences pre-split (their token ids
    under this tokenizer equal the sentences'): the same batches, so the same numbers as the two
    calls, at half the encoding. Otherwise (other token ids, a sentence without words) the two
    calls themselves. Returns ``(sentence vectors [L+1, n, h], per-layer word vectors)``."""
    import torch

    if pooling not in POOLINGS:
        raise XlvizError(f"unknown pooling '{pooling}'; use one of {', '.join(POOLINGS)}", field="pooling")
    if batch_size < 1:
        raise XlvizError(f"must be at least 1, got {batch_size}", field="batch_size")
    sentences = list(sentences)
    sents = [list(w) if not isinstance(w, str) else w for w in words]

    def apart():
        return (sentence_embeddings(model, tokenizer, sentences, pooling, batch_size, max_length),
                word_embeddings_in_context(model, tokenizer, sents, batch_size, max_length))

    if (len(sents) != len(sentences) or not sentences or not getattr(tokenizer, "is_fast", False)
            or any(isinstance(w, str) or not w or not all(isinstance(x, str) for x in w) for w in sents)
            or not all(isinstance(t, str) for t in sentences)):
        return apart()
    enc_model = _encoder(model)
    length = _usable_length(enc_model, max_length)
    ids_s = tokenizer(sentences, truncation=True, max_length=length)["input_ids"]
    ids_w = tokenizer(sents, is_split_into_words=True, truncation=True, max_length=length)["input_ids"]
    if ids_s != ids_w:
        return apart()
    model.eval()
    order = np.argsort([len(i) for i in ids_s], kind="stable")  # as _length_order sorts both calls
    out: np.ndarray | None = None
    results: list[np.ndarray | None] = [None] * len(sents)
    missing: list[list[int]] = [[] for _ in sents]
    n_fallback = 0
    with torch.no_grad():
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size].tolist()
            enc = tokenizer([sents[i] for i in idx], is_split_into_words=True, padding=True, truncation=True,
                            max_length=length, return_special_tokens_mask=pooling == "mean_no_special",
                            return_tensors="pt")
            out, states, fallback = _pool_batch(enc_model, enc, pooling, out, idx, len(sentences))
            n_fallback += fallback
            _average_words(states, enc, idx, sents, results, missing)
    _warn_fallback(n_fallback)
    return out, _word_layers(enc_model, results, missing, length, False)


def _pool_batch(enc_model, enc, pooling: str, out: np.ndarray | None, idx, n: int):
    """One batch's forward pass, pooled into ``out[:, idx]`` (``out`` made at the first batch,
    ``[L+1, n, h]``); returns ``(out, the batch's hidden states [L+1, b, T, h], fallbacks)``."""
    import torch

    outputs = enc_model(**_model_inputs(enc_model, enc), output_hidden_states=True)
    states = torch.stack([h.float() for h in outputs.hidden_states])
    if out is None:
        out = np.empty((states.shape[0], n, states.shape[-1]), dtype=np.float32)
    pooled, fallback = _pool(states, enc, pooling)
    out[:, idx] = pooled
    return out, states, fallback


def _warn_fallback(n_fallback: int) -> None:
    if n_fallback:
        warnings.warn(
            f"{n_fallback} sentence(s) had no non-special tokens; pooled them over all tokens instead",
            stacklevel=3,
        )


def _pool(states, enc, pooling: str) -> tuple[np.ndarray, int]:
    """Sentence vectors [L+1, b, h] of one batch's hidden states [L+1, b, T, h] and how many
    sentences fell back from "mean_no_special" to "mean" (no other tokens)."""
    n_fallback = 0
    if pooling == "cls":
        pooled = states[:, :, 0]
    else:
        mask = enc["attention_mask"].to(states.device).float()
        if pooling == "mean_no_special":
            keep = mask * (1.0 - enc["special_tokens_mask"].to(states.device).float())
            empty = keep.sum(dim=1) == 0
            n_fallback = int(empty.sum())
            keep[empty] = mask[empty]
            mask = keep
        pooled = (states * mask[None, :, :, None]).sum(dim=2) / mask.sum(dim=1).clamp(min=1.0)[None, :, None]
    return pooled.cpu().numpy(), n_fallback


def word_embeddings_in_context(
    model,
    tokenizer,
    words: Sequence[Sequence[str]],
    batch_size: int = 32,
    max_length: int = 128,
    return_missing: bool = False,
):
    """Contextual vectors of each word of pre-split sentences, per layer.

    Returns a list over layers (n_layers + 1, layer 0 = embeddings) of a list over sentences
    of float32 arrays [n_words, hidden]; each word's vector is the mean of its sub-word
    vectors (via ``is_split_into_words=True`` and ``word_ids()``, so a fast tokenizer is
    needed). Words with no token - cut off by truncation at ``max_length`` or tokenized to
    nothing - get NaN rows; with ``return_missing=True`` the result is ``(layers, missing)``
    where ``missing[s]`` lists those word indices of sentence ``s``. A warning counts them.
    """
    import torch

    _require_fast(tokenizer)
    if batch_size < 1:
        raise XlvizError(f"must be at least 1, got {batch_size}", field="batch_size")
    sents = []
    for i, s in enumerate(words):
        if isinstance(s, str) or not all(isinstance(w, str) for w in s):
            raise XlvizError(f"sentence {i} must be a list of word strings (pre-split)", field="words")
        sents.append(list(s))
    enc_model = _encoder(model)
    results: list[np.ndarray | None] = [None] * len(sents)  # each [L+1, n_words, h]
    missing: list[list[int]] = [[] for _ in sents]
    todo = [i for i, s in enumerate(sents) if s]
    max_length = _usable_length(enc_model, max_length)
    if todo:
        model.eval()
        order = [todo[j] for j in _length_order(tokenizer, [sents[i] for i in todo], max_length, is_split_into_words=True)]
        with torch.no_grad():
            for start in range(0, len(order), batch_size):
                idx = order[start : start + batch_size]
                enc = tokenizer(
                    [sents[i] for i in idx],
                    is_split_into_words=True,
                    padding=True,
                    truncation=True,
                    max_length=max_length,
                    return_tensors="pt",
                )
                outputs = enc_model(**_model_inputs(enc_model, enc), output_hidden_states=True)
                states = torch.stack([h.float() for h in outputs.hidden_states])  # [L+1, b, T, h]
                _average_words(states, enc, idx, sents, results, missing)
    return _word_layers(enc_model, results, missing, max_length, return_missing)


def _average_words(states, enc, idx, sents, results: list, missing: list) -> None:
    """Each word's vector (mean of its sub-words) for one batch: ``results[i]`` [L+1, n_words, h]
    and ``missing[i]`` (words with no token) for the batch's sentences ``idx``."""
    import torch

    # averaging matrices [b, n_words, T]: 1/count for each sub-word of a word, built in
    # numpy and applied in one einsum per batch (a Python loop of tensor writes and an
    # einsum per sentence was a tenth of the Alignment page's cold render)
    n_max = max(len(sents[i]) for i in idx)
    avg = np.zeros((len(idx), n_max, states.shape[2]), dtype=np.float32)
    for b in range(len(idx)):
        ids = enc.word_ids(b)
        tok = [t for t, w in enumerate(ids) if w is not None]
        avg[b, [ids[t] for t in tok], tok] = 1.0
    counts = avg.sum(axis=2, keepdims=True)
    avg /= np.maximum(counts, 1.0)
    vecs_all = torch.einsum("bwt,lbth->lbwh", torch.from_numpy(avg).to(states.device), states).cpu().numpy()
    for b, i in enumerate(idx):
        n = len(sents[i])
        missing[i] = np.flatnonzero(counts[b, :n, 0] == 0).tolist()
        vecs = vecs_all[:, b, :n].copy()
        if missing[i]:
            vecs[:, missing[i]] = np.nan
        results[i] = vecs.astype(np.float32, copy=False)


def _word_layers(enc_model, results: list, missing: list, max_length: int, return_missing: bool):
    """Per-sentence word vectors as ``word_embeddings_in_context`` returns them (per layer)."""
    done = [r for r in results if r is not None]
    if done:
        n_states, hidden = done[0].shape[0], done[0].shape[2]
    else:
        n_layers, hidden = _n_layers_hidden(enc_model)
        n_states = n_layers + 1
    empty = np.zeros((n_states, 0, hidden), dtype=np.float32)
    results = [r if r is not None else empty for r in results]
    per_layer = [[r[layer] for r in results] for layer in range(n_states)]
    n_missing = sum(len(m) for m in missing)
    if n_missing:
        n_sent = sum(1 for m in missing if m)
        warnings.warn(
            f"{n_missing} word(s) in {n_sent} sentence(s) have no tokens (truncated at max_length={max_length} "
            "or empty); their rows are NaN",
            stacklevel=3,
        )
    if return_missing:
        return per_layer, missing
    return per_layer

