"""A deterministic WordPiece/BPE vocabulary trainer.

Why: ``tokenizers``' trainers (0.2x) break ties between equally frequent pairs in hash-map
order, which changes from one process to the next (huggingface/tokenizers#1794): the same
corpus and seed gave different vocabularies, so different models and different F1 in every
run. Here ties go to the lexicographically smallest pair and ids follow a fixed order
(special tokens, the sorted alphabet, then merges in the order learned), so one corpus gives
byte-identical tokenizer files in every process. Text is normalised and pre-tokenised by the
same ``tokenizers`` components the finished tokenizer uses.
"""

from __future__ import annotations

import heapq
from collections import Counter
from typing import Iterable

PREFIX = "##"


def count_words(texts: Iterable[str], normalizer, pre_tokenizer) -> Counter:
    """Word frequencies of ``texts`` after the tokenizer's normalisation and pre-tokenisation."""
    counts: Counter = Counter()
    for text in texts:
        if normalizer is not None:
            text = normalizer.normalize_str(text)
        counts.update(w for w, _ in pre_tokenizer.pre_tokenize_str(text))
    return counts


def learn_merges(words: Counter, vocab_size: int, specials: list[str]) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """``(vocab, merges)``: BPE with ``##`` continuation symbols until ``vocab_size`` tokens
    (special tokens included) or no pair is left; ties to the smallest pair."""
    items = sorted(words.items())
    seqs = [[w[0]] + [PREFIX + c for c in w[1:]] for w, _ in items]
    freqs = [f for _, f in items]
    vocab: dict[str, int] = {t: i for i, t in enumerate(specials)}
    for sym in sorted({s for seq in seqs for s in seq}, key=lambda s: (s.startswith(PREFIX), s)):
        vocab.setdefault(sym, len(vocab))

    pairs: Counter = Counter()
    where: dict[tuple[str, str], set[int]] = {}
    for i, seq in enumerate(seqs):
        for pair in zip(seq, seq[1:]):
            pairs[pair] += freqs[i]
            where.setdefault(pair, set()).add(i)
    heap = [(-c, p) for p, c in pairs.items()]
    heapq.heapify(heap)
    merges: list[tuple[str, str]] = []
    while len(vocab) < vocab_size and heap:
        neg, pair = heapq.heappop(heap)
        if pairs.get(pair, 0) != -neg or -neg <= 0:
            continue  # stale entry
        a, b = pair
        new = a + b[len(PREFIX):] if b.startswith(PREFIX) else a + b
        merges.append(pair)
        vocab.setdefault(new, len(vocab))
        touched: set[tuple[str, str]] = set()
        for i in sorted(where.pop(pair, ())):
            seq, f = seqs[i], freqs[i]
            for p in zip(seq, seq[1:]):
                pairs[p] -= f
                touched.add(p)
            out, j = [], 0
            while j < len(seq):
                if j + 1 < len(seq) and seq[j] == a and seq[j + 1] == b:
                    out.append(new)
                    j += 2
                else:
                    out.append(seq[j])
                    j += 1
            seqs[i] = out
            for p in zip(out, out[1:]):
                pairs[p] += f
                where.setdefault(p, set()).add(i)
                touched.add(p)
        pairs.pop(pair, None)
        for p in touched:
            c = pairs.get(p, 0)
            if c > 0:
                heapq.heappush(heap, (-c, p))
            else:
                pairs.pop(p, None)
    return vocab, merges


def train_model(texts: Iterable[str], vocab_size: int, specials: list[str], unk: str, algorithm: str, normalizer, pre_tokenizer):
    """A ``tokenizers`` WordPiece or BPE model learned deterministically on ``texts``."""
    from tokenizers import models

    vocab, merges = learn_merges(count_words(texts, normalizer, pre_tokenizer), vocab_size, specials)
    if algorithm == "wordpiece":
        return models.WordPiece(vocab, unk_token=unk)
    return models.BPE(vocab, merges, unk_token=unk, continuing_subword_prefix=PREFIX)
