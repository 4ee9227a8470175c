"""Stored encodings: an encoder's per-layer vectors of a run's parallel pairs, written once to the
run and read by the Alignment page instead of loading the model and encoding on the page.

Why: the page's first render on a run imported the model stack and encoded every picked system's
500 pairs in both languages (most of its cold time). A run (``xlviz analyse encodings``, or the
``encodings`` task at the end of each system's scoring stage) writes them as safetensors; the
page reads them when they are valid and computes (writing nothing) when they are not.

One file per encoder and text side, ``encodings/<key>.safetensors`` (recorded in the run's
manifest as kind ``encodings``: :mod:`xlviz.runs`), holding ``sentences`` [layers + 1, n, d] and,
where the page shows word translation, ``words`` [layers + 1, all words in order, d] (NaN rows for
words cut off). Its metadata says what the vectors are: the model (:func:`spec_fingerprint`: the
digest of its folder's files and tokenizer's, and the floor's settings), the texts
(:func:`texts_fingerprint`: the sentences and their pre-split words), the pooling and the token
limit. A reader asks for exactly that (:func:`request`) and gets the vectors only when every field
matches: a retrained or replaced model, other pairs or other settings read as "not stored".
Byte-identical encoders (a run exports one English encoder per system) share one file.

The numbers are the page's: both encode :data:`CHUNK` sentences at a time with the same
functions (:func:`encode_chunk`), so the stored arrays equal what the page computes.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from xlviz.errors import XlvizError

FORMAT = "xlviz-encodings/1"
CHUNK = 64  # sentences per piece of work on the page (a cache entry and a progress step each)
# the Alignment page's default view on a run's parallel pairs: what a run stores
POOLING = "mean"
MAX_LENGTH = 128
PAIRS = 500
_FIELDS = ("format", "model", "texts", "n", "pooling", "max_length", "words")
META_KEY = "xlviz"  # the safetensors metadata entry holding the fields (one JSON text)


# --------------------------------------------------------------------------- what the vectors are
def spec_fingerprint(spec, digest: Callable[[str], str | None] | None = None) -> str | None:
    """A digest of what a :class:`~xlviz.models.reference.ModelSpec` encodes with: its folder's
    files, its tokenizer folder's (if apart) and the floor's settings. None for a hub id or an
    unreadable folder (nothing stored for those). ``digest``: the folder digest to use (the
    page passes its cached one)."""
    from xlviz.io import folder_digest

    digest = digest or folder_digest
    model = digest(spec.path)
    tok = digest(spec.tokenizer) if spec.tokenizer else ""
    if model is None or tok is None:
        return None
    parts = [model, tok, spec.floor_seed, spec.floor_init, spec.floor_init_std]
    return hashlib.sha1(json.dumps(parts).encode()).hexdigest()


def texts_fingerprint(texts: Sequence[str], words: Sequence[Sequence[str]] | None = None) -> str:
    """A digest of the sentences (and their pre-split words, if given)."""
    body = json.dumps([list(texts), None if words is None else [list(w) for w in words]], ensure_ascii=False)
    return hashlib.sha1(body.encode("utf-8")).hexdigest()


def request(model: str, texts: Sequence[str], words: Sequence[Sequence[str]] | None, pooling: str,
            max_length: int) -> dict[str, str]:
    """The metadata a stored file must carry to hold these vectors (``model``: :func:`spec_fingerprint`)."""
    return {"format": FORMAT, "model": model, "texts": texts_fingerprint(texts, words), "n": str(len(texts)),
            "pooling": pooling, "max_length": str(int(max_length)), "words": "yes" if words is not None else "no"}


def key_of(meta: dict[str, str]) -> str:
    """The file's key: a digest of its metadata."""
    return hashlib.sha1(json.dumps({k: meta.get(k) for k in _FIELDS}, sort_keys=True).encode()).hexdigest()


# --------------------------------------------------------------------------- computing
def encode_chunk(model, tokenizer, texts: Sequence[str], words: Sequence[Sequence[str]] | None, pooling: str,
                 max_length: int) -> tuple[np.ndarray, np.ndarray | None]:
    """One piece of the page's work: sentence vectors [L+1, n, d] of ``texts`` and, with
    ``words`` (the same sentences pre-split), their word vectors [L+1, all words, d] from the same
    forward pass."""
    if words is None:
        from xlviz.analysis.representations import sentence_embeddings

        return sentence_embeddings(model, tokenizer, list(texts), pooling=pooling, max_length=max_length), None
    from xlviz.analysis.reports import sentence_and_word_vectors

    return sentence_and_word_vectors(model, tokenizer, list(texts), [list(w) for w in words], pooling, max_length)


