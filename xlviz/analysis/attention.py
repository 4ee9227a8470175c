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

    enc_model, enc, segment, words, n_words, n_before = _encode_input(model, tokenizer, text_a, text_b, max_length)
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


def _encode_input(model, tokenizer, text_a, text_b, max_length: int):
    """Check the texts and the model's attention implementation, and tokenize as
    :func:`attention_maps` feeds them -> (encoder, encoding, segment, word ids, word counts,
    tokens before truncation); shared with :func:`query_key_vectors` so both see the same tokens."""
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
    return enc_model, enc, segment, words, n_words, n_before


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

    forward, tokens, segment, word_ids, total, n_words = _mixed_inputs(model, tokenizer_a, tokenizer_b, embeddings_b,
                                                                       text_a, text_b, max_length)
    model.eval()
    with torch.no_grad():
        out = model(**forward, output_attentions=True)
    if not out.attentions or out.attentions[0] is None:
        raise XlvizError("the model returned no attention weights; load it with attn_implementation='eager'", field="model")
    att = np.stack([a[0].float().cpu().numpy() for a in out.attentions])
    return AttentionResult(tokens, segment, word_ids, att, total > max_length, total, n_words)


def _mixed_inputs(model, tokenizer_a, tokenizer_b, embeddings_b, text_a, text_b, max_length: int):
    """The forward arguments of :func:`mixed_pair_attention_maps` (``inputs_embeds`` with A in
    A's vocabulary and B in B's) and its token bookkeeping -> (forward kwargs, tokens, segment,
    word ids, tokens before truncation, word counts); shared with :func:`mixed_pair_query_key_vectors`."""
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
    forward = dict(inputs_embeds=inputs_embeds, token_type_ids=token_type_ids,
                   attention_mask=torch.ones(1, n, dtype=torch.long, device=device))
    tokens = [tokenizer_a.cls_token] + tokenizer_a.convert_ids_to_tokens(ids_a) + [tokenizer_a.sep_token] + tokenizer_b.convert_ids_to_tokens(ids_b) + [tokenizer_a.sep_token]
    segment = [SPECIAL] + [0] * len(ids_a) + [SPECIAL] + [1] * len(ids_b) + [SPECIAL]
    word_ids = [None] + list(words_a) + [None] + list(words_b) + [None]
    n_words = (len(text_a), len(text_b)) if pre_split else (len(str(text_a).split()), len(str(text_b).split()))
    return forward, tokens, segment, word_ids, total, n_words

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


# --- bertviz's neuron view: the query and key vectors behind one head's weights ------------------
#
# A head's weight from query token i to key token j is softmax_j(q_i · k_j * scaling + mask_j),
# scaling = 1/sqrt(d_head). Forward hooks on each self-attention layer's query and key
# projections capture q and k during one ordinary forward pass; the same pass returns the
# model's own weights, and the recomputed ones must match them, so the view never explains a
# model whose attention is something else (relative positions, ALiBi, ...).

QK_TOLERANCE = 1e-3  # largest |recomputed - model's| weight accepted before the view refuses


@dataclass
class Neuron:
    """One query token of one head, taken apart: ``query`` [d], ``keys`` [T, d], ``products``
    q ⊙ k_j [T, d], ``scores`` q·k_j·scaling [T], ``weights`` softmax(scores + mask) [T]."""

    layer: int
    head: int
    token: int
    tokens: list[str]
    segment: list[int]
    query: np.ndarray
    keys: np.ndarray
    products: np.ndarray
    scores: np.ndarray
    weights: np.ndarray
    scaling: float


