"""Confined, bounded reads of the files of a run folder.

Why: the app reads run folders it did not write (copied from another machine, unpacked from
an archive, another user's under a shared checkpoints root). Such a folder may hold a
symlink to a file elsewhere (``log.txt`` -> ``~/.ssh/id_rsa`` would be shown on the Runs
page), a link to ``/dev/zero`` (read without bound, it exhausts memory), or a FIFO (opening
and reading it blocks the page forever). Every read here:

- refuses a symbolic link as the file itself (``O_NOFOLLOW``) and a file whose resolved path
  lies outside the folder it belongs to (a linked sub-folder);
- opens with ``O_NONBLOCK`` and refuses anything but a regular file (``S_ISREG`` on the open
  descriptor, so no swap between check and read), so a FIFO or a device never blocks;
- reads at most the limit of :mod:`xlviz.limits` for that file (a tail read reads only the
  last bytes), and says so when a file is larger.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from xlviz.errors import XlvizError


def inside(root: str | os.PathLike, path: str | os.PathLike) -> bool:
    """Whether ``path``, resolved (symlinks followed, '..' applied), lies in or at ``root`` resolved."""
    root_r = os.path.realpath(root)
    path_r = os.path.realpath(path)
    return path_r == root_r or path_r.startswith(root_r.rstrip(os.sep) + os.sep)


def _open(path: Path, root: str | os.PathLike | None, what: str) -> int:
    """A read-only descriptor of the regular file ``path`` inside ``root`` (else an XlvizError).
    ``root=None``: a file outside any run folder (a model's ``config.json``, which a Hugging
    Face cache links): symlinks are followed, but it must still be a regular file."""
    nofollow = getattr(os, "O_NOFOLLOW", 0) if root is not None else 0
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | nofollow | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise XlvizError(f"{what} not found", path=path) from None
    except OSError as e:
        if path.is_symlink():
            raise XlvizError(f"{what} is a symbolic link; files of a run folder must be regular files in it",
                             path=path) from None
        raise XlvizError(f"cannot read {what}: {e.strerror or e}", path=path) from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise XlvizError(f"{what} is a folder, expected a file", path=path)
        if not stat.S_ISREG(mode):
            raise XlvizError(f"{what} is not a regular file (a FIFO, socket or device); not read", path=path)
        if root is not None and not inside(root, path):
            raise XlvizError(f"{what} lies outside its folder {os.path.realpath(root)} (through a symbolic link); not read",
                             path=path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_bytes(path: str | os.PathLike, *, root: str | os.PathLike | None, max_bytes: int, what: str = "file") -> bytes:
    """The whole file, if it is at most ``max_bytes`` long; else an XlvizError naming the limit."""
    path = Path(path)
    fd = _open(path, root, what)
    try:
        chunks: list[bytes] = []
        size = 0
        while size <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as e:
        raise XlvizError(f"cannot read {what}: {e.strerror or e}", path=path) from None
    finally:
        os.close(fd)
    if size > max_bytes:
        raise XlvizError(f"{what} is larger than {max_bytes:,} bytes (the limit in xlviz/limits.py); not read", path=path)
    return b"".join(chunks)


def read_tail(path: str | os.PathLike, *, root: str | os.PathLike, max_bytes: int, what: str = "file") -> bytes:
    """At most the last ``max_bytes`` of the file (a log's tail)."""
    path = Path(path)
    fd = _open(path, root, what)
    try:
        size = os.fstat(fd).st_size
        start = max(size - max_bytes, 0)
        data = os.pread(fd, max_bytes, start)
    except OSError as e:
        raise XlvizError(f"cannot read {what}: {e.strerror or e}", path=path) from None
    finally:
        os.close(fd)
    if start > 0:  # the first line was cut: drop it
        data = data.split(b"\n", 1)[1] if b"\n" in data else b""
    return data


def read_text(path: str | os.PathLike, *, root: str | os.PathLike | None, max_bytes: int, what: str = "file") -> str:
    return read_bytes(path, root=root, max_bytes=max_bytes, what=what).decode("utf-8", errors="replace")


def read_json(path: str | os.PathLike, *, root: str | os.PathLike | None, max_bytes: int, what: str = "JSON file") -> Any:
    """:func:`read_bytes` parsed as JSON; every failure an XlvizError naming the file."""
    from xlviz.io import parse_json

    return parse_json(read_bytes(path, root=root, max_bytes=max_bytes, what=what), path=path, what=what)


def read_jsonl(path: str | os.PathLike, *, root: str | os.PathLike | None, max_bytes: int, what: str = "JSON lines") -> list:
    """The complete JSON lines of a file read by :func:`read_text` (a torn or malformed line, or
    one naming a key twice, is skipped, as after a kill mid-write)."""
    from xlviz.io import parse_jsonl

    return list(parse_jsonl(read_text(path, root=root, max_bytes=max_bytes, what=what).splitlines()))


__all__ = ["inside", "read_bytes", "read_tail", "read_text", "read_json", "read_jsonl"]
