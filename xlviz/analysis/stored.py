"""Set-level analysis tables stored in a run: ``analyses/<name>-<key>.json`` and ``.csv``, listed
in the run's manifest (kind ``analysis``), read back only when they were computed from exactly
what a reader asks for.

Why: the slice table and the patching matrix cost seconds to minutes; the CLI writes them once
(as the run's writer) and notebooks and pages read them. The JSON's ``request`` says what the
numbers come from (digests of the input files and model folders, the settings); the file name's
key is a digest of it, so a changed model or prediction reads as "not stored", never as stale.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

from xlviz import confined, limits
from xlviz.errors import XlvizError

MAX_BYTES = limits.RESULTS_MAX_BYTES


def file_digest(path: str | os.PathLike, root: str | os.PathLike) -> str:
    """sha1 of a run file (confined to ``root``, bounded)."""
    return hashlib.sha1(confined.read_bytes(path, root=root, max_bytes=MAX_BYTES, what="run file")).hexdigest()


def key_of(request: dict) -> str:
    return hashlib.sha1(json.dumps(request, sort_keys=True).encode()).hexdigest()[:20]


def relpaths(name: str, request: dict) -> tuple[str, str]:
    """The JSON's and CSV's paths in the run (made by :func:`xlviz.runs.artefact_relpath`)."""
    from xlviz.runs import artefact_relpath

    key = f"{name}-{key_of(request)}"
    return artefact_relpath("analysis", key=f"{key}.json"), artefact_relpath("analysis", key=f"{key}.csv")


def find(run_dir: str | os.PathLike, name: str, fmt: str, request: dict) -> tuple[dict, Path] | None:
    """``(stored JSON, its path)`` computed from exactly ``request`` (format ``fmt``), or None."""
    from xlviz.runs import artefacts

    run = Path(run_dir)
    want = relpaths(name, request)[0]
    for a in artefacts(run, "analysis"):
        if a.path != want or not a.folder.is_file():
            continue
        try:
            obj = confined.read_json(a.folder, root=run, max_bytes=MAX_BYTES, what=f"{name} table")
        except XlvizError:
            return None
        if isinstance(obj, dict) and obj.get("format") == fmt and obj.get("request") == request:
            return obj, a.folder
    return None


def write(run_dir: str | os.PathLike, name: str, obj: dict, csv_text: str, language: str | None,
          record: Callable[[list[dict]], None]) -> Path:
    """Write ``obj`` (holding its ``request``) and the CSV atomically and list both in the
    manifest through ``record``: the run's writer only (the caller holds its lock)."""
    from xlviz.io import atomic_write_json, atomic_write_text

    run = Path(run_dir)
    rel_json, rel_csv = relpaths(name, obj["request"])
    atomic_write_json(run / rel_json, obj, root=run)
    atomic_write_text(run / rel_csv, csv_text, root=run)
    entry = {"kind": "analysis", "role": "analysis", **({"language": language} if language else {})}
    record([{**entry, "path": rel} for rel in (rel_json, rel_csv)])
    return run / rel_json


__all__ = ["file_digest", "key_of", "relpaths", "find", "write", "MAX_BYTES"]