def encode(model, tokenizer, texts: Sequence[str], words: Sequence[Sequence[str]] | None, pooling: str, max_length: int,
           progress: Callable[[int, int], None] | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """:func:`encode_chunk` over all ``texts``, :data:`CHUNK` at a time (as the page does)."""
    sent, word = [], []
    for lo in range(0, len(texts), CHUNK):
        s, w = encode_chunk(model, tokenizer, texts[lo : lo + CHUNK], None if words is None else words[lo : lo + CHUNK],
                            pooling, max_length)
        sent.append(s)
        word.append(w)
        if progress:
            progress(min(lo + CHUNK, len(texts)), len(texts))
    return np.concatenate(sent, axis=1), (None if words is None else np.concatenate(word, axis=1))


# --------------------------------------------------------------------------- files
def header(path: str | os.PathLike) -> dict[str, str]:
    """A stored file's metadata (its safetensors header only), or an XlvizError naming it. The
    fields are one JSON text under one key (:data:`META_KEY`, keys sorted): safetensors keeps its
    metadata in a hash map whose order changes from process to process, and one entry keeps a
    file's bytes the same whichever process wrote it."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="numpy") as f:
            raw = (f.metadata() or {}).get(META_KEY)
    except Exception as e:  # noqa: BLE001 - safetensors raises its own types on a broken file
        raise XlvizError(f"not a readable safetensors file ({str(e).splitlines()[0][:120] if str(e) else type(e).__name__})",
                         path=path) from None
    try:
        meta = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        meta = None
    if not isinstance(meta, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
        raise XlvizError("no stored-encodings metadata (an object of texts) in its header", path=path, field=META_KEY)
    return meta


def read(path: str | os.PathLike, meta: dict[str, str]) -> tuple[np.ndarray, np.ndarray | None]:
    """The vectors of a stored file that carries ``meta``, checked: an XlvizError naming the
    file and field when the file holds something else or is malformed."""
    from safetensors.numpy import load_file

    got = header(path)
    for k in _FIELDS:
        if got.get(k) != meta.get(k):
            raise XlvizError(f"holds other vectors ({k} differs)", path=path, field=k)
    try:
        arrays = load_file(str(path))
    except Exception as e:  # noqa: BLE001
        raise XlvizError(f"not a readable safetensors file ({type(e).__name__})", path=path) from None
    sent = arrays.get("sentences")
    if sent is None or sent.ndim != 3 or sent.shape[1] != int(meta["n"]) or sent.dtype != np.float32:
        raise XlvizError(f"expected float32 [layers, {meta['n']}, hidden], got {None if sent is None else sent.shape}",
                         path=path, field="sentences")
    word = arrays.get("words")
    if meta["words"] == "yes" and (word is None or word.ndim != 3 or word.shape[0] != sent.shape[0]
                                   or word.shape[2] != sent.shape[2] or word.dtype != np.float32):
        raise XlvizError(f"expected float32 [{sent.shape[0]}, words, {sent.shape[2]}], got {None if word is None else word.shape}",
                         path=path, field="words")
    return sent, (word if meta["words"] == "yes" else None)


def stored(run_dir: str | os.PathLike) -> dict[str, Path]:
    """``{key: file}`` of a run's stored encodings (its manifest's ``encodings`` entries whose
    header reads and whose key matches it). Unreadable files are left out."""
    from xlviz.runs import artefacts

    out = {}
    for a in artefacts(run_dir, "encodings"):
        try:
            meta = header(a.folder)
        except XlvizError:
            continue
        if meta.get("format") == FORMAT:
            out[key_of(meta)] = a.folder
    return out


def find(run_dir: str | os.PathLike, meta: dict[str, str]) -> Path | None:
    """The run's file holding the vectors ``meta`` describes, or None."""
    return stored(run_dir).get(key_of(meta))


