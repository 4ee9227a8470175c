"""Vocabularies for models that read several languages: one learned on all of them (JOINTPAIR
/ JOINTMULTI "joint"), or each language's own side by side in one embedding matrix (JOINTPAIR
"disjoint", Wu et al.'s separate vocabularies).

Joint: the paper's joint baselines learn one subword vocabulary on the concatenated corpora,
sampled with Conneau & Lample (2019)'s exponentially smoothed weights (§3.2: "the same
upsampling strategy ... for both the subword vocabulary learning and the pre-training"), so a
large L1 corpus does not take all the subwords. By default (alpha = 0) each language
contributes the same number of *characters*, the smallest corpus's size (its sentences drawn
in a seeded random order until the budget is spent): characters, not sentences, because
languages with longer sentences would otherwise weigh more in the subword counts; nothing is
repeated then. alpha > 0 gives the paper's smoothed shares, up-sampling small corpora.

Disjoint: every language keeps its own tokenizer (the MONOTRANS vocabularies); the joint
embedding matrix is the five shared special rows followed by each language's non-special rows
in the order of ``languages``. The only ids two languages share are the specials, which keep
their ids ([PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4) in every language and in the joint space.
Slicing a joint model back to one language's plain HF model is model surgery and lives in
:mod:`xlviz.models.vocab_slice` (the data layer does not import models).
"""

from __future__ import annotations

import json
import random
from numbers import Integral
from typing import Mapping, Sequence

import torch
from tokenizers import Tokenizer
from transformers import PreTrainedTokenizerFast

from xlviz.data.tokenization import SPECIAL_TOKENS, train_tokenizer
from xlviz.errors import XlvizError

N_SPECIAL = len(SPECIAL_TOKENS)


def smoothed_weights(sizes: Mapping[str, float], alpha: float) -> dict[str, float]:
    """Conneau & Lample (2019)'s exponentially smoothed language weights q_i = p_i^alpha /
    sum_j p_j^alpha, p_i being language i's share of the data: alpha = 0 is balanced, 1 the
    natural proportions, in between up-samples small languages."""
    if not sizes:
        raise XlvizError("no languages to weigh", field="sizes")
    bad = [lang for lang, n in sizes.items() if not n > 0]
    if bad:
        raise XlvizError(f"no positive data size for {bad}", field="sizes")
    if alpha < 0:
        raise XlvizError(f"alpha must be >= 0, got {alpha}", field="alpha")
    total = sum(sizes.values())
    raw = {lang: (n / total) ** alpha for lang, n in sizes.items()}
    norm = sum(raw.values())
    return {lang: r / norm for lang, r in raw.items()}


def balanced_sample(
    corpora: Mapping[str, Sequence[str]], *, alpha: float = 0.0, total_chars: int | None = None, seed: int = 0
) -> dict[str, list[str]]:
    """Per language, ``q_i * total_chars`` characters of sentences (q from
    :func:`smoothed_weights`), drawn in a seeded random order, cycling through the corpus again
    (up-sampling) when it is smaller than its share; the sentence that crosses the budget is
    kept. Default ``total_chars``: with alpha = 0, the language count times the smallest
    corpus (every language exactly its smallest size: nothing repeated); otherwise the sum of
    all corpora."""
    if not corpora:
        raise XlvizError("no corpora given for the joint vocabulary", field="corpora")
    totals = {lang: sum(len(s) for s in texts) for lang, texts in corpora.items()}
    empty = [lang for lang, n in totals.items() if n == 0]
    if empty:
        raise XlvizError(f"empty corpus for {empty}", field="corpora")
    weights = smoothed_weights(totals, alpha)
    if total_chars is None:
        total_chars = len(totals) * min(totals.values()) if alpha == 0 else sum(totals.values())
    if total_chars <= 0:
        raise XlvizError(f"total_chars must be positive, got {total_chars}", field="total_chars")
    out: dict[str, list[str]] = {}
    for k, lang in enumerate(sorted(corpora)):
        texts = [t for t in corpora[lang] if t]
        rng = random.Random(seed * 1_000_003 + k)
        budget = weights[lang] * total_chars
        taken, used = [], 0
        while used < budget:
            order = list(range(len(texts)))
            rng.shuffle(order)
            for i in order:
                if used >= budget:
                    break
                taken.append(texts[i])
                used += len(texts[i])
        out[lang] = taken
    return out


