"""Atomic file writes and careful JSON reads.

Run records are read by the app while a run writes them and must survive a kill at any
moment, so every write goes to a temporary file in the same folder and is renamed into place.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

from xlviz.errors import XlvizError


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def read_json(path: str | os.PathLike, *, what: str = "JSON file") -> Any:
    """Read JSON, turning every failure into an XlvizError that names the file."""
    path = Path(path)
    if not path.exists():
        raise XlvizError(f"{what} not found", path=path)
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except json.JSONDecodeError as e:
        raise XlvizError(f"malformed JSON at line {e.lineno}, column {e.colno}: {e.msg}", path=path) from None
    except UnicodeDecodeError:
        raise XlvizError("not UTF-8 text", path=path) from None


def append_jsonl(path: str | os.PathLike, obj: Any) -> None:
    """Append one JSON line; a single small write, flushed, so readers see whole lines."""
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(obj, ensure_ascii=False) + "\n")
        f.flush()


def read_jsonl(path: str | os.PathLike) -> Iterator[dict]:
    """Yield the complete lines of a JSONL file, skipping a torn last line after a kill."""
    path = Path(path)
    if not path.exists():
        return
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue


class atomic_dir:
    """Context manager: build a folder under a temporary name, rename it into place on success.

    >>> with atomic_dir("checkpoints/run/s1_pretrain") as tmp:
    ...     model.save_pretrained(tmp)
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    def __enter__(self) -> Path:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = Path(tempfile.mkdtemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp"))
        return self.tmp

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            return
        if self.path.exists():
            old = self.path.with_name(f".{self.path.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(self.path, old)
            os.replace(self.tmp, self.path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(self.tmp, self.path)