def save(run_path: str | os.PathLike, meta: dict[str, str], sentences: np.ndarray, words: np.ndarray | None) -> Path:
    """Write ``encodings/<key>.safetensors`` into the run (atomically; the caller records it in
    the manifest: :meth:`xlviz.training.staged.StagedRun.record_artefact` in a run,
    :func:`xlviz.runs.record_artefacts` under the run's writer lock otherwise)."""
    from safetensors.numpy import save as to_bytes

    from xlviz.io import atomic_write_bytes
    from xlviz.runs import artefact_relpath

    if (words is None) != (meta["words"] == "no"):
        raise XlvizError("word vectors must be given exactly when the metadata says words", field="words")
    tensors = {"sentences": np.ascontiguousarray(sentences, dtype=np.float32)}
    if words is not None:
        tensors["words"] = np.ascontiguousarray(words, dtype=np.float32)
    path = Path(run_path).joinpath(*artefact_relpath("encodings", key=key_of(meta)).split("/"))
    fields = json.dumps({k: meta[k] for k in _FIELDS}, sort_keys=True)
    atomic_write_bytes(path, to_bytes(tensors, metadata={META_KEY: fields}), root=run_path)
    return path


# --------------------------------------------------------------------------- a run's encodings
def write_encodings(run_dir: str | os.PathLike, l2: str, systems: Sequence, record: Callable[[list[dict]], None], *,
                    log: Callable[[str], None] | None = None) -> list[Path]:
    """Store what the Alignment page's default view of the run's ``l2`` pairs needs of
    ``systems`` (:class:`~xlviz.analysis.reports.System`, named ``<run> · <system>`` or
    ``<system>``): the first :data:`PAIRS` parallel pairs as the page reads them, each side (the
    L1 encoder on the L1 sentences, the L2 encoder on the L2's), :data:`POOLING` pooling,
    :data:`MAX_LENGTH` tokens, and the word vectors where the pairs have words and a dictionary
    (the page's word translation is then on). A file already stored (the same encoder under
    another system) is not computed again; an encoder that is not a local folder is skipped.
    ``record(entries)`` adds each new file to the run's manifest. Returns the files written."""
    from xlviz.analysis.reports import parallel_data
    from xlviz.models.reference import load_spec

    run_path = Path(run_dir)
    data = parallel_data("world", run_dir=str(run_path), l2=l2, limit=PAIRS)  # as the page asks for them
    with_words = bool(data.has_words and data.dictionary)
    have = stored(run_path)
    written: list[Path] = []
    for s in systems:
        system = s.name.rsplit(" · ", 1)[-1]
        for spec, texts, words, lang in ((s.a, data.src, data.src_words, data.lang_a), (s.b, data.tgt, data.tgt_words, data.lang_b)):
            model_fp = spec_fingerprint(spec)
            if model_fp is None:
                continue
            meta = request(model_fp, texts, words if with_words else None, POOLING, MAX_LENGTH)
            if key_of(meta) in have:
                continue
            model, tok = load_spec(spec, "base")
            sent, word = encode(model, tok, texts, words if with_words else None, POOLING, MAX_LENGTH)
            del model
            path = save(run_path, meta, sent, word)
            # no system: the file is any system's whose encoder this is (whichever wrote it first)
            record([{"kind": "encodings", "path": path.relative_to(run_path).as_posix(), "language": lang,
                     "role": "encodings"}])
            have[key_of(meta)] = path
            written.append(path)
            if log:
                log(f"  {system} {lang}: encodings of {len(texts)} {l2} pairs stored for the Alignment page ({path.name})")
    return written


def write_run_encodings(run_dir: str | os.PathLike, record: Callable[[list[dict]], None], *,
                        l2s: Sequence[str] | None = None, systems: Sequence[str] | None = None,
                        log: Callable[[str], None] | None = None) -> list[Path]:
    """:func:`write_encodings` for every system the Alignment page offers on the run
    (:func:`~xlviz.analysis.reports.run_systems`; ``systems``: only those) and every L2 with
    parallel pairs (``l2s``: only those)."""
    from xlviz.analysis.reports import run_info, run_systems

    info = run_info(run_dir)
    written: list[Path] = []
    for l2 in l2s or [l for l in info.l2s if info.has_parallel(l)]:
        chosen = [s for s in run_systems(info.path, l2) if systems is None or s.name.rsplit(" · ", 1)[-1] in systems]
        written += write_encodings(info.path, l2, chosen, record, log=log)
    return written
