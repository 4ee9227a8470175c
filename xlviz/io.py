"""Atomic file writes and careful JSON reads.

Run records are read by the app while a run writes them and must survive a kill at any
moment, so every write goes to a temporary file in the same folder and is renamed into place.

While a run is being written (``confine_writes``, entered by ``xlviz.runs.Run.writer_lock``)
every write here is checked to lie inside that run folder, so no name, config value or
symlink can carry a write (or ``atomic_dir``'s replacement of an existing folder) outside it.
Appends never follow a symlink. Files and folders get the permissions the umask allows
(0644/0755 usually), not ``mkstemp``'s private 0600/0700, so exported models are readable.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterable, Iterator

from xlviz.errors import XlvizError

_CONFINED: list[Path] = []
TMP_SUFFIXES = (".tmp", ".old")


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def confine_writes(root: str | os.PathLike) -> Iterator[Path]:
    """Within the block, every write through this module must lie inside ``root``."""
    _CONFINED.append(Path(root).resolve())
    try:
        yield _CONFINED[-1]
    finally:
        _CONFINED.pop()


def check_write(path: str | os.PathLike, root: str | os.PathLike | None = None) -> Path:
    """``path`` if it lies inside ``root`` (or the confined run folder), else an XlvizError."""
    from xlviz.names import inside

    root = root if root is not None else (_CONFINED[-1] if _CONFINED else None)
    if root is not None:
        inside(root, path)
    return Path(path)


def atomic_write_text(path: str | os.PathLike, text: str, *, root: str | os.PathLike | None = None) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), root=root)


def atomic_write_bytes(path: str | os.PathLike, data: bytes, *, root: str | os.PathLike | None = None) -> None:
    path = check_write(path, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except OSError as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise XlvizError(f"cannot write: {e.strerror or e}", path=path) from None
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_json(path: str | os.PathLike, obj: Any, *, root: str | os.PathLike | None = None) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n", root=root)


def folder_digest(folder: str | os.PathLike | None) -> str | None:
    """A digest of a folder's files (every file at its top level, names and bytes: a model's
    weights in any format or shards, config, tokenizer): two folders holding the same model (a
    run exports the same English encoder once per system) get the same digest. The folder's
    ``xlviz.json`` (which run and system saved it, :mod:`xlviz.models.export_record`) is left
    out: it says where the model is, not what it is. None for a hub id, an empty or unreadable
    folder."""
    import hashlib

    if not folder:
        return None
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        return None
    h = hashlib.sha1()
    found = False
    try:
        for f in sorted(folder.iterdir()):
            if f.is_file() and f.name != "xlviz.json":
                found = True
                h.update(f.name.encode() + b"\0")
                with open(f, "rb") as fh:
                    for block in iter(lambda: fh.read(1 << 20), b""):
                        h.update(block)
                h.update(b"\0")
    except OSError:
        return None
    return h.hexdigest() if found else None


def check_regular(path: str | os.PathLike, what: str) -> None:
    """An XlvizError unless ``path`` (symlinks followed) is a regular file: opening a FIFO
    blocks until someone writes to it and ``/dev/zero`` never ends, so neither is read."""
    import stat

    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # open() reports it
    if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        raise XlvizError(f"{what} is not a regular file (a FIFO, socket or device); not read", path=path)


class DuplicateKey(ValueError):
    """A JSON object names one key twice (``json`` silently keeps the last value)."""

    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    """``object_pairs_hook`` refusing a repeated key: ``{"seed": 0, "seed": 1}`` is a typo or an
    edit gone wrong, and reading it as 1 would run (or score) something nobody asked for."""
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKey(key)
        out[key] = value
    return out


def loads_strict(text: str) -> Any:
    """``json.loads`` that refuses duplicate keys (:class:`DuplicateKey`)."""
    return json.loads(text, object_pairs_hook=_no_duplicates)


def read_json(path: str | os.PathLike, *, what: str = "JSON file") -> Any:
    """Read JSON, turning every failure into an XlvizError that names the file; an object
    naming a key twice is refused (naming the key), not read as its last value."""
    path = Path(path)
    if not path.exists():
        raise XlvizError(f"{what} not found", path=path)
    if path.is_dir():
        raise XlvizError(f"{what} is a folder, expected a JSON file", path=path)
    check_regular(path, what)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise XlvizError(f"cannot read {what}: {type(e).__name__}", path=path) from None
    return parse_json(data, path=path, what=what)


def parse_json(data: bytes, *, path: str | os.PathLike, what: str = "JSON file") -> Any:
    """The JSON value of a file's bytes, every failure an XlvizError naming the file (a key named
    twice in one object, malformed JSON, not UTF-8, nested too deep); shared by :func:`read_json`
    and the run-folder reader :func:`xlviz.confined.read_json`."""
    try:
        return loads_strict(data.decode("utf-8"))
    except DuplicateKey as e:
        raise XlvizError("the key appears twice in one object (which value is meant?)", path=path, field=e.key) from None
    except json.JSONDecodeError as e:
        raise XlvizError(f"malformed JSON at line {e.lineno}, column {e.colno}: {e.msg}", path=path) from None
    except UnicodeDecodeError:
        raise XlvizError("not UTF-8 text", path=path) from None
    except (RecursionError, ValueError) as e:
        raise XlvizError(f"cannot read {what}: {type(e).__name__}", path=path) from None


def read_json_object(path: str | os.PathLike, *, what: str = "JSON file") -> dict:
    """:func:`read_json` of a file that must hold a JSON object (a config)."""
    obj = read_json(path, what=what)
    if not isinstance(obj, dict):
        raise XlvizError(f"{what} must be a JSON object, got {type(obj).__name__}", path=path)
    return obj


def _ends_torn(fd: int) -> bool:
    """Whether the file open at ``fd`` is non-empty and does not end with a newline: a write
    cut short by a kill or a full disk."""
    size = os.fstat(fd).st_size
    return size > 0 and os.pread(fd, 1, size - 1) not in (b"\n", b"\r")


def append_line(path: str | os.PathLike, line: str, *, root: str | os.PathLike | None = None) -> None:
    """Append one line in a single write, never following a symlink at ``path``. After a torn
    last line (a kill mid-write) the new line starts on a line of its own, so it is not glued
    onto the torn one and lost with it."""
    path = check_write(path, root)
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o666)
        if _ends_torn(fd):
            line = "\n" + line
        with os.fdopen(fd, "a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
    except OSError as e:  # ELOOP: a symlink; ENOSPC: disk full
        raise XlvizError(f"cannot append: {e.strerror or e}", path=path) from None


def append_jsonl(path: str | os.PathLike, obj: Any, *, root: str | os.PathLike | None = None) -> None:
    """Append one JSON line; a single small write, flushed, so readers see whole lines."""
    append_line(path, json.dumps(obj, ensure_ascii=False) + "\n", root=root)


def parse_jsonl(lines: Iterable[str], skipped: list[str] | None = None) -> Iterator[Any]:
    """The JSON values of ``lines`` (one per line), skipping a torn line (a kill mid-write) or
    one naming a key twice; each skipped line is described in ``skipped`` (``"line 7: not
    JSON"``) for the caller to show."""
    for number, line in enumerate(lines, 1):
        line = line.strip()
        if not line:
            continue
        try:
            yield loads_strict(line)
        except DuplicateKey as e:
            if skipped is not None:
                skipped.append(f"line {number}: key {e.key!r} twice")
        except (json.JSONDecodeError, RecursionError):
            if skipped is not None:
                skipped.append(f"line {number}: not a complete JSON line (torn by a kill?)")


def read_jsonl(path: str | os.PathLike, skipped: list[str] | None = None) -> Iterator[Any]:
    """Yield the complete lines of a JSONL file (:func:`parse_jsonl`)."""
    path = Path(path)
    if not path.exists():
        return
    check_regular(path, "JSON lines file")
    with open(path, encoding="utf-8", errors="replace") as f:
        yield from parse_jsonl(f, skipped)


def remove_orphans(root: str | os.PathLike) -> list[Path]:
    """Remove the ``.<name>.*.tmp`` files and folders (and ``.<name>.old``) that a save killed
    mid-write leaves behind; only safe while holding the run's writer lock."""
    removed = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in list(dirnames) + filenames:
            if name.startswith(".") and name.endswith(TMP_SUFFIXES):
                p = Path(dirpath) / name
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p, ignore_errors=True)
                    dirnames.remove(name) if name in dirnames else None
                else:
                    p.unlink(missing_ok=True)
                removed.append(p)
    return removed


