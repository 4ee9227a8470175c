"""``xlviz.json`` beside an exported model: which system and language it belongs to, and
a fingerprint of the tokenizer it was saved with, checked whenever the folder is loaded.

Why: a model folder is three files a user can mix up. A QA export of the German model whose
``tokenizer.json`` was copied from the English export has the same vocabulary size and the
same special-token ids (every vocabulary of a run is learned to ``vocab_size`` with the same
specials), so nothing at load time differed and ``xlviz predict-qa`` answered with the wrong
subwords without a word. The record says what the tokenizer was: its vocabulary size, the
ids of its special tokens and a digest of its whole vocabulary (strings and ids), and the
language it reads. :func:`check_record` compares the loaded tokenizer with it, and the
language with what the caller expects, each mismatch one line naming the file and field.

Folders without a record (exports written before it, any Hugging Face folder) still load:
only the checks that can be made without it are made (:func:`xlviz.models.loading.check_tokenizer_fits`).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from xlviz.errors import XlvizError

RECORD_FILE = "xlviz.json"
RECORD_FORMAT = 1
RECORD_MAX_BYTES = 64 * 1024
SPECIALS = ("pad_token", "unk_token", "cls_token", "sep_token", "mask_token", "bos_token", "eos_token")


def vocab_digest(tokenizer) -> str:
    """SHA-256 of the tokenizer's vocabulary (every token string with its id, in id order):
    two tokenizers learned on different languages differ here even at the same size."""
    items = sorted(tokenizer.get_vocab().items(), key=lambda kv: (kv[1], kv[0]))
    return hashlib.sha256(json.dumps(items, ensure_ascii=False).encode("utf-8")).hexdigest()


def special_ids(tokenizer) -> dict[str, int]:
    """``{special token name: id}`` for the special tokens the tokenizer has."""
    out = {}
    for name in SPECIALS:
        token = getattr(tokenizer, name, None)
        token_id = getattr(tokenizer, f"{name}_id", None)
        if token is not None and isinstance(token_id, int):
            out[name] = token_id
    return out


def tokenizer_fingerprint(tokenizer) -> dict[str, Any]:
    return {"vocab_size": len(tokenizer), "special_ids": special_ids(tokenizer), "vocab_sha256": vocab_digest(tokenizer)}


def embedding_rows(model) -> int | None:
    """Rows of the model's token embedding matrix, None when it exposes none."""
    try:
        emb = model.get_input_embeddings()
    except (AttributeError, NotImplementedError):
        return None
    rows = getattr(emb, "num_embeddings", None)
    return int(rows) if isinstance(rows, int) else None


def make_record(model, tokenizer, *, kind: str, system: str | None, language: str | None) -> dict:
    """The record of a folder about to be saved. No timestamp, path or run name: two runs of one
    configuration write the same bytes, and a stage a sweep copies into another cell stays true
    there."""
    rec: dict[str, Any] = {"format": RECORD_FORMAT, "kind": kind, "system": system, "language": language}
    rows = embedding_rows(model)
    if rows is not None:  # a wrapper without input embeddings of its own (VECO's paired QA model) records none
        rec["embedding_rows"] = rows
    if tokenizer is not None:
        rec["tokenizer"] = {"language": language, **tokenizer_fingerprint(tokenizer)}
    return rec


def write_record(folder: str | os.PathLike, record: dict) -> None:
    """Write ``record`` into ``folder`` (a folder being saved, e.g. inside ``atomic_dir``)."""
    Path(folder, RECORD_FILE).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def read_record(folder: str | os.PathLike) -> dict | None:
    """The folder's record, or None when it has none; a record that is not a small regular
    JSON object with this format is refused (naming the file and field)."""
    from xlviz.confined import read_json

    path = Path(folder) / RECORD_FILE
    if not os.path.lexists(path):
        return None
    data = read_json(path, root=folder, max_bytes=RECORD_MAX_BYTES, what="model record")
    if not isinstance(data, dict):
        raise XlvizError(f"expected a JSON object, got {type(data).__name__}", path=path)
    if data.get("format") != RECORD_FORMAT:
        raise XlvizError(f"unknown record format {str(data.get('format'))[:20]!r} (this xlviz reads {RECORD_FORMAT})",
                         path=path, field="format")
    for key in ("language", "system", "run", "kind"):
        if data.get(key) is not None and (not isinstance(data[key], str) or len(data[key]) > 200):
            raise XlvizError("must be a short text or null", path=path, field=key)
    tok = data.get("tokenizer")
    if tok is not None and not isinstance(tok, dict):
        raise XlvizError("must be an object", path=path, field="tokenizer")
    return data


