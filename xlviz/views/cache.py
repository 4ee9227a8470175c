"""The models the notebook views read, loaded once per process, and a run's systems picked by name.

Why one module: every view (attention, alignment, XQuAD, the projector, salience, renderings)
takes a model as a folder, a hub id or a loaded ``(model, tokenizer)`` pair, and a notebook
calls several views on one model; each folder is loaded once (an LRU cache keyed by the
folder's files, so a retrained folder is read again), each ``ModelSpec`` of a run once
(:func:`xlviz.models.reference.load_spec`, the pages' loader: floors included). Nothing here
imports Streamlit.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any, Sequence


def _stamp(path: str) -> tuple:
    p = Path(path).expanduser()
    try:
        return tuple((f.name, f.stat().st_mtime_ns, f.stat().st_size) for f in sorted(p.iterdir()) if f.is_file())
    except OSError:
        return ()


@functools.lru_cache(maxsize=8)
def _load_cached(path: str, tokenizer: str | None, task: str, stamp: tuple):
    from xlviz.models.loading import load_model

    # new_head="ok" for QA, as the app: a folder without a QA head still answers
    model, tok = load_model(os.path.expanduser(path), task=task, attn_implementation="eager",
                            tokenizer=os.path.expanduser(tokenizer) if tokenizer else None,
                            new_head="ok" if task == "qa" else None)
    model.eval()
    return model, tok


def loaded(model: Any, tokenizer: str | os.PathLike | None = None, task: str = "base"):
    """``(model, tokenizer)`` from a folder / hub id, or a pair given as is."""
    if isinstance(model, tuple) and len(model) == 2:
        return model
    path = str(model)
    return _load_cached(path, str(tokenizer) if tokenizer else None, task, _stamp(path))


def spec_model(spec, task: str = "base"):
    """``xlviz.models.reference.load_spec`` (the pages' loader: floors included), cached."""
    return _spec_cached(spec, task, spec.stamp())


@functools.lru_cache(maxsize=8)
def _spec_cached(spec, task: str, stamp: str):
    from xlviz.models.reference import load_spec

    model, tok = load_spec(spec, task)
    model.eval()
    return model, tok


def layer_index(layer: object, n: int, what: str = "the model") -> int:
    """``layer`` as an index in ``range(n)`` (negative counts from the top), else one
    XlvizError: a layer the model does not have is never wrapped around onto one it has."""
    from xlviz.errors import XlvizError

    if isinstance(layer, bool) or not isinstance(layer, int) or not -n <= layer < n:
        raise XlvizError(f"no layer {layer!r}; {what} has layers 0 to {n - 1} (negative counts from the top)", field="layer")
    return layer % n


def pick_systems(run, l2: str, systems: Sequence[str] | None):
    """The run's systems for ``l2`` (:func:`xlviz.analysis.reports.run_systems`), only those named
    in ``systems`` (their short names: ``["monotrans", "floor"]``) when given, in that order."""
    from xlviz.analysis.reports import run_systems
    from xlviz.errors import XlvizError

    found = run_systems(run, l2)
    if systems is None:
        return found
    by_short = {s.name.rsplit(" · ", 1)[-1]: s for s in found}
    missing = [s for s in systems if s not in by_short]
    if missing:
        raise XlvizError(f"no system {missing[0]!r} for {l2} in this run; it has {sorted(by_short)}", path=run, field="systems")
    return [by_short[s] for s in systems]


__all__ = ["loaded", "spec_model", "layer_index", "pick_systems"]
