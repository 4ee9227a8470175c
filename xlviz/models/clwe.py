"""Cross-lingual word embeddings (Artetxe et al. 2020's CLWE baseline, §3.1): skip-gram
embeddings per language, L2's mapped into L1's space with an orthogonal map as VecMap does.

Pieces, in the order the method uses them:

- :func:`train_skipgram`: gensim's skip-gram on one language's corpus given as lists of
  *subword tokens of that language's tokenizer* (the strings ``tokenizer.tokenize`` returns),
  so every vector belongs to a row of the BERT's token embedding matrix; ``vector_size`` is
  then the BERT's hidden size. Deterministic: one worker and a seed (gensim 4.4 draws the
  initial vectors from ``seed``; ``hashfxn``, which older gensim used to seed each vector from
  Python's per-process salted ``hash``, is given a salt-free hash all the same).
- :func:`normalize` (unit length, mean centring, unit length: VecMap's ``unit center unit``),
  :func:`procrustes` (the orthogonal W minimising ||X_D W - Z_D||, from one SVD),
  :func:`unsupervised_seed` (VecMap's initialisation from the intra-lingual similarity
  distributions), :func:`identical_seed` (pairs of identical strings), and
  :func:`self_learning` (alternate Procrustes and dictionary induction by CSLS nearest
  neighbours, with VecMap's stochastic dictionary induction), wrapped by :func:`map_embeddings`.
  Only VecMap's orthogonal mode is implemented: its unsupervised recipe also whitens and
  re-weights, which makes the final map non-orthogonal; the issue asks for an orthogonal map.
- :func:`embedding_rows`: the vectors as a ``[len(tokenizer), d]`` matrix in the tokenizer's
  id order, ready for ``BertForMaskedLM``'s ``word_embeddings``.

Measured (tests/test_clwe.py, bench/bench_clwe_world.py): the map recovers a known rotation
of a toy space from a gold seed, identical strings or no seed at all; the unsupervised seed
alone finds the rotation of 200 isotropic Gaussian vectors (d = 16) up to noise std 0.25
(relative to the vectors' 1) and fails from 0.3. On the generated world (~300 words a
language) a gold-seeded map with self-learning translates 0.6-0.7 of held-out words, but the
unsupervised seed stays at 0.00-0.17 and identical strings (only punctuation and letters are
shared) at 0.01-0.05: CLWE on the world needs a seed, e.g. names spelled the same.

Rows of the matrices passed to the mapping are expected in frequency order (gensim's
``index_to_key`` order; :func:`keyed_matrix` returns it), because the unsupervised seed and
the dictionary induction look at the most frequent words only, as VecMap does.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Sequence

import numpy as np

from xlviz.errors import XlvizError

if TYPE_CHECKING:
    import torch


# ---------------------------------------------------------------- skip-gram (gensim)

def stable_hash(text: str) -> int:
    """A hash that is the same in every process (Python's ``hash(str)`` is salted per process,
    which makes gensim's default vector initialisation differ from run to run)."""
    return zlib.crc32(text.encode("utf-8"))


def train_skipgram(
    sentences: Sequence[Sequence[str]],
    vector_size: int,
    *,
    window: int = 5,
    min_count: int = 1,
    negative: int = 10,
    epochs: int = 20,
    sample: float = 1e-4,
    seed: int = 0,
):
    """Skip-gram with negative sampling (gensim ``Word2Vec(sg=1)``) on token lists; returns its
    ``KeyedVectors`` (``.index_to_key`` in frequency order, ``.vectors``). One worker thread:
    gensim's multi-threaded training is not deterministic. 20 epochs, not gensim's 5: on the
    generated world's small corpora a gold-seeded map translated 0.10-0.18 of held-out words
    after 5 epochs and 0.44 / 0.39 after 20 (bench/bench_clwe_world.py, dim 64)."""
    from gensim.models import Word2Vec

    if not sentences or not any(len(s) for s in sentences):
        raise XlvizError("no tokens to train skip-gram embeddings on", field="sentences")
    model = Word2Vec(
        sentences=[list(s) for s in sentences], vector_size=vector_size, window=window, min_count=min_count,
        sg=1, hs=0, negative=negative, sample=sample, epochs=epochs, workers=1, seed=seed, hashfxn=stable_hash,
    )
    return model.wv


def tokenized_corpus(tokenizer, texts: Iterable[str]) -> list[list[str]]:
    """Each text as its list of subword strings in ``tokenizer``'s vocabulary (no specials)."""
    return [tokenizer.convert_ids_to_tokens(ids) for ids in tokenizer(list(texts), add_special_tokens=False)["input_ids"]]


def keyed_matrix(wv) -> tuple[list[str], np.ndarray]:
    """(words in frequency order, float64 matrix) of gensim KeyedVectors."""
    return list(wv.index_to_key), np.asarray(wv.vectors, dtype=np.float64)


# ---------------------------------------------------------------- VecMap, orthogonal mode

def normalize(m: np.ndarray, steps: Sequence[str] = ("unit", "center", "unit")) -> np.ndarray:
    """VecMap's normalisation: ``unit`` scales rows to length 1, ``center`` subtracts the mean
    row; the default ``unit center unit`` makes dot products cosines of centred vectors."""
    m = np.array(m, dtype=np.float64, copy=True)
    for step in steps:
        if step == "unit":
            norms = np.linalg.norm(m, axis=1, keepdims=True)
            norms[norms == 0] = 1.0
            m /= norms
        elif step == "center":
            m -= m.mean(axis=0, keepdims=True)
        else:
            raise XlvizError(f"unknown normalisation step {step!r}; use unit or center", field="normalize")
    return m


def procrustes(x: np.ndarray, z: np.ndarray) -> np.ndarray:
    """The orthogonal W minimising ||x W - z||_F (rows of x and z are dictionary pairs):
    W = U V^T for U S V^T = svd(x^T z)."""
    u, _, vt = np.linalg.svd(x.T @ z)
    return u @ vt


def topk_mean(sim: np.ndarray, k: int) -> np.ndarray:
    """Mean of each row's k largest entries (CSLS's neighbourhood density r)."""
    k = min(k, sim.shape[1])
    if k <= 0:
        return np.zeros(sim.shape[0])
    return np.partition(sim, sim.shape[1] - k, axis=1)[:, -k:].mean(axis=1)


def csls(sim: np.ndarray, k: int) -> np.ndarray:
    """CSLS scores 2 cos(x, z) - r_z(x) - r_x(z), up to a factor of 2 and a per-row constant
    that leave each row's argmax unchanged: sim - r_fwd / 2 - r_bwd / 2 (VecMap's form)."""
    if k <= 0:
        return sim
    return sim - topk_mean(sim, k)[:, None] / 2 - topk_mean(sim.T, k)[None, :] / 2


def _union(sim: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """VecMap's ``union`` direction: each source row's best target and each target's best source."""
    n_src, n_trg = sim.shape
    src = np.concatenate([np.arange(n_src), sim.argmax(axis=0)])
    trg = np.concatenate([sim.argmax(axis=1), np.arange(n_trg)])
    return src, trg


def unsupervised_seed(x: np.ndarray, z: np.ndarray, *, size: int = 4000, csls_k: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """VecMap's fully unsupervised initial dictionary (Artetxe et al. 2018, ACL): for the
    ``size`` most frequent words of each language, the rows of sqrt(M M^T) (= U S U^T for
    M = U S V^T) are sorted, so each word is described by its *distribution* of similarities
    to the other words, which an orthogonal map leaves unchanged; the sorted rows are
    normalised and matched across languages by CSLS nearest neighbours in both directions.
    ``x``, ``z`` must be normalised already."""
    n = min(size, x.shape[0], z.shape[0])

    def signature(m: np.ndarray) -> np.ndarray:
        u, s, _ = np.linalg.svd(m[:n], full_matrices=False)
        return normalize(np.sort((u * s) @ u.T, axis=1))

    return _union(csls(signature(x) @ signature(z).T, csls_k))


def identical_seed(src_words: Sequence[str], trg_words: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """The weakly supervised seed: every string that occurs in both vocabularies is assumed to
    be its own translation (numerals, names, shared subwords)."""
    trg_index = {w: i for i, w in enumerate(trg_words)}
    pairs = [(i, trg_index[w]) for i, w in enumerate(src_words) if w in trg_index]
    if not pairs:
        raise XlvizError("no identical strings in the two vocabularies: the identical-strings seed is empty", field="init")
    src, trg = zip(*pairs)
    return np.array(src), np.array(trg)


@dataclass
class MapResult:
    """The map W (x_mapped = x_normalised @ W), the normalised matrices, the final dictionary
    (src row -> trg row pairs), the objective per iteration (mean best similarity, both ways)."""

    w: np.ndarray
    x: np.ndarray
    z: np.ndarray
    src: np.ndarray
    trg: np.ndarray
    objective: list[float] = field(default_factory=list)
    keep_prob: list[float] = field(default_factory=list)  # stochastic induction's keep probability per iteration

    @property
    def x_mapped(self) -> np.ndarray:
        return self.x @ self.w


def self_learning(
    x: np.ndarray,
    z: np.ndarray,
    src: np.ndarray,
    trg: np.ndarray,
    *,
    csls_k: int = 10,
    vocab_cutoff: int = 20000,
    stochastic_initial: float = 0.1,
    stochastic_multiplier: float = 2.0,
    stochastic_interval: int = 50,
    threshold: float = 1e-6,
    max_iterations: int = 1000,
    seed: int = 0,
) -> MapResult:
    """VecMap's self-learning loop: fit W on the dictionary (Procrustes), induce a new
    dictionary from the ``vocab_cutoff`` most frequent words of each side by CSLS nearest
    neighbours in both directions (``union``), repeat until the objective stops improving.
    Stochastic dictionary induction keeps each similarity with probability ``keep_prob``
    (starting at ``stochastic_initial``, multiplied by ``stochastic_multiplier`` after
    ``stochastic_interval`` iterations without improvement; VecMap's unsupervised default is
    0.1, for every seed, and so it is here); with ``stochastic_initial=1`` the loop is deterministic. The last step refits W on
    the final dictionary. ``x``, ``z`` normalised; dictionary given as row index arrays."""
    rng = np.random.default_rng(seed)
    xs, zs = x[:vocab_cutoff], z[:vocab_cutoff]
    keep_prob = float(stochastic_initial)
    best, last_improvement, objectives, keeps = -np.inf, 0, [], []
    for it in range(1, max_iterations + 1):
        if it - last_improvement > stochastic_interval:
            if keep_prob >= 1.0:
                break
            keep_prob = min(1.0, stochastic_multiplier * keep_prob)
            last_improvement = it
        w = procrustes(x[src], z[trg])
        sim = (xs @ w) @ zs.T
        objective = float((sim.max(axis=1).mean() + sim.max(axis=0).mean()) / 2)
        objectives.append(objective)
        keeps.append(keep_prob)
        scores = csls(sim, csls_k)
        if keep_prob < 1.0:
            scores = np.where(rng.random(scores.shape) < keep_prob, scores, -np.inf)
        new_src, new_trg = _union(scores)
        if objective - best >= threshold:
            last_improvement, best = it, objective
        elif keep_prob >= 1.0 and np.array_equal(new_src, src) and np.array_equal(new_trg, trg):
            break  # converged: the dictionary reproduces itself
        src, trg = new_src, new_trg
    w = procrustes(x[src], z[trg])
    return MapResult(w=w, x=x, z=z, src=src, trg=trg, objective=objectives, keep_prob=keeps)


INITS = ("unsupervised", "identical", "dictionary")


def map_embeddings(
    x: np.ndarray,
    z: np.ndarray,
    *,
    init: str = "unsupervised",
    src_words: Sequence[str] | None = None,
    trg_words: Sequence[str] | None = None,
    seed_pairs: Sequence[tuple[int, int]] | None = None,
    unsupervised_size: int = 4000,
    csls_k: int = 10,
    self_learn: bool = True,
    **loop,
) -> MapResult:
    """Map source vectors ``x`` (L2, rows in frequency order) into the space of ``z`` (L1)
    with an orthogonal W: normalise both (unit, center, unit), seed a dictionary (``init``:
    ``unsupervised``, ``identical`` strings of ``src_words``/``trg_words``, or given
    ``dictionary`` ``seed_pairs``), then :func:`self_learning` (or one Procrustes fit with
    ``self_learn=False``). ``loop`` goes to :func:`self_learning`."""
    if init not in INITS:
        raise XlvizError(f"unknown CLWE initialisation {init!r}; choose from {list(INITS)}", field="init")
    if x.shape[1] != z.shape[1]:
        raise XlvizError(f"embedding sizes differ: {x.shape[1]} vs {z.shape[1]}", field="vector_size")
    xn, zn = normalize(x), normalize(z)
    if init == "unsupervised":
        src, trg = unsupervised_seed(xn, zn, size=unsupervised_size, csls_k=csls_k)
    elif init == "identical":
        if src_words is None or trg_words is None:
            raise XlvizError("the identical-strings seed needs src_words and trg_words", field="init")
        src, trg = identical_seed(src_words, trg_words)
    else:
        if not seed_pairs:
            raise XlvizError("the dictionary seed needs seed_pairs", field="seed_pairs")
        src, trg = (np.array(a) for a in zip(*seed_pairs))
    if not self_learn:
        return MapResult(w=procrustes(xn[src], zn[trg]), x=xn, z=zn, src=src, trg=trg)
    return self_learning(xn, zn, src, trg, csls_k=csls_k, **loop)


# ---------------------------------------------------------------- into a BERT

def embedding_rows(
    words: Sequence[str],
    vectors: np.ndarray,
    tokenizer,
    *,
    scale: float = 1.0,
    unseen_std: float | None = None,
    seed: int = 0,
) -> "torch.Tensor":
    """A ``[len(tokenizer), d]`` float32 matrix in the tokenizer's id order: a token's row is
    ``scale * vectors[i]`` for ``words[i] == token``; the special tokens and tokens the
    skip-gram never saw get N(0, ``unseen_std``^2) rows, seeded (default std: that of the
    known scaled entries). One ``scale`` for L1 and the mapped L2 keeps the orthogonal map's
    geometry; normalised vectors have entries of std ~1/sqrt(d), so ``scale = 0.02 * sqrt(d)``
    gives BERT's initialisation std. :func:`coverage` says how many rows are known."""
    import torch

    vectors = np.asarray(vectors, dtype=np.float64) * float(scale)
    if vectors.ndim != 2 or len(words) != vectors.shape[0]:
        raise XlvizError(f"{len(words)} words but vectors of shape {vectors.shape}", field="vectors")
    index = {w: i for i, w in enumerate(words)}
    specials = set(tokenizer.all_special_ids)
    std = float(vectors.std()) if unseen_std is None else float(unseen_std)
    out = np.random.default_rng(seed).normal(0.0, std, size=(len(tokenizer), vectors.shape[1]))
    for token, tid in tokenizer.get_vocab().items():
        if tid not in specials and token in index:
            out[tid] = vectors[index[token]]
    return torch.tensor(out, dtype=torch.float32)


def coverage(words: Sequence[str], tokenizer) -> float:
    """Share of the tokenizer's non-special tokens that have a skip-gram vector."""
    known = set(words)
    specials = set(tokenizer.all_special_ids)
    tokens = [t for t, i in tokenizer.get_vocab().items() if i not in specials]
    return sum(t in known for t in tokens) / max(1, len(tokens))


@dataclass
class CLWEResult:
    """L1's and the mapped L2's embedding matrices in each tokenizer's id order, ready for
    ``word_embeddings``, with the map and how much of each vocabulary skip-gram covered."""

    l1_rows: "torch.Tensor"
    l2_rows: "torch.Tensor"
    mapping: MapResult
    coverage: dict[str, float]


def clwe_matrices(
    tokenizers: dict[str, object],
    corpora: dict[str, Sequence[str]],
    l1: str,
    l2: str,
    vector_size: int,
    *,
    init: str = "unsupervised",
    scale: float | None = None,
    seed: int = 0,
    skipgram: dict | None = None,
    mapping: dict | None = None,
) -> CLWEResult:
    """The CLWE front end in one call: tokenise each corpus with its own tokenizer, train
    skip-gram per language, map L2 into L1's space (``init`` as in :func:`map_embeddings`;
    ``identical`` pairs the subword strings the two vocabularies share), and lay both out as
    embedding rows with one ``scale`` (default ``0.02 * sqrt(vector_size)``: BERT's init std);
    the L2 special tokens get L1's rows (the body they are plugged into was trained with those).
    ``skipgram`` / ``mapping`` pass options to :func:`train_skipgram` / :func:`map_embeddings`."""
    words, mats = {}, {}
    for k, lang in enumerate((l1, l2)):
        wv = train_skipgram(tokenized_corpus(tokenizers[lang], corpora[lang]), vector_size, seed=seed + k, **(skipgram or {}))
        words[lang], mats[lang] = keyed_matrix(wv)
    result = map_embeddings(mats[l2], mats[l1], init=init, src_words=words[l2], trg_words=words[l1], **(mapping or {}))
    factor = 0.02 * vector_size ** 0.5 if scale is None else scale
    l1_rows = embedding_rows(words[l1], result.z, tokenizers[l1], scale=factor, seed=seed)
    l2_rows = embedding_rows(words[l2], result.x_mapped, tokenizers[l2], scale=factor, seed=seed + 1)
    # The L2 rows are plugged into the body trained on L1's: its [CLS], [SEP], [PAD], [MASK] rows go with them.
    for token in tokenizers[l2].all_special_tokens:
        l2_rows[tokenizers[l2].convert_tokens_to_ids(token)] = l1_rows[tokenizers[l1].convert_tokens_to_ids(token)]
    return CLWEResult(
        l1_rows=l1_rows,
        l2_rows=l2_rows,
        mapping=result,
        coverage={lang: coverage(words[lang], tokenizers[lang]) for lang in (l1, l2)},
    )
