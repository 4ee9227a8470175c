"""Attention maps of one sentence or a parallel pair, and how much attention crosses languages.

Why: VECO (Luo et al. 2021, Fig. 1) shows that when a parallel pair is fed as one input,
self-attention mostly stays inside each language. ``cross_attention_share`` measures that
per layer/head, ``aligned_attention_share`` measures whether tokens attend to their
translation (given word alignments), and ``attention_slice`` cuts out the few layers/heads a
page wants to draw, so full [layers, heads, T, T] tensors never go to the browser.

Attention weights only come back from the "eager" attention implementation: load models
with ``attn_implementation="eager"`` (``xlviz.models.loading.load_model`` does by default).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from xlviz.analysis.representations import _encoder, _model_inputs, _require_fast, _usable_length
from xlviz.errors import XlvizError

SPECIAL = -1  # segment of special tokens ([CLS], [SEP], <s>, </s>)


@dataclass
class AttentionResult:
    """Attention of one input, with enough token bookkeeping to split it by sentence/word.

    ``segment[t]``: 0 for tokens of sentence a, 1 for sentence b, -1 for special tokens.
    ``word_ids[t]``: index of the word token ``t`` belongs to within its own sentence (None
    for special tokens). ``attentions``: float32 [layers, heads, T, T], rows = queries.
    ``n_words``: words in sentence a and b before truncation.
    """

    tokens: list[str]
    segment: list[int]
    word_ids: list[int | None]
    attentions: np.ndarray
    truncated: bool
    n_tokens_before_truncation: int
    n_words: tuple[int, int] = (0, 0)

    @property
    def n_layers(self) -> int:
        return int(self.attentions.shape[0])

    @property
    def n_heads(self) -> int:
        return int(self.attentions.shape[1])


@dataclass
class AttentionSlice:
    """Selected layers/heads of an AttentionResult, ready to plot (small and JSON-friendly)."""

    tokens: list[str]
    segment: list[int]
    word_ids: list[int | None]
    layers: list[int]
    heads: list[int] | None  # None when heads were averaged
    attentions: np.ndarray  # [len(layers), len(heads) or 1, T', T']

    def to_dict(self) -> dict:
        return {
            "tokens": self.tokens,
            "segment": self.segment,
            "word_ids": self.word_ids,
            "layers": self.layers,
            "heads": self.heads,
            "attentions": self.attentions.tolist(),
        }


def _is_words(text) -> bool:
    return not isinstance(text, str) and isinstance(text, Sequence)


def attention_maps(model, tokenizer, text_a, text_b=None, max_length: int = 128) -> AttentionResult:
    """Run one input through ``model`` and return all attention maps with token bookkeeping.

    ``text_a`` / ``text_b``: strings, or lists of words (pre-split, so word indices match
    gold word alignments); both must be the same kind. With ``text_b`` the pair is fed as
    one input ([CLS] a [SEP] b [SEP], or the tokenizer's own pair template) and truncated
    ``longest_first`` to ``max_length`` tokens; ``truncated`` says whether anything was cut.
    """
    import torch

    _require_fast(tokenizer)
    pre_split = _is_words(text_a)
    if text_b is not None and _is_words(text_b) != pre_split:
        raise XlvizError("text_a and text_b must both be strings or both be lists of words", field="text_b")
    for name, text in (("text_a", text_a), ("text_b", text_b)):
        if text is None:
            continue
        if pre_split and not all(isinstance(w, str) for w in text):
            raise XlvizError("a pre-split sentence must be a list of word strings", field=name)
        if not pre_split and not isinstance(text, str):
            raise XlvizError(f"expected text or a list of words, got {type(text).__name__}", field=name)
    impl = getattr(model.config, "_attn_implementation", None)
    if impl not in (None, "eager"):
        raise XlvizError(
            f"the model uses the '{impl}' attention implementation, which returns no attention weights; "
            "load it with attn_implementation=\"eager\"",
            field="attn_implementation",
        )
    enc_model = _encoder(model)
    max_length = _usable_length(enc_model, max_length)
    args = (text_a,) if text_b is None else (text_a, text_b)
    full = tokenizer(*args, is_split_into_words=pre_split, truncation=False)
    enc = tokenizer(
        *args,
        is_split_into_words=pre_split,
        truncation="longest_first",
        max_length=max_length,
        return_tensors="pt",
    )
    n_before = len(full["input_ids"])
    seq_ids = enc.sequence_ids(0)
    word_ids = enc.word_ids(0)
    segment = [SPECIAL if s is None else int(s) for s in seq_ids]
    words = [None if s is None else w for s, w in zip(seq_ids, word_ids)]
    n_words = _count_words(full, pre_split, text_a, text_b)
    model.eval()
    with torch.no_grad():
        outputs = enc_model(**_model_inputs(enc_model, enc), output_attentions=True)
    atts = getattr(outputs, "attentions", None)
    if not atts or any(a is None for a in atts):
        raise XlvizError(
            "the model returned no attention weights; load it with attn_implementation=\"eager\"",
            field="attn_implementation",
        )
    attentions = torch.stack([a[0].float() for a in atts]).cpu().numpy()  # [L, H, T, T]
    return AttentionResult(
        tokens=enc.tokens(0),
        segment=segment,
        word_ids=words,
        attentions=attentions.astype(np.float32, copy=False),
        truncated=len(enc["input_ids"][0]) < n_before,
        n_tokens_before_truncation=n_before,
        n_words=n_words,
    )


def _count_words(full, pre_split: bool, text_a, text_b) -> tuple[int, int]:
    if pre_split:
        return len(text_a), len(text_b) if text_b is not None else 0
    counts = [0, 0]
    for s, w in zip(full.sequence_ids(), full.word_ids()):
        if s is not None and w is not None:
            counts[s] = max(counts[s], w + 1)
    return counts[0], counts[1]


def _segments(result: AttentionResult) -> np.ndarray:
    seg = np.asarray(result.segment)
    T = result.attentions.shape[-1]
    if result.attentions.ndim != 4 or result.attentions.shape[-2] != T or len(seg) != T:
        raise XlvizError(
            f"attentions shape {result.attentions.shape} does not match {len(seg)} tokens", field="attentions"
        )
    return seg


def _row_share(A: np.ndarray, key_mask: np.ndarray, seg: np.ndarray, hide_special: bool) -> np.ndarray:
    """Attention each query gives to ``key_mask`` columns over its total -> [L, H, Tq].

    ``key_mask`` is [Tq, T] (per query). With ``hide_special`` the total is the attention to
    non-special tokens only, i.e. attention to [CLS]/[SEP] is dropped and the rest renormalised.
    """
    num = np.einsum("lhqt,qt->lhq", A, key_mask.astype(A.dtype))
    if hide_special:
        den = A[..., seg != SPECIAL].sum(axis=-1)
    else:
        den = A.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def cross_attention_share(result: AttentionResult, hide_special: bool = True) -> np.ndarray:
    """Per layer/head, the mean share of attention a token gives to the OTHER sentence -> [L, H].

    Averaged over all (non-special) tokens of sentence a and b together. ``hide_special``
    renormalises each row over non-special tokens, because [CLS]/[SEP] often soak up most of
    the attention and would otherwise hide the a/b split.
    """
    seg = _segments(result)
    content = seg != SPECIAL
    if not np.any(seg == 0) or not np.any(seg == 1):
        raise XlvizError("needs tokens of two sentences; call attention_maps with text_b", field="text_b")
    A = result.attentions.astype(np.float64)
    q = np.flatnonzero(content)
    other = content[None, :] & (seg[q][:, None] != seg[None, :])  # [Tq, T]
    shares = _row_share(A[:, :, q, :], other, seg, hide_special)
    return np.nanmean(shares, axis=-1)


def aligned_attention_share(
    result: AttentionResult,
    alignment: Sequence[tuple[int, int]],
    hide_special: bool = True,
) -> np.ndarray:
    """Per layer/head, how much attention aligned words give to their translation -> [L, H].

    ``alignment``: (word index in sentence a, word index in sentence b) pairs, e.g. gold
    alignments over pre-split words. Each sub-word token of an aligned word in a contributes
    the share of its attention that goes to all sub-word tokens of the word(s) it is aligned
    to in b; likewise b -> a. Each direction is averaged over its tokens and the two
    directions are averaged. Pairs whose words were truncated away are skipped.
    ``hide_special`` renormalises over non-special tokens, as in ``cross_attention_share``.
    """
    seg = _segments(result)
    n_a, n_b = result.n_words
    tokens_of: dict[tuple[int, int], list[int]] = defaultdict(list)
    for t, (s, w) in enumerate(zip(seg, result.word_ids)):
        if s != SPECIAL and w is not None:
            tokens_of[(int(s), int(w))].append(t)
    partners: dict[tuple[int, int], set[int]] = defaultdict(set)  # (sentence, word) -> other words
    for pair in alignment:
        if len(pair) != 2:
            raise XlvizError(f"alignment pair {pair!r} is not (word in a, word in b)", field="alignment")
        i, j = int(pair[0]), int(pair[1])
        if not 0 <= i < n_a or not 0 <= j < n_b:
            raise XlvizError(
                f"pair ({i}, {j}) is out of range: sentence a has {n_a} words, sentence b has {n_b}",
                field="alignment",
            )
        if tokens_of.get((0, i)) and tokens_of.get((1, j)):
            partners[(0, i)].add(j)
            partners[(1, j)].add(i)
    if not partners:
        raise XlvizError("no aligned word pair has tokens left (empty alignment or all truncated)", field="alignment")
    A = result.attentions.astype(np.float64)
    T = A.shape[-1]
    per_direction = []
    for side in (0, 1):
        q_tokens, key_rows = [], []
        for (s, w), others in partners.items():
            if s != side:
                continue
            keys = np.zeros(T, dtype=bool)
            for o in others:
                keys[tokens_of[(1 - side, o)]] = True
            for t in tokens_of[(s, w)]:
                q_tokens.append(t)
                key_rows.append(keys)
        shares = _row_share(A[:, :, q_tokens, :], np.stack(key_rows), seg, hide_special)
        per_direction.append(np.nanmean(shares, axis=-1))
    return (per_direction[0] + per_direction[1]) / 2.0


def attention_slice(
    result: AttentionResult,
    layers: int | Sequence[int] | None = None,
    heads: int | Sequence[int] | None = None,
    hide_special: bool = False,
    average_heads: bool = False,
) -> AttentionSlice:
    """Cut out the layers/heads to draw; optionally drop special tokens and average heads.

    ``layers`` / ``heads``: an index, a list of indices, or None for all. ``hide_special``
    removes [CLS]/[SEP]-like rows and columns and renormalises each remaining row to sum to 1
    (rows with no attention left stay 0). ``average_heads`` averages the selected heads
    (``heads`` is then None in the result and the head axis has length 1).
    """
    seg = _segments(result)
    L, H = result.attentions.shape[:2]
    layer_idx = _indices(layers, L, "layers")
    head_idx = _indices(heads, H, "heads")
    A = result.attentions[np.ix_(layer_idx, head_idx)].astype(np.float32)
    keep = np.arange(len(seg)) if not hide_special else np.flatnonzero(seg != SPECIAL)
    A = A[..., keep, :][..., keep]
    if hide_special:
        sums = A.sum(axis=-1, keepdims=True)
        A = np.divide(A, sums, out=np.zeros_like(A), where=sums > 0)
    if average_heads:
        A = A.mean(axis=1, keepdims=True)
    return AttentionSlice(
        tokens=[result.tokens[t] for t in keep],
        segment=[int(seg[t]) for t in keep],
        word_ids=[result.word_ids[t] for t in keep],
        layers=layer_idx,
        heads=None if average_heads else head_idx,
        attentions=A,
    )


def _indices(sel, n: int, name: str) -> list[int]:
    if sel is None:
        return list(range(n))
    items = [sel] if isinstance(sel, (int, np.integer)) else list(sel)
    out = []
    for k in items:
        k = int(k)
        if not -n <= k < n:
            raise XlvizError(f"index {k} is out of range (there are {n})", field=name)
        out.append(k % n)
    if not out:
        raise XlvizError("select at least one", field=name)
    return out


def mixed_pair_attention_maps(
    model, tokenizer_a, tokenizer_b, embeddings_b, text_a, text_b, max_length: int = 128
) -> AttentionResult:
    """Attention of ``[CLS] a [SEP] b [SEP]`` through one body where each sentence is embedded
    with its own language's vocabulary: MONOTRANS models share everything but the token
    embeddings, so an L1 sentence (``tokenizer_a`` + the model's own embeddings) and its L2
    translation (``tokenizer_b`` + ``embeddings_b``, the L2 model's input embedding module) can
    be fed as one input, the way VECO (Fig. 1) feeds a pair to a joint model.

    ``text_a``/``text_b`` are strings or pre-split word lists (then ``word_ids`` follow them,
    so gold word alignments apply). The model must use eager attention.
    """
    import torch

    if getattr(model.config, "_attn_implementation", "eager") != "eager":
        raise XlvizError("attention weights need attn_implementation='eager'; reload the model with it", field="model")
    pre_split = _is_words(text_a)
    enc_a = tokenizer_a(text_a, add_special_tokens=False, is_split_into_words=pre_split)
    enc_b = tokenizer_b(text_b, add_special_tokens=False, is_split_into_words=pre_split)
    ids_a, ids_b = list(enc_a["input_ids"]), list(enc_b["input_ids"])
    words_a = enc_a.word_ids() if pre_split else [None] * len(ids_a)
    words_b = enc_b.word_ids() if pre_split else [None] * len(ids_b)
    total = len(ids_a) + len(ids_b) + 3
    budget = max_length - 3
    while len(ids_a) + len(ids_b) > budget:  # longest-first truncation
        if len(ids_a) >= len(ids_b):
            ids_a, words_a = ids_a[:-1], words_a[:-1]
        else:
            ids_b, words_b = ids_b[:-1], words_b[:-1]
    cls, sep = tokenizer_a.cls_token_id, tokenizer_a.sep_token_id
    model.eval()
    emb_a = model.get_input_embeddings()
    device = emb_a.weight.device
    with torch.no_grad():
        parts = [
            emb_a(torch.tensor([[cls] + ids_a + [sep]], device=device)),
            embeddings_b(torch.tensor([ids_b], device=device)),
            emb_a(torch.tensor([[sep]], device=device)),
        ]
        inputs_embeds = torch.cat(parts, dim=1)
        n = inputs_embeds.shape[1]
        token_type_ids = torch.tensor([[0] * (len(ids_a) + 2) + [1] * (len(ids_b) + 1)], device=device)
        out = model(inputs_embeds=inputs_embeds, token_type_ids=token_type_ids, attention_mask=torch.ones(1, n, dtype=torch.long, device=device), output_attentions=True)
    if not out.attentions or out.attentions[0] is None:
        raise XlvizError("the model returned no attention weights; load it with attn_implementation='eager'", field="model")
    att = np.stack([a[0].float().cpu().numpy() for a in out.attentions])
    tokens = [tokenizer_a.cls_token] + tokenizer_a.convert_ids_to_tokens(ids_a) + [tokenizer_a.sep_token] + tokenizer_b.convert_ids_to_tokens(ids_b) + [tokenizer_a.sep_token]
    segment = [SPECIAL] + [0] * len(ids_a) + [SPECIAL] + [1] * len(ids_b) + [SPECIAL]
    word_ids = [None] + list(words_a) + [None] + list(words_b) + [None]
    n_words = (len(text_a), len(text_b)) if pre_split else (len(str(text_a).split()), len(str(text_b).split()))
    return AttentionResult(tokens, segment, word_ids, att, total > max_length, total, n_words)


def same_body(model_a, model_b, atol: float = 1e-6) -> bool:
    """True when two models have identical parameters apart from their token embeddings (and
    output layers tied to them): the L1 and L2 models of one MONOTRANS transfer step."""
    import torch

    a, b = model_a.base_model.state_dict(), model_b.base_model.state_dict()
    skip = ("word_embeddings", "position_embeddings", "pooler")  # pooler: absent from MLM checkpoints, random on load
    names = [n for n in a if not any(s in n for s in skip)]
    if set(names) != {n for n in b if not any(s in n for s in skip)}:
        return False
    return all(a[n].shape == b[n].shape and torch.allclose(a[n].float(), b[n].float(), atol=atol) for n in names)


# --- a model's own cross-attention (VECO's plug-in module) ---------------------------------------

@dataclass
class CrossAttentionResult:
    """Cross-attention of sentence a's tokens (queries) over sentence b's (keys and values:
    b's last-layer states): ``attentions`` float32 [layers, heads, Ta, Tb], rows sum to 1 over
    b's tokens. ``tokens_*`` include the special tokens; ``special_*`` flags them."""

    tokens_a: list[str]
    tokens_b: list[str]
    special_a: list[bool]
    special_b: list[bool]
    attentions: np.ndarray

    @property
    def n_layers(self) -> int:
        return int(self.attentions.shape[0])

    @property
    def n_heads(self) -> int:
        return int(self.attentions.shape[1])

    def slice(self, layer: int, head: int | None = None, hide_special: bool = False) -> tuple[np.ndarray, list[str], list[str]]:
        """One layer's map [Ta, Tb] (one head, or the mean of heads), optionally without
        special tokens (rows renormalised over b's remaining tokens)."""
        A = self.attentions[_indices(layer, self.n_layers, "layers")[0]]
        A = A.mean(0) if head is None else A[_indices(head, self.n_heads, "heads")[0]]
        rows = [i for i, s in enumerate(self.special_a) if not (hide_special and s)]
        cols = [j for j, s in enumerate(self.special_b) if not (hide_special and s)]
        A = A[np.ix_(rows, cols)].astype(np.float32)
        if hide_special:
            sums = A.sum(axis=-1, keepdims=True)
            A = np.divide(A, sums, out=np.zeros_like(A), where=sums > 0)
        return A, [self.tokens_a[i] for i in rows], [self.tokens_b[j] for j in cols]


def has_cross_attention(model) -> bool:
    """Whether ``model`` carries its own cross-attention module (VECO's), by its config."""
    from xlviz.models.veco import has_cross_attention as _has

    return _has(model)


def cross_attention_maps(model_a, tokenizer_a, model_b, tokenizer_b, text_a, text_b, max_length: int = 128) -> CrossAttentionResult:
    """The cross-attention maps of a model with a cross-attention module: ``text_a`` (read by
    ``model_a``) attending over ``text_b``'s last-layer states (read by ``model_b``, the same
    model, or the same body with another language's embeddings, e.g. a VECO run's per-language
    encoders), each sentence alone with its own [CLS]/[SEP]; every layer and head."""
    import torch

    if not has_cross_attention(model_a):
        raise XlvizError("this model has no cross-attention module of its own", field="model")
    if model_b is not model_a and not same_body(model_a, model_b):
        raise XlvizError("A's and B's models differ in more than their token embeddings: pick the two languages of one "
                         "model (e.g. a pair model's exports) so B's states are the ones A's cross-attention was trained on",
                         field="model")
    enc_a, enc_b = _encoder(model_a), _encoder(model_b)
    pre_split = _is_words(text_a)
    a = tokenizer_a(text_a, is_split_into_words=pre_split, truncation=True, max_length=_usable_length(enc_a, max_length), return_tensors="pt")
    b = tokenizer_b(text_b, is_split_into_words=pre_split, truncation=True, max_length=_usable_length(enc_b, max_length), return_tensors="pt")
    model_a.eval()
    model_b.eval()
    with torch.no_grad():
        pair = enc_b(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).last_hidden_state
        _, probs = enc_a.cross_stream(a["input_ids"], a["attention_mask"], None, pair, b["attention_mask"], output_attentions=True)
    att = torch.stack([p[0].float() for p in probs]).cpu().numpy()
    specials_a = set(tokenizer_a.all_special_ids)
    specials_b = set(tokenizer_b.all_special_ids)
    return CrossAttentionResult(
        tokens_a=a.tokens(0), tokens_b=b.tokens(0),
        special_a=[int(i) in specials_a for i in a["input_ids"][0]], special_b=[int(i) in specials_b for i in b["input_ids"][0]],
        attentions=att.astype(np.float32, copy=False),
    )
