"""Cached loaders, chunked computations and figures for the Alignment and Probing pages.

Why chunks: each piece of work (64 sentences encoded, 64 minimal pairs scored) is one
``st.cache_data`` entry keyed by the model's files, the data and the settings, so a progress
bar advances between chunks, a second look is instant and raising the number of pairs only
computes the new ones. The numbers come from ``xlviz.analysis`` (the same functions as
``xlviz analyse``); nothing here computes a metric itself.

Also: the runs these pages can analyse, and presets from the URL (``?run=NAME&l2=sov``, the
"analyse this run" link of the Runs page).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import streamlit as st

from xlviz.analysis.encodings import CHUNK
from xlviz.analysis.reports import ParallelData, RunInfo
from xlviz.errors import XlvizError
from xlviz.models.reference import ModelSpec
from xlviz.ui.common import ARRAY_HASH, cached_digest, few_threads, file_stamp, load_cached


# --------------------------------------------------------------------------- runs and presets
def analysable_runs() -> list[RunInfo]:
    """Runs with a pre-trained L1 model, at least one L2 and parallel pairs (a generated world, or a
    corpus run's ``world/parallel/<l1>-<l2>.jsonl``), newest first."""
    from xlviz.analysis.reports import run_info
    from xlviz.runs import list_runs

    out = []
    for run in list_runs():
        try:
            info = run_info(run.path)
        except (XlvizError, OSError):
            continue
        if info.l2s and any(info.has_parallel(l2) for l2 in info.l2s):
            out.append(info)
    return out


def query_preset(page: str, runs: list[RunInfo]) -> tuple[RunInfo | None, str | None, str | None]:
    """``(run, l2, message)`` from ``?run=NAME&l2=L2`` the first time this page sees that query.

    Returns ``(None, None, None)`` when there is no (new) query; a message when the run named in
    the link cannot be analysed (not found, or still without models).
    """
    qp = st.query_params
    name = qp.get("run")
    if not name:
        return None, None, None
    l2 = qp.get("l2") or None
    sig = f"{name}|{l2}"
    marker = f"_xlviz_preset_{page}"
    if st.session_state.get(marker) == sig:
        return None, None, None
    st.session_state[marker] = sig
    info = next((r for r in runs if r.name == name), None)
    if info is None:
        return None, None, f"The run “{name}” from the link was not found or has no trained models to analyse yet."
    if l2 is not None and l2 not in info.l2s:
        return info, None, f"The run “{name}” has no language “{l2}”; it has {', '.join(info.l2s)}."
    return info, l2, None


def sync_query(page: str, run: str | None, l2: str | None) -> None:
    """Keep the URL on the current run/L2 (shareable) without re-applying it as a preset."""
    if not run:
        return
    if st.query_params.get("run") != run:
        st.query_params["run"] = run
    if l2 and st.query_params.get("l2") != l2:
        st.query_params["l2"] = l2
    elif not l2 and "l2" in st.query_params:
        del st.query_params["l2"]
    st.session_state[f"_xlviz_preset_{page}"] = f"{run}|{l2}"


# --------------------------------------------------------------------------- models
def _load(path: str, tokenizer: str | None, floor: tuple, task: str, stamp: str):
    """The app's one model cache (:func:`xlviz.ui.common.load_cached`), with the library's
    default attention (what a run's stored encodings were computed with)."""
    return load_cached(path, tokenizer, floor, task, stamp, eager=False)


def _floor(spec: ModelSpec) -> tuple:
    """The spec's floor fields (seed, init, init std): all of them rebuild the run's floor."""
    return spec.floor_seed, spec.floor_init, spec.floor_init_std


def load(spec: ModelSpec, task: str = "base"):
    """``(model, tokenizer)`` of a spec, cached per process (reloaded when its files change)."""
    what = "the floor (untrained L2 embeddings)" if spec.floor_seed is not None else Path(spec.path).name or spec.path
    path, tokenizer, floor, stamp = _args(spec)
    with st.spinner(f"Loading {what} …"):
        return _load(path, tokenizer, floor, task, stamp)


_CANONICAL: dict[tuple, tuple] = {}  # content -> the first spec's cache arguments with that content


def _args(spec: ModelSpec) -> tuple:
    """The cache arguments of a spec: ``(path, tokenizer, floor, stamp)``. Byte-identical model
    folders (a run exports the same English encoder once per system) map to the first one seen,
    so the model loads once and each sentence is encoded once for all of them."""
    args = (spec.path, spec.tokenizer, _floor(spec), spec.stamp())
    model = cached_digest(spec.path, args[3])
    tok = cached_digest(spec.tokenizer, args[3]) if spec.tokenizer else ""
    if model is None or tok is None:
        return args
    content = (model, tok, args[2])
    first = _CANONICAL.get(content)
    if first is not None and first != args:
        path, tokenizer, floor, stamp = first
        if ModelSpec(path, tokenizer, *floor).stamp() == stamp:  # still there, unchanged
            return first
    _CANONICAL[content] = args
    return args


# --------------------------------------------------------------------------- data
def _world_stamp(run_path: str | None) -> str:
    from xlviz.runs import world_path

    try:
        return str(world_path(run_path, "world").stat().st_mtime_ns) if run_path else ""
    except OSError:
        return ""


@st.cache_data(show_spinner=False, max_entries=32)
def _parallel(source: str, run_path: str | None, l2: str | None, lang_a: str, lang_b: str | None, limit: int | None,
              stamp: str) -> ParallelData:
    from xlviz.analysis.reports import parallel_data

    return parallel_data(source, run_dir=run_path, l2=l2, lang_a=lang_a, lang_b=lang_b, limit=limit)


def parallel(source: str, run_path: str | None = None, l2: str | None = None, lang_a: str = "en",
             lang_b: str | None = None, limit: int | None = None) -> ParallelData:
    return _parallel(source, run_path, l2, lang_a, lang_b, limit, _world_stamp(run_path))


def parallel_sources() -> list:
    """The parallel-text sources readable here (:mod:`xlviz.data.parallel`), in order: a
    shared-data source when it lists languages, read through :func:`source_languages`'s cache
    (the pages ask on every render, and then draw the picked source's pickers from the same list)."""
    from xlviz.data.parallel import sources
    from xlviz.errors import XlvizError

    def readable(name: str) -> bool:
        try:
            return bool(source_languages(name))
        except (XlvizError, OSError):
            return False

    return [s for s in sources().values() if s.takes is not None or readable(s.name)]


def run_pairs_label() -> str:
    """The label of the source that reads a run's own pairs (the pages' link target)."""
    from xlviz.data.parallel import sources

    return next(s.label for s in sources().values() if s.takes == "run")


@st.cache_data(show_spinner=False, max_entries=32)
def _world_pairs(path: str, stamp: str) -> list:
    from xlviz.views.attention import read_world_pairs

    return read_world_pairs(path)


def world_pairs(path: str | Path) -> list:
    """A run's parallel file as :class:`~xlviz.views.attention.Pair` rows
    (:func:`~xlviz.views.attention.read_world_pairs`), kept while the file is unchanged:
    parsing it took a fifth of an Attention visit."""
    return _world_pairs(str(path), file_stamp(path))


@st.cache_data(show_spinner=False, ttl=60)
def source_languages(name: str) -> list[str]:
    """A shared-data source's languages for sentence A (read from its folder once a minute)."""
    from xlviz.data.parallel import source_of

    return source_of(name).languages(None)


@st.cache_data(show_spinner=False, ttl=60)
def source_partners(name: str, lang_a: str) -> list[str]:
    from xlviz.data.parallel import source_of

    return source_of(name).partners(lang_a, None)


@st.cache_data(show_spinner=False, max_entries=8)
def parallel_uploaded(text_a: str, text_b: str, lang_a: str, lang_b: str, limit: int | None) -> ParallelData:
    from xlviz.analysis.reports import parallel_from_texts

    return parallel_from_texts(text_a, text_b, lang_a, lang_b, limit)


# --------------------------------------------------------------------------- alignment
@st.cache_data(show_spinner=False, max_entries=1024)
def _embed(path, tokenizer, floor, stamp, texts: tuple, pooling: str, max_length: int) -> np.ndarray:
    from xlviz.analysis.encodings import encode_chunk

    model, tok = _load(path, tokenizer, floor, "base", stamp)
    with few_threads(model):
        return encode_chunk(model, tok, texts, None, pooling, max_length)[0]


@st.cache_data(show_spinner=False, max_entries=1024)
def _words(path, tokenizer, floor, stamp, words: tuple, max_length: int) -> np.ndarray:
    from xlviz.analysis.reports import word_vectors

    model, tok = _load(path, tokenizer, floor, "base", stamp)
    with few_threads(model):
        return word_vectors(model, tok, [list(w) for w in words], max_length)[0]


@st.cache_data(show_spinner=False, max_entries=1024)
def _embed_both(path, tokenizer, floor, stamp, texts: tuple, words: tuple, pooling: str, max_length: int):
    from xlviz.analysis.encodings import encode_chunk

    model, tok = _load(path, tokenizer, floor, "base", stamp)
    with few_threads(model):
        return encode_chunk(model, tok, texts, words, pooling, max_length)


class Progress:
    """A ``st.progress`` bar over a known number of chunks; ``step(text)`` after each."""

    def __init__(self, total: int, text: str = "Working …"):
        self.total, self.done = max(total, 1), 0
        self.bar = st.progress(0.0, text=text)

    def step(self, text: str, n: int = 1) -> None:
        """``n`` chunks done (one update of the bar: work read from a cache takes no time to show)."""
        self.done += n
        self.bar.progress(min(self.done / self.total, 1.0), text=f"{text} ({min(self.done, self.total)}/{self.total})")

    def close(self) -> None:
        self.bar.empty()


def n_chunks(n: int) -> int:
    return (n + CHUNK - 1) // CHUNK


def sentence_vectors(spec: ModelSpec, texts: list[str], pooling: str, max_length: int, progress: Progress | None = None,
                     text: str = "Encoding") -> np.ndarray:
    """[layers + 1, n, d] sentence vectors, computed (and cached) 64 sentences at a time."""
    load(spec)  # spinner and errors once, outside the cached chunks
    parts = []
    for lo in range(0, len(texts), CHUNK):
        parts.append(_embed(*_args(spec), tuple(texts[lo : lo + CHUNK]), pooling, int(max_length)))
        if progress:
            progress.step(text)
    return np.concatenate(parts, axis=1)


# --------------------------------------------------------------------------- stored encodings
@st.cache_data(show_spinner=False, max_entries=32)
def _stored(run_path: str, manifest_stamp: str) -> dict[str, str]:
    from xlviz.analysis.encodings import stored

    try:
        return {k: str(v) for k, v in stored(run_path).items()}
    except (XlvizError, OSError):  # an unreadable manifest: nothing stored, the page computes
        return {}


@st.cache_resource(show_spinner=False, max_entries=64)
def _read_stored(path: str, stamp: str, meta: tuple) -> tuple[np.ndarray, np.ndarray | None]:
    """The file's arrays, shared by every session (no copy per render: a run's files are tens of
    MB), so read-only: a page that wrote into them would change them for everyone."""
    from xlviz.analysis.encodings import read

    arrays = read(path, dict(meta))
    for a in arrays:
        while isinstance(a, np.ndarray):  # and the buffers they view (loaded here, held by no one else)
            a.setflags(write=False)
            a = a.base
    return arrays


def stored_vectors(run_path: str | None, spec: ModelSpec, texts: list[str], words: list[list[str]] | None, pooling: str,
                   max_length: int) -> tuple[np.ndarray, np.ndarray | None] | None:
    """A run's stored encodings (:mod:`xlviz.analysis.encodings`) of ``texts`` (and ``words``)
    by ``spec`` with these settings, or None when the run holds none that are valid: another
    model (changed since), other pairs or settings, or an unreadable file. Loads no model."""
    from xlviz.analysis import encodings as enc

    if not run_path:
        return None
    stamp = spec.stamp()
    model_fp = enc.spec_fingerprint(spec, digest=lambda folder: cached_digest(folder, stamp))
    if model_fp is None:
        return None
    meta = enc.request(model_fp, texts, words, pooling, int(max_length))
    path = _stored(str(run_path), file_stamp(Path(run_path) / "manifest.json")).get(enc.key_of(meta))
    if path is None:
        return None
    try:
        return _read_stored(path, file_stamp(path), tuple(sorted(meta.items())))
    except XlvizError:
        return None


def side_vectors(run_path: str | None, spec: ModelSpec, texts: list[str], words: list[list[str]] | None, pooling: str,
                 max_length: int, progress: Progress | None = None, text: str = "Encoding") -> tuple[np.ndarray, np.ndarray | None]:
    """Sentence vectors of ``texts`` and, with ``words``, their word vectors: read from the run's
    stored encodings where valid, else computed here (:func:`sentence_vectors`,
    :func:`sentence_and_word_vectors`; nothing is written). Steps ``progress`` as computing would."""
    got = stored_vectors(run_path, spec, texts, words, pooling, max_length)
    if got is not None:
        if progress:
            progress.step(f"{text} (stored)", n_chunks(len(texts)) * (1 if words is None else 2))
        return got
    if words is None:
        return sentence_vectors(spec, texts, pooling, max_length, progress, text), None
    return sentence_and_word_vectors(spec, texts, words, pooling, max_length, progress, text)


def coinciding(vectors: dict[str, dict[str, np.ndarray]]) -> list[list[str]]:
    """Groups of systems whose vectors are identical in both languages: one encoder under two
    names (e.g. ``ppa`` and ``ppa-codeswitch``, which differ only in fine-tuning). Their lines lie
    exactly on each other, so the chart shows the colour of the last one drawn and the reader needs
    telling where the others went."""
    groups: list[list[str]] = []
    for name, vec in vectors.items():
        for g in groups:
            first = vectors[g[0]]
            if all(k in first and first[k].shape == vec[k].shape and np.array_equal(first[k], vec[k]) for k in ("a", "b")):
                g.append(name)
                break
        else:
            groups.append([name])
    return [g for g in groups if len(g) > 1]


def word_vectors(spec: ModelSpec, words: list[list[str]], max_length: int, progress: Progress | None = None,
                 text: str = "Word vectors") -> np.ndarray:
    """[layers + 1, N words, d] contextual word vectors of pre-split sentences, flattened in order."""
    load(spec)
    parts = []
    for lo in range(0, len(words), CHUNK):
        parts.append(_words(*_args(spec), tuple(tuple(w) for w in words[lo : lo + CHUNK]), int(max_length)))
        if progress:
            progress.step(text)
    return np.concatenate(parts, axis=1)


def sentence_and_word_vectors(spec: ModelSpec, texts: list[str], words: list[list[str]], pooling: str, max_length: int,
                              progress: Progress | None = None, text: str = "Encoding") -> tuple[np.ndarray, np.ndarray]:
    """:func:`sentence_vectors` and :func:`word_vectors` of the same sentences (``words``: each
    one pre-split), one forward pass for both, 64 sentences at a time (two progress steps each)."""
    load(spec)
    sent, word = [], []
    for lo in range(0, len(texts), CHUNK):
        s, w = _embed_both(*_args(spec), tuple(texts[lo : lo + CHUNK]), tuple(tuple(x) for x in words[lo : lo + CHUNK]),
                           pooling, int(max_length))
        sent.append(s)
        word.append(w)
        if progress:
            progress.step(text)
            progress.step(text)
    return np.concatenate(sent, axis=1), np.concatenate(word, axis=1)


@st.cache_data(show_spinner=False, max_entries=128, hash_funcs=ARRAY_HASH)
def alignment_table(emb_a: np.ndarray, emb_b: np.ndarray, center: bool, train_fraction: float | None, seed: int = 0) -> list[dict]:
    from xlviz.analysis.reports import alignment_rows

    return alignment_rows(emb_a, emb_b, center=center, train_fraction=train_fraction, seed=seed)


def word_table(wa: np.ndarray, wb: np.ndarray, words_a: tuple, words_b: tuple, gold: tuple, center: bool) -> list[dict]:
    """Word translation accuracy per layer (:func:`~xlviz.analysis.reports.word_translation_rows`),
    cached. The words and the dictionary enter the cache key as one digest: Streamlit hashes a
    tuple element by element, and these hold thousands of words (0.3-0.8 s a render)."""
    import hashlib
    import json

    key = hashlib.sha1(json.dumps([words_a, words_b, gold], ensure_ascii=False).encode("utf-8")).hexdigest()
    return _word_table(wa, wb, key, center, words_a, words_b, gold)


@st.cache_data(show_spinner=False, max_entries=64, hash_funcs=ARRAY_HASH)
def _word_table(wa: np.ndarray, wb: np.ndarray, key: str, center: bool, _words_a: tuple, _words_b: tuple,
                _gold: tuple) -> list[dict]:
    from xlviz.analysis.reports import word_translation_rows

    return word_translation_rows(wa, wb, list(_words_a), list(_words_b), list(_gold), center=center)


@st.cache_data(show_spinner=False, max_entries=32, hash_funcs=ARRAY_HASH)
def projection(points_a: np.ndarray, points_b: np.ndarray, labels_a: tuple, labels_b: tuple, lang_a: str, lang_b: str,
               pairs: tuple | None, method: str, seed: int = 0) -> list[dict]:
    from xlviz.analysis.reports import translation_projection

    return translation_projection(points_a, points_b, list(labels_a), list(labels_b), lang_a, lang_b,
                                  list(pairs) if pairs is not None else None, method=method, seed=seed)


# --------------------------------------------------------------------------- probing
@st.cache_data(show_spinner=False, max_entries=16)
def agreement_pairs(data: str, run_path: str | None, max_per_category: int | None, stamp: str) -> tuple[str, list[dict]]:
    from xlviz.analysis.reports import agreement_data

    return agreement_data(data, run_dir=run_path, max_per_category=max_per_category)


def data_stamp(data: str, run_path: str | None) -> str:
    if data.startswith("world:"):
        return _world_stamp(run_path)
    from xlviz.data.real import shared_data_dir

    root = shared_data_dir()
    f = root / "syneval" / "marvin_linzen.tsv.gz" if root else None
    try:
        return f"{f}|{f.stat().st_mtime_ns}" if f else ""
    except OSError:
        return ""


@st.cache_data(show_spinner=False, max_entries=4096)
def _agreement_chunk(path, tokenizer, floor, stamp, data: str, run_path, max_per_category, dstamp: str,
                     lo: int, hi: int, unit: str) -> list[dict]:
    from xlviz.analysis.agreement_store import score_chunk

    model, tok = _load(path, tokenizer, floor, "mlm", stamp)
    _, pairs = agreement_pairs(data, run_path, max_per_category, dstamp)
    return score_chunk(model, tok, pairs[lo:hi], unit)


@st.cache_data(show_spinner=False, max_entries=32)
def _data_inputs(data: str, run_path: str, max_per_category: int | None, dstamp: str) -> dict[str, str]:
    from xlviz.analysis.agreement_store import data_inputs

    _, pairs = agreement_pairs(data, run_path, max_per_category, dstamp)
    return data_inputs(run_path, data, max_per_category, pairs)


@st.cache_data(show_spinner=False, max_entries=256)
def _stored_agreement(run_path: str, request: str, manifest: str) -> dict | None:
    """The run's stored result of the request (a JSON text), looked up again when its manifest changes."""
    import json

    from xlviz.analysis.agreement_store import find

    got = find(run_path, json.loads(request))
    return None if got is None else got[0]


def stored_agreement(spec: ModelSpec, data: str, run_path: str | None, max_per_category: int | None, unit: str) -> dict | None:
    """The result ``xlviz analyse agreement RUN`` stored in the run for this row
    (:mod:`xlviz.analysis.agreement_store`) when its request is exactly what would be computed
    now (same model files, world, pairs and settings), else None. Loads no model."""
    import json

    from xlviz.analysis.agreement_store import request
    from xlviz.analysis.encodings import spec_fingerprint

    if not run_path or not data.startswith("world:"):
        return None  # Marvin & Linzen: computed only
    stamp = spec.stamp()
    try:
        model = spec_fingerprint(spec, digest=lambda folder: cached_digest(folder, stamp))
        if model is None:
            return None
        inputs = _data_inputs(data, run_path, max_per_category, data_stamp(data, run_path))
        req = request(model, data, inputs, max_per_category, unit)
        return _stored_agreement(run_path, json.dumps(req, sort_keys=True), file_stamp(Path(run_path) / "manifest.json"))
    except (XlvizError, OSError):  # an unreadable world or manifest: computed, as without a stored result
        return None


@st.cache_resource(show_spinner=False)
def _finished() -> dict:
    """Whole results of the chunked computations below, by every input of their chunks (the
    model's files through :meth:`ModelSpec.stamp`, the data file's state, the settings), stored
    as a deep copy of what was computed and handed out shared (:func:`_finished_get`). Why: a page probing
    thirteen models looked up ~170 cached chunks a render, and Streamlit's hashing of each
    call's arguments took 1.2 s of the Probing page's warm 2.5 s. Copies, not pickles: the
    project never unpickles."""
    return {}


_FINISHED_MAX = 512


def _finished_get(key: tuple):
    """The stored result: its own top-level dict (the caller pops ``_chunks``), the rest shared by
    every session, so read-only (the Probing page filters and tabulates it; it never writes into
    it). A deep copy per lookup took a quarter of a Probing visit (13 rows, thousands of pairs)."""
    got = _finished().get(key)
    return None if got is None else dict(got)


def _finished_put(key: tuple, value) -> None:
    import copy

    done = _finished()
    if len(done) >= _FINISHED_MAX:
        done.clear()
    value = copy.deepcopy(value)
    if isinstance(value.get("items"), list):  # shared from now on (:func:`_finished_get`): not to be emptied
        value["items"] = tuple(value["items"])
    done[key] = value


def _finished_result(key: tuple) -> dict:
    """What was just put under ``key``, as every later lookup returns it."""
    got = _finished_get(key)
    got.pop("_chunks")
    return got


def agreement(spec: ModelSpec, data: str, run_path: str | None, max_per_category: int | None, unit: str,
              progress: Progress | None = None, text: str = "Scoring") -> dict:
    """``agreement_accuracy``'s result (summary, by_category, items): the one stored in the run
    when it matches exactly (:func:`stored_agreement`: no model loaded), else computed chunk by
    chunk; once had, the whole result again until the model's files or the data change."""
    from xlviz.analysis.agreement_store import result_of

    dstamp = data_stamp(data, run_path)
    key = ("agreement", spec.path, spec.tokenizer, _floor(spec), spec.stamp(), data, run_path, max_per_category, dstamp, unit)
    found = _finished_get(key)
    if found is not None:
        chunks = found.pop("_chunks")
        if progress and chunks:
            progress.step(text, chunks)
        return found
    stored = stored_agreement(spec, data, run_path, max_per_category, unit)
    if stored is not None:
        chunks = n_chunks(len(stored["items"]))
        if progress and chunks:
            progress.step(f"{text} (stored)", chunks)
        _finished_put(key, {**stored, "_chunks": chunks})
        return _finished_result(key)
    load(spec, "mlm")
    _, pairs = agreement_pairs(data, run_path, max_per_category, dstamp)
    items: list[dict] = []
    for lo in range(0, len(pairs), CHUNK):
        items += _agreement_chunk(*_args(spec), data, run_path, max_per_category, dstamp, lo, lo + CHUNK, unit)
        if progress:
            progress.step(text)
    result = result_of(items, unit)
    _finished_put(key, {**result, "_chunks": n_chunks(len(pairs))})
    return _finished_result(key)


@st.cache_data(show_spinner=False, max_entries=64)
def _sense_vectors(path, tokenizer, floor, stamp, run_path: str, lang: str, n: int | None, wstamp: str):
    from xlviz.analysis.probing import sense_pair_vectors
    from xlviz.analysis.reports import sense_data

    model, tok = _load(path, tokenizer, floor, "mlm", stamp)
    pairs = sense_data(run_path, lang, n)
    with few_threads(model):
        U, V, y, kept = sense_pair_vectors(model, tok, pairs)
    return pairs, U, V, y, kept


@st.cache_data(show_spinner=False, max_entries=64, hash_funcs=ARRAY_HASH)
def _wic_numbers(U: np.ndarray, V: np.ndarray, y: np.ndarray, folds: int) -> tuple[dict, dict]:
    from xlviz.analysis.probing import contextual_similarity, wic_probe

    return wic_probe(U, V, y, folds=folds), contextual_similarity(U, V, y)


@st.cache_data(show_spinner=False, max_entries=32)
def sense_pairs_test_context(run_path: str, lang: str, n: int | None, wstamp: str = "") -> bool:
    """:func:`xlviz.analysis.probing.sense_pairs_test_context` of a run's sense pairs in ``lang``."""
    from xlviz.analysis.probing import sense_pairs_test_context as tests_context
    from xlviz.analysis.reports import sense_data

    return tests_context(sense_data(run_path, lang, n))


def word_in_context(spec: ModelSpec, run_path: str, lang: str, n: int | None, folds: int) -> dict:
    """``xlviz.analysis.probing.word_in_context``'s result, with vectors and numbers cached apart."""
    load(spec, "mlm")
    pairs, U, V, y, kept = _sense_vectors(*_args(spec), run_path, lang, n, _world_stamp(run_path))
    probe, sim = _wic_numbers(U, V, y, int(folds))
    layers = [{**a, **{k: v for k, v in b.items() if k != "layer"}} for a, b in zip(probe["layers"], sim["layers"])]
    items = []
    for j, i in enumerate(kept):
        p = pairs[i]
        w1, w2 = p["words1"][p["index1"]], p["words2"][p["index2"]]
        items.append({"id": p["id"], "word": w1 if w1 == w2 else f"{w1} / {w2}", "sentence1": p["sentence1"],
                      "sentence2": p["sentence2"], "same_sense": bool(p["same_sense"]),
                      "cosine": [c[j] for c in sim["cosines"]], "predicted": [pr[j] for pr in probe["predictions"]]})
    return {"layers": layers, "items": items, "n_pairs": len(pairs), "n_dropped": len(pairs) - len(kept)}


# --------------------------------------------------------------------------- figures
# drawn by xlviz.views (no Streamlit there), so a notebook gets the pages' very figures
from xlviz.views.figures import LANG_COLOURS, PALETTE, _wrap, explained_variance, layer_lines, projection_figure  # noqa: E402,F401


def csv_bytes(rows: list[dict]) -> bytes:
    """Rows of dicts as UTF-8 CSV (lists joined with ';'), for st.download_button."""
    import pandas as pd

    df = pd.DataFrame([{k: ";".join(map(str, v)) if isinstance(v, (list, tuple)) else v for k, v in r.items()} for r in rows])
    return df.to_csv(index=False).encode("utf-8")


# --------------------------------------------------------------------------- projector
@st.cache_data(show_spinner=False, max_entries=16)
def projector(blocks: tuple, method: str, seed: int = 0):
    """The projector's points (``xlviz.views.embeddings.build``) of ``blocks``: tuples of
    ``(system, language, side, texts, vectors)``. Cached without the search query, so typing a
    search only re-marks the points (``xlviz.views.embeddings.search``)."""
    from xlviz.views.embeddings import Block, build

    return build([Block(*b) for b in blocks], method=method, seed=seed)