def train_joint_tokenizer(
    corpora: Mapping[str, Sequence[str]],
    vocab_size: int = 1000,
    *,
    algorithm: str = "wordpiece",
    lowercase: bool = True,
    alpha: float = 0.0,
    total_chars: int | None = None,
    seed: int = 0,
    model_max_length: int = 512,
) -> PreTrainedTokenizerFast:
    """One vocabulary learned on every language of ``corpora`` ({lang: sentences}), each
    contributing the same number of characters by default (alpha = 0; the paper's exponentially
    smoothed up-sampling with alpha > 0; :func:`balanced_sample`). Same trainer,
    special tokens and post-processor as :func:`xlviz.data.tokenization.train_tokenizer`.
    Deterministic as far as ``tokenizers`` allows: the sample is seeded, languages are visited
    in sorted order and WordPiece ids are put in :func:`canonical_order`; exact ties in the
    trainer's merge counts are still broken in a per-process order (see there)."""
    sample = balanced_sample(corpora, alpha=alpha, total_chars=total_chars, seed=seed)
    texts = [s for lang in sorted(sample) for s in sample[lang]]
    tok = train_tokenizer(texts, vocab_size, algorithm=algorithm, lowercase=lowercase, model_max_length=model_max_length)
    return canonical_order(tok) if algorithm == "wordpiece" else tok


def canonical_order(tokenizer: PreTrainedTokenizerFast) -> PreTrainedTokenizerFast:
    """The same WordPiece vocabulary with its ids in a fixed order: specials 0-4, then word
    starts, then ``##`` continuations, each sorted as strings.

    Why: ``tokenizers``' trainer numbers tokens in the iteration order of a Rust hash map,
    which is seeded per process, so two trainings on the same texts give the same tokens
    under different ids (and, when merge counts tie exactly, occasionally a different last
    few tokens: that part no reordering can fix). WordPiece splits by longest match, so the
    order of ids changes no tokenization."""
    state = json.loads(tokenizer.backend_tokenizer.to_str())
    vocab = state["model"]["vocab"]
    rest = sorted((t for t in vocab if t not in SPECIAL_TOKENS), key=lambda t: (t.startswith("##"), t))
    state["model"]["vocab"] = {t: i for i, t in enumerate(SPECIAL_TOKENS + rest)}
    return PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(json.dumps(state)), model_max_length=tokenizer.model_max_length,
        pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]",
        model_input_names=list(tokenizer.model_input_names),
    )


def check_special_layout(tokenizer, lang: str) -> None:
    """Each language's tokenizer must have the xlviz specials at ids 0-4 (their rows are the
    shared ones) and nothing else special."""
    for i, t in enumerate(SPECIAL_TOKENS):
        if tokenizer.convert_tokens_to_ids(t) != i:
            raise XlvizError(f"tokenizer of {lang!r} has {t} at id {tokenizer.convert_tokens_to_ids(t)}, not {i}", field="tokenizer")