def neuron_arithmetic(query: np.ndarray, keys: np.ndarray, scaling: float,
                      key_mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(q ⊙ k_j [T, d], q·k_j·scaling [T], softmax(scores + key_mask) [T]) in float64: the
    arithmetic the neuron view draws, kept apart so it can be checked by hand."""
    q = np.asarray(query, dtype=np.float64)
    k = np.asarray(keys, dtype=np.float64)
    products = k * q[None, :]
    scores = products.sum(axis=-1) * float(scaling)
    logits = scores + (np.zeros_like(scores) if key_mask is None else np.asarray(key_mask, dtype=np.float64))
    top = np.max(logits[np.isfinite(logits)]) if np.isfinite(logits).any() else 0.0
    e = np.exp(logits - top)
    return products, scores, e / e.sum()


@dataclass
class QueryKeys:
    """Every self-attention layer's query and key vectors for one input.

    ``queries`` / ``keys``: float32 [layers, heads, T, d_head]; ``key_mask``: what the model adds
    to each key's score (0, or -inf where it must not attend: padding); ``scaling``: the factor
    on q·k (1/sqrt(d_head)). Tokens and segments as in :class:`AttentionResult`.
    """

    tokens: list[str]
    segment: list[int]
    queries: np.ndarray
    keys: np.ndarray
    key_mask: np.ndarray
    scaling: float
    truncated: bool = False
    n_tokens_before_truncation: int = 0

    @property
    def n_layers(self) -> int:
        return int(self.queries.shape[0])

    @property
    def n_heads(self) -> int:
        return int(self.queries.shape[1])

    @property
    def head_size(self) -> int:
        return int(self.queries.shape[-1])

    def position(self, token: int | str) -> int:
        """A token position (negative counts from the end), or the first token with this text."""
        if isinstance(token, str):
            if token not in self.tokens:
                raise XlvizError(f"no token {token!r} in this input; it has {self.tokens}", field="token")
            return self.tokens.index(token)
        return _indices(int(token), len(self.tokens), "token")[0]

    def neuron(self, layer: int, head: int, token: int | str) -> Neuron:
        """Query token ``token`` of ``head`` in ``layer``: its q, every k_j, q ⊙ k_j, the scores and weights."""
        l = _indices(layer, self.n_layers, "layer")[0]
        h = _indices(head, self.n_heads, "head")[0]
        i = self.position(token)
        q, k = self.queries[l, h, i], self.keys[l, h]
        products, scores, weights = neuron_arithmetic(q, k, self.scaling, self.key_mask)
        return Neuron(l, h, i, list(self.tokens), list(self.segment), q.astype(np.float64), k.astype(np.float64),
                      products, scores, weights, self.scaling)


def self_attention_projections(model) -> list[tuple[str, object, object, int, float]]:
    """``(name, query linear, key linear, heads, scaling)`` of each self-attention layer of a
    BERT-style encoder (BERT, RoBERTa, XLM-R, ELECTRA: ``query``/``key``; DistilBERT:
    ``q_lin``/``k_lin``), in layer order; cross-attention modules are left out."""
    from torch import nn

    enc = _encoder(model)
    cfg = enc.config
    default_heads = getattr(cfg, "num_attention_heads", None) or getattr(cfg, "n_heads", None)
    out = []
    for name, m in enc.named_modules():
        if "cross" in name.lower() or "cross" in type(m).__name__.lower():
            continue
        for qn, kn in (("query", "key"), ("q_lin", "k_lin")):
            q, k = getattr(m, qn, None), getattr(m, kn, None)
            if isinstance(q, nn.Linear) and isinstance(k, nn.Linear):
                heads = int(getattr(m, "num_attention_heads", None) or getattr(m, "n_heads", None) or default_heads or 0)
                if heads <= 0 or q.out_features % heads or q.out_features != k.out_features:
                    raise XlvizError(f"cannot split {name}'s query projection ({q.out_features}) into {heads} heads",
                                     field="model")
                scaling = getattr(m, "scaling", None)
                out.append((name, q, k, heads, float(scaling if scaling is not None else (q.out_features // heads) ** -0.5)))
                break
    return out


def capture_query_keys(model, **inputs) -> tuple[np.ndarray, np.ndarray, float, list[np.ndarray]]:
    """One forward pass of ``model`` (``inputs``: its forward's tensors, a batch) with forward
    hooks on every self-attention query/key projection -> (queries, keys, scaling, the model's
    own attention weights): queries/keys float32 [batch, layers, heads, T, d_head], weights
    float32 [batch, heads, T, T] per layer. The hooks are removed afterwards, whatever happens."""
    import torch

    if getattr(model.config, "_attn_implementation", None) not in (None, "eager"):
        raise XlvizError("query/key vectors are checked against the model's own attention weights, which need "
                         "attn_implementation=\"eager\"; reload the model with it", field="attn_implementation")
    specs = self_attention_projections(model)
    if not specs:
        raise XlvizError(f"found no self-attention query/key projections in {type(model).__name__} (BERT-style "
                         "encoders have them)", field="model")
    scalings = {round(s, 9) for *_, s in specs}
    if len(scalings) != 1:
        raise XlvizError("the self-attention layers scale q·k differently", field="model")
    store: dict[tuple[str, int], torch.Tensor] = {}
    handles = []
    for i, (_, q, k, _, _) in enumerate(specs):
        handles.append(q.register_forward_hook(lambda mod, inp, out, i=i: store.__setitem__(("q", i), out.detach())))
        handles.append(k.register_forward_hook(lambda mod, inp, out, i=i: store.__setitem__(("k", i), out.detach())))
    model.eval()
    try:
        with torch.no_grad():
            outputs = model(**inputs, output_attentions=True)
    finally:
        for h in handles:
            h.remove()
    atts = getattr(outputs, "attentions", None)
    if not atts or any(a is None for a in atts):
        raise XlvizError("the model returned no attention weights; load it with attn_implementation=\"eager\"",
                         field="attn_implementation")
    if len(atts) != len(specs) or len(store) != 2 * len(specs):
        raise XlvizError(f"found {len(specs)} self-attention layers but the model returned {len(atts)} attention maps",
                         field="model")

    def heads_first(t, n_heads: int) -> torch.Tensor:  # [B, T, H*d] -> [B, H, T, d]
        b, T, width = t.shape
        return t.reshape(b, T, n_heads, width // n_heads).permute(0, 2, 1, 3)

    queries = torch.stack([heads_first(store[("q", i)], s[3]) for i, s in enumerate(specs)], dim=1)
    keys = torch.stack([heads_first(store[("k", i)], s[3]) for i, s in enumerate(specs)], dim=1)
    weights = [a.float().cpu().numpy() for a in atts]
    return (queries.float().cpu().numpy(), keys.float().cpu().numpy(), specs[0][4], weights)


def _check_recomputed(queries: np.ndarray, keys: np.ndarray, scaling: float, key_mask: np.ndarray,
                      weights: list[np.ndarray]) -> None:
    """Refuse a model whose weights are not softmax(q·k·scaling + mask) of the captured vectors."""
    for l, w in enumerate(weights):
        logits = np.einsum("htd,hsd->hts", queries[l].astype(np.float64), keys[l].astype(np.float64)) * scaling + key_mask
        logits -= logits.max(axis=-1, keepdims=True)
        e = np.exp(logits)
        mine = e / e.sum(axis=-1, keepdims=True)
        gap = float(np.abs(mine - w.astype(np.float64)).max())
        if not gap <= QK_TOLERANCE:
            raise XlvizError(f"layer {l}'s attention is not softmax(q·k/√d) of its query/key projections (off by "
                             f"{gap:.3g}): this model computes attention another way, so a neuron view would not "
                             "explain its weights", field="model")


def _key_mask(attention_mask) -> np.ndarray:
    m = np.asarray(attention_mask.cpu().numpy() if hasattr(attention_mask, "cpu") else attention_mask).reshape(-1)
    return np.where(m > 0, 0.0, -np.inf)


def query_key_vectors(model, tokenizer, text_a, text_b=None, max_length: int = 128) -> QueryKeys:
    """The query and key vectors of every layer and head for one input, tokenized exactly as
    :func:`attention_maps` does (so positions match its maps); one forward pass, checked
    against the model's own weights."""
    enc_model, enc, segment, _, _, n_before = _encode_input(model, tokenizer, text_a, text_b, max_length)
    inputs = _model_inputs(enc_model, enc)
    q, k, scaling, weights = capture_query_keys(enc_model, **inputs)
    mask = _key_mask(inputs["attention_mask"]) if "attention_mask" in inputs else np.zeros(q.shape[3])
    q, k = q[0], k[0]
    _check_recomputed(q, k, scaling, mask, [w[0] for w in weights])
    return QueryKeys(tokens=enc.tokens(0), segment=segment, queries=q, keys=k, key_mask=mask, scaling=scaling,
                     truncated=len(enc["input_ids"][0]) < n_before, n_tokens_before_truncation=n_before)


def mixed_pair_query_key_vectors(model, tokenizer_a, tokenizer_b, embeddings_b, text_a, text_b,
                                 max_length: int = 128) -> QueryKeys:
    """:func:`query_key_vectors` for the input of :func:`mixed_pair_attention_maps` (A in A's
    vocabulary, B in B's, through one body)."""
    forward, tokens, segment, _, total, _ = _mixed_inputs(model, tokenizer_a, tokenizer_b, embeddings_b,
                                                          text_a, text_b, max_length)
    q, k, scaling, weights = capture_query_keys(model, **forward)
    mask = _key_mask(forward["attention_mask"])
    q, k = q[0], k[0]
    _check_recomputed(q, k, scaling, mask, [w[0] for w in weights])
    return QueryKeys(tokens=tokens, segment=segment, queries=q, keys=k, key_mask=mask, scaling=scaling,
                     truncated=total > max_length, n_tokens_before_truncation=total)