def _open_up(folder: Path) -> None:
    """Give a folder built under ``mkdtemp`` (0700) and its contents the umask's permissions."""
    mask = _umask()
    for dirpath, dirnames, filenames in os.walk(folder):
        os.chmod(dirpath, 0o777 & ~mask)
        for name in filenames:
            p = os.path.join(dirpath, name)
            if not os.path.islink(p):
                os.chmod(p, (os.stat(p).st_mode | 0o644) & 0o777 & ~mask)


def _write_error(exc: BaseException) -> str:
    """A write failure as a short phrase: ``No space left on device`` whether it came as an
    OSError or wrapped in safetensors' ``IoError(Os { code: 28, ... })``."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    text = " ".join(str(exc).split())
    if "code: 28" in text or "StorageFull" in text or "No space left" in text:
        return "No space left on device"
    return text[:200] or type(exc).__name__


class atomic_dir:
    """Context manager: build a folder under a temporary name, rename it into place on success.

    >>> with atomic_dir("checkpoints/run/s1_pretrain") as tmp:
    ...     model.save_pretrained(tmp)
    """

    def __init__(self, path: str | os.PathLike, *, root: str | os.PathLike | None = None):
        self.path = check_write(path, root)

    def __enter__(self) -> Path:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = Path(tempfile.mkdtemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp"))
        return self.tmp

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            if isinstance(exc, OSError) or type(exc).__name__ == "SafetensorError":
                # a full disk or a write error inside save_pretrained: one line naming the
                # folder (safetensors' own error is a Rust IoError), the old folder untouched
                raise XlvizError(f"cannot write: {_write_error(exc)}", path=self.path) from None
            return
        _open_up(self.tmp)
        if self.path.exists() or self.path.is_symlink():
            old = self.path.with_name(f".{self.path.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(self.path, old)
            os.replace(self.tmp, self.path)
            if old.is_dir() and not old.is_symlink():
                shutil.rmtree(old, ignore_errors=True)
            else:
                old.unlink(missing_ok=True)
        else:
            os.replace(self.tmp, self.path)