class DisjointVocab:
    """Id maps between each language's tokenizer and one joint embedding matrix.

    Joint row layout: ``[specials (5)] [languages[0] ids 5..V0-1] [languages[1] ids 5..V1-1] ...``.
    ``to_joint`` / ``from_joint`` map ids; ``language_rows(lang)`` lists the joint rows of a
    language in its own tokenizer's id order (so ``joint_matrix[language_rows(lang)]`` is the
    language's embedding matrix).

    MLM on the joint model: masking a batch in the *language's* id space (``mask_tokens(ids,
    vocab_size=vocab.sizes[lang])``) and then mapping inputs and labels with :meth:`to_joint`
    (-100 passes through) draws BERT's 10% random replacements from the same language
    (:func:`xlviz.training.multilingual.mlm_inputs` does this); BERT's own code on a joint
    vocabulary draws them from every language's tokens."""

    def __init__(self, tokenizers: Mapping[str, object], languages: Sequence[str] | None = None):
        self.languages = list(languages if languages is not None else tokenizers)
        if not self.languages or len(set(self.languages)) != len(self.languages):
            raise XlvizError(f"need distinct languages, got {self.languages}", field="languages")
        self.sizes: dict[str, int] = {}
        self.offsets: dict[str, int] = {}
        start = N_SPECIAL
        for lang in self.languages:
            if lang not in tokenizers:
                raise XlvizError(f"no tokenizer for language {lang!r}", field="tokenizers")
            check_special_layout(tokenizers[lang], lang)
            size = len(tokenizers[lang])
            self.sizes[lang] = size
            self.offsets[lang] = start
            start += size - N_SPECIAL
        self.vocab_size = start

    def _lang(self, lang: str) -> str:
        if lang not in self.offsets:
            raise XlvizError(f"unknown language {lang!r}; the joint vocabulary has {self.languages}", field="language")
        return lang

    def to_joint(self, lang: str, ids):
        """A language's ids (int, list or tensor) in the joint id space; specials unchanged."""
        shift = self.offsets[self._lang(lang)] - N_SPECIAL
        if isinstance(ids, torch.Tensor):
            if ids.numel() and int(ids.max()) >= self.sizes[lang]:
                raise XlvizError(f"id {int(ids.max())} outside {lang!r}'s vocabulary of {self.sizes[lang]}", field="input_ids")
            return torch.where(ids < N_SPECIAL, ids, ids + shift)
        if isinstance(ids, Integral):
            return int(ids) if ids < N_SPECIAL else int(ids) + shift
        return [self.to_joint(lang, i) for i in ids]

    def from_joint(self, lang: str, ids):
        """Inverse of :meth:`to_joint`; a joint id of another language raises."""
        start, size = self.offsets[self._lang(lang)], self.sizes[lang]
        if isinstance(ids, torch.Tensor):
            own = (ids < N_SPECIAL) | ((ids >= start) & (ids < start + size - N_SPECIAL))
            if not bool(own.all()):
                raise XlvizError(f"joint ids outside {lang!r}'s rows", field="input_ids")
            return torch.where(ids < N_SPECIAL, ids, ids - start + N_SPECIAL)
        if isinstance(ids, Integral):
            ids = int(ids)
            if ids < N_SPECIAL:
                return ids
            if not start <= ids < start + size - N_SPECIAL:
                raise XlvizError(f"joint id {ids} is not a {lang!r} row", field="input_ids")
            return ids - start + N_SPECIAL
        return [self.from_joint(lang, i) for i in ids]

    def language_rows(self, lang: str) -> torch.Tensor:
        """Joint rows of ``lang`` in its tokenizer's id order (length = its vocabulary size)."""
        start = self.offsets[self._lang(lang)]
        return torch.cat([torch.arange(N_SPECIAL), torch.arange(start, start + self.sizes[lang] - N_SPECIAL)])

    def stack(self, matrices: Mapping[str, torch.Tensor], specials_from: str | None = None) -> torch.Tensor:
        """A joint matrix from per-language ones ([V_lang, d] in each tokenizer's order):
        special rows from ``specials_from`` (default: the first language), then each
        language's non-special rows. Used to start a joint model from per-language embeddings."""
        first = specials_from or self.languages[0]
        rows = [matrices[self._lang(first)][:N_SPECIAL]]
        for lang in self.languages:
            m = matrices[lang]
            if m.shape[0] != self.sizes[lang]:
                raise XlvizError(f"{lang!r} matrix has {m.shape[0]} rows, its vocabulary {self.sizes[lang]}", field="matrices")
            rows.append(m[N_SPECIAL:])
        return torch.cat(rows)
