"""WECHSEL (Minixhofer, Paischer & Rekabsaz, NAACL 2022): initialise a new language's subword
embeddings from the source model's, through an aligned static space.

1. Static subword vectors per language (the paper: fastText; here the skip-gram vectors the
   CLWE baseline trains on each language's subword tokens, :func:`xlviz.models.clwe.train_skipgram`),
   the two spaces aligned with orthogonal Procrustes on a bilingual dictionary (the paper uses
   MUSE dictionaries and no self-learning; here :func:`xlviz.models.clwe.map_embeddings` with
   ``self_learn=False``, after VecMap's unit-center-unit normalisation).
2. For each target subword x, the cosine similarities s(x, y) to every source subword y in
   the aligned space; its ``k`` nearest source subwords J_x (the paper's k = 10); weights
   softmax over J_x of s(x, y) / tau (the paper's tau = 0.1).
3. The target embedding is the weighted mean of those source subwords' rows of the *model's*
   embedding matrix: e_x = sum_{y in J_x} w_xy E_s[y]. Subwords without a static vector keep
   another initialisation (the paper: random; here step 2's), special tokens take the
   source's rows.

Steps 1-2 do not depend on the model, so they are computed once (:func:`aligned_spaces`,
:func:`neighbour_table`) and step 3 (:func:`wechsel_rows`) is applied to whichever source
model needs it (MONOTRANS's step 1, or active forgetting's).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from xlviz.errors import XlvizError
from xlviz.models.clwe import keyed_matrix, map_embeddings, tokenized_corpus, train_skipgram

NEIGHBOURS, TEMPERATURE = 10, 0.1  # the paper's k and tau


@dataclass
class AlignedSpaces:
    """Both languages' static vectors in the aligned space, one row per token id of each
    tokenizer (zero rows where ``known`` is False: special tokens, tokens the corpus lacks),
    and how many dictionary pairs the alignment used."""

    l1: np.ndarray
    l2: np.ndarray
    l1_known: np.ndarray
    l2_known: np.ndarray
    pairs: int


def _by_id(words: Sequence[str], vectors: np.ndarray, tokenizer) -> tuple[np.ndarray, np.ndarray]:
    """(matrix in ``tokenizer``'s id order, known mask): the special tokens are never known."""
    index = {w: i for i, w in enumerate(words)}
    specials = set(tokenizer.all_special_ids)
    out = np.zeros((len(tokenizer), vectors.shape[1]))
    known = np.zeros(len(tokenizer), dtype=bool)
    for token, tid in tokenizer.get_vocab().items():
        if tid not in specials and token in index:
            out[tid], known[tid] = vectors[index[token]], True
    return out, known


def aligned_spaces(
    tokenizers: dict, corpora: dict, l1: str, l2: str, dim: int, *, dictionary: Sequence[tuple[str, str]] | None,
    seed: int = 0, skipgram: dict | None = None,
) -> AlignedSpaces:
    """Skip-gram vectors of each language's subwords (the seeds the CLWE baseline uses, so the
    same vectors), L2's mapped onto L1's by one Procrustes fit on ``dictionary`` ((L1 word, L2
    word) pairs; those that are one token with a vector on both sides are used) or, with
    ``dictionary=None``, on the strings both vocabularies share."""
    words, mats = {}, {}
    for k, lang in enumerate((l1, l2)):
        wv = train_skipgram(tokenized_corpus(tokenizers[lang], corpora[lang]), dim, seed=seed + k, **(skipgram or {}))
        words[lang], mats[lang] = keyed_matrix(wv)
    if dictionary is None:
        result = map_embeddings(mats[l2], mats[l1], init="identical", src_words=words[l2], trg_words=words[l1], self_learn=False)
    else:
        row1 = {w: i for i, w in enumerate(words[l1])}
        row2 = {w: i for i, w in enumerate(words[l2])}
        seed_pairs = sorted({(row2[b], row1[a]) for a, b in dictionary if a in row1 and b in row2})
        if not seed_pairs:
            raise XlvizError("no dictionary pair is a single subword with a skip-gram vector in both languages", field="wechsel_dictionary")
        result = map_embeddings(mats[l2], mats[l1], init="dictionary", seed_pairs=seed_pairs, self_learn=False)
    m1, k1 = _by_id(words[l1], result.z, tokenizers[l1])
    m2, k2 = _by_id(words[l2], result.x_mapped, tokenizers[l2])
    return AlignedSpaces(m1, m2, k1, k2, pairs=int(len(result.src)))


def neighbour_table(
    l2: np.ndarray, l1: np.ndarray, *, l2_known: np.ndarray | None = None, l1_known: np.ndarray | None = None,
    k: int = NEIGHBOURS, temperature: float = TEMPERATURE,
) -> tuple[torch.Tensor, torch.Tensor]:
    """For each L2 row: the ids of its ``k`` most cosine-similar known L1 rows (best first) and
    their weights softmax(s / ``temperature``); rows of unknown L2 tokens get ids -1 and
    weights 0. Returns (int64 ``[n2, k]``, float32 ``[n2, k]``)."""
    l1_known = np.ones(len(l1), dtype=bool) if l1_known is None else np.asarray(l1_known, dtype=bool)
    l2_known = np.ones(len(l2), dtype=bool) if l2_known is None else np.asarray(l2_known, dtype=bool)
    candidates = np.flatnonzero(l1_known)
    if not len(candidates):
        raise XlvizError("no L1 subword has a static vector", field="wechsel")
    k = min(int(k), len(candidates))
    unit = lambda m: m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)  # noqa: E731
    sim = unit(np.asarray(l2, dtype=np.float64)) @ unit(np.asarray(l1, dtype=np.float64)[candidates]).T
    order = np.argsort(-sim, axis=1, kind="stable")[:, :k]
    best = np.take_along_axis(sim, order, axis=1)
    z = best / float(temperature)
    w = np.exp(z - z.max(axis=1, keepdims=True))
    w /= w.sum(axis=1, keepdims=True)
    ids = candidates[order]
    ids[~l2_known], w[~l2_known] = -1, 0.0
    return torch.tensor(ids, dtype=torch.int64), torch.tensor(w, dtype=torch.float32)