def _tokenizer_file(folder: Path, tokenizer_path) -> Path:
    where = Path(tokenizer_path) if isinstance(tokenizer_path, (str, os.PathLike)) and Path(tokenizer_path).is_dir() else folder
    for name in ("tokenizer.json", "vocab.txt", "vocab.json", "tokenizer_config.json"):
        if (where / name).is_file():
            return where / name
    return where


def _same_as(run_tokenizers, digest: str) -> str:
    try:
        found = run_tokenizers() if callable(run_tokenizers) else (run_tokenizers or {})
    except XlvizError:
        found = {}
    langs = [lang for lang, d in found.items() if d == digest]
    return f"; it is the run's {langs[0]} tokenizer" if langs else ""


def check_record(folder: str | os.PathLike, model, tokenizer, *, tokenizer_path=None, language: str | None = None,
                 run_tokenizers=None) -> dict | None:
    """Compare a loaded ``model`` and ``tokenizer`` with ``folder``'s record (None: no record,
    nothing to compare). ``language``: the language the caller expects the model to read
    (refused when the record names another). ``run_tokenizers``: ``{language: vocabulary
    digest}`` of the run's tokenizers (or a callable returning it, called only on a mismatch),
    to say which one a wrong tokenizer is. Returns the record."""
    folder = Path(folder)
    rec = read_record(folder)
    if rec is None:
        return None
    path = folder / RECORD_FILE
    what = f"the {rec.get('language')} {rec.get('kind') or 'model'}" if rec.get("language") else "this model"
    if language is not None and rec.get("language") is not None and language != rec["language"]:
        raise XlvizError(f"this model reads {rec['language']!r} (system {rec.get('system')}, run {rec.get('run')}), "
                         f"but {language!r} was asked for", path=path, field="language")
    rows = rec.get("embedding_rows")
    actual_rows = embedding_rows(model)
    if isinstance(rows, int) and actual_rows is not None and rows != actual_rows:
        raise XlvizError(f"records {rows} embedding rows but the weights have {actual_rows}: the weights are not the ones "
                         "this record was saved with", path=path, field="embedding_rows")
    tok = rec.get("tokenizer")
    if not isinstance(tok, dict) or tokenizer is None:
        return rec
    tok_file = _tokenizer_file(folder, tokenizer_path)
    size = tok.get("vocab_size")
    if isinstance(size, int) and size != len(tokenizer):
        raise XlvizError(f"has {len(tokenizer)} tokens but {what} was saved with a {size}-token tokenizer "
                         f"({RECORD_FILE}): not this model's tokenizer", path=tok_file, field="vocab_size")
    recorded = tok.get("special_ids")
    if isinstance(recorded, dict):
        now = special_ids(tokenizer)
        for name, token_id in sorted(recorded.items()):
            if now.get(name) != token_id:
                raise XlvizError(f"{name} has id {now.get(name)} but {what} was saved with id {token_id} "
                                 f"({RECORD_FILE}): not this model's tokenizer", path=tok_file, field=name)
    digest = tok.get("vocab_sha256")
    if isinstance(digest, str):
        now = vocab_digest(tokenizer)
        if now != digest:
            raise XlvizError(f"is not the tokenizer {what} was saved with: its vocabulary differs (digest {now[:12]}, "
                             f"{RECORD_FILE} records {digest[:12]}){_same_as(run_tokenizers, now)}",
                             path=tok_file, field="vocabulary")
    return rec
