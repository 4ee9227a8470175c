"""The registry of parallel-text sources: where the pages and the CLI analyses get sentence pairs.

One module of this package per source, each defining ``SOURCE`` (a :class:`ParallelSource`):
a run's pairs (the generated world's, or those a corpus run saved), PUD, Tatoeba, Multi30k
task 1 validation, two line-aligned files. The Alignment and Attention pages list the sources
that are available here (:func:`available`), offer each source's languages, and read through
:func:`parallel_data`, as ``xlviz analyse alignment --source`` does; none of them names a source.
Sources registered at runtime (:func:`register`: a plug-in, a test) are listed beside the modules.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from xlviz.errors import XlvizError


@dataclass
class ParallelData:
    """Paired sentences, row i of ``src`` translating row i of ``tgt``; for the generated world
    also pre-split words, gold word alignment and the gold dictionary (``(a_word, b_word)``)."""

    lang_a: str
    lang_b: str
    src: list[str]
    tgt: list[str]
    ids: list[str]
    source: str
    src_words: list[list[str]] | None = None
    tgt_words: list[list[str]] | None = None
    alignment: list[list[tuple[int, int]]] | None = None
    dictionary: list[tuple[str, str]] | None = None

    def __len__(self) -> int:
        return len(self.src)

    @property
    def has_words(self) -> bool:
        return self.src_words is not None and self.tgt_words is not None


@dataclass(frozen=True)
class Request:
    """What a caller asks a source for: languages, at most ``limit`` pairs, and what some
    sources need besides (``run_dir`` for a run's pairs, ``files`` for two files; ``data_dir``
    overrides ``../shared/data/<folder>``)."""

    lang_a: str = "en"
    lang_b: str | None = None
    limit: int | None = None
    run_dir: str | None = None
    files: tuple[str, str] | None = None
    data_dir: str | None = None


@dataclass(frozen=True)
class ParallelSource:
    """A parallel-text source. ``languages(data_dir)``: the choices for sentence A (empty when the
    data is not here); ``partners(lang_a, data_dir)``: the choices for sentence B; ``read``:
    the pairs for a :class:`Request`. ``takes`` names what a request needs beyond languages
    (``"run"``, ``"files"``) so a form knows which pickers to draw; ``folder`` is the shared
    data folder it reads (``None``: none)."""

    name: str
    label: str
    description: str
    read: Callable[[Request], ParallelData]
    languages: Callable[[str | None], list[str]] = lambda data_dir: []
    partners: Callable[[str, str | None], list[str]] = lambda lang_a, data_dir: []
    default_a: str = "en"
    default_b: str = "de"
    takes: str | None = None
    folder: str | None = None
    order: int = 50

    def available(self, data_dir: str | None = None) -> bool:
        """Whether this source can be read here (run and file sources: always)."""
        if self.takes is not None:
            return True
        try:
            return bool(self.languages(data_dir))
        except (XlvizError, OSError):
            return False


_FOUND: dict[str, ParallelSource] | None = None
_EXTRA: dict[str, ParallelSource] = {}


def sources() -> dict[str, ParallelSource]:
    """Every parallel-text source by name, in display order: this package's modules, then those
    registered at runtime."""
    global _FOUND
    if _FOUND is None:
        found = {}
        for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
            source = getattr(importlib.import_module(f"{__name__}.{info.name}"), "SOURCE", None)
            if isinstance(source, ParallelSource):
                found[source.name] = source
        _FOUND = found
    merged = {**_FOUND, **_EXTRA}
    return dict(sorted(merged.items(), key=lambda kv: (kv[1].order, kv[0])))


def register(source: ParallelSource) -> ParallelSource:
    """Add a source at runtime; the CLI and the pages list it."""
    _EXTRA[source.name] = source
    return source


def unregister(name: str) -> None:
    _EXTRA.pop(name, None)


def source_of(name: str) -> ParallelSource:
    table = sources()
    if name not in table:
        raise XlvizError(f"unknown source '{name}'; use one of {', '.join(table)}", field="source")
    return table[name]


def available(data_dir: str | None = None, *, takes: tuple[str | None, ...] = (None, "run", "files")) -> list[ParallelSource]:
    """The sources readable here whose extra input is one of ``takes``."""
    return [s for s in sources().values() if s.takes in takes and s.available(data_dir)]


def parallel_data(source: str, *, run_dir=None, l2: str | None = None, lang_a: str = "en", lang_b: str | None = None,
                  limit: int | None = None, files: tuple[str, str] | None = None, data_dir=None) -> ParallelData:
    """Parallel sentences from the source named ``source`` (see :func:`sources`). ``l2`` is the
    run's L2 for a run's pairs (``lang_b`` otherwise)."""
    if limit is not None and limit < 1:
        raise XlvizError(f"must be at least 1, got {limit}", field="limit")
    src = source_of(source)
    request = Request(lang_a=lang_a, lang_b=l2 if src.takes == "run" and l2 else lang_b, limit=limit,
                      run_dir=str(run_dir) if run_dir is not None else None,
                      files=tuple(str(f) for f in files) if files else None,  # type: ignore[arg-type]
                      data_dir=str(data_dir) if data_dir is not None else None)
    return src.read(request)


def shared_folder(data_dir: str | None, folder: str) -> Path | None:
    """``data_dir`` if given, else ``<shared data>/<folder>`` (None when there is none)."""
    if data_dir is not None:
        return Path(data_dir)
    from xlviz.data.real import shared_data_dir

    root = shared_data_dir()
    return root / folder if root is not None else None


__all__ = ["ParallelData", "ParallelSource", "Request", "sources", "source_of", "register", "unregister", "available",
           "parallel_data"]