def wechsel_rows(l1_embeddings: torch.Tensor, neighbours: torch.Tensor, weights: torch.Tensor, base: torch.Tensor) -> torch.Tensor:
    """``base`` (the L2 matrix another initialisation gives) with each known row (neighbour ids
    >= 0) replaced by sum_j weights[x, j] * ``l1_embeddings``[neighbours[x, j]]."""
    if neighbours.shape[0] != base.shape[0] or base.shape[1] != l1_embeddings.shape[1]:
        raise XlvizError(f"a table of {neighbours.shape[0]} rows for {base.shape[0]} embeddings of size {base.shape[1]} "
                         f"(source size {l1_embeddings.shape[1]})", field="wechsel")
    out = base.detach().clone()
    known = neighbours[:, 0] >= 0
    src = l1_embeddings.detach().to(torch.float32)
    mixed = (weights[known].unsqueeze(-1) * src[neighbours[known]]).sum(1)
    out[known] = mixed.to(out.dtype)
    return out


def precision_at_1(neighbours: torch.Tensor, gold: dict[int, int]) -> float | None:
    """Share of gold pairs ({L2 id: L1 id}) whose nearest L1 neighbour is the translation."""
    pairs = [(a, b) for a, b in gold.items() if int(neighbours[a, 0]) >= 0]
    return None if not pairs else sum(int(neighbours[a, 0]) == b for a, b in pairs) / len(pairs)


__all__ = ["AlignedSpaces", "aligned_spaces", "neighbour_table", "wechsel_rows", "precision_at_1", "NEIGHBOURS", "TEMPERATURE"]
