"""The alignment view in a notebook: a run's retrieval and CKA charts per layer and its
projection, as the Alignment page draws them (:mod:`xlviz.views.figures`), from the numbers of
:func:`xlviz.analysis.reports.alignment_report`. A run's rows are computed once per process
for a set of settings (an LRU cache keyed by the run's ``status.json``, so a run that goes on
is read again). The projector (several systems in one space) is :mod:`xlviz.views.embeddings`'s.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Sequence

from xlviz.views.cache import layer_index, pick_systems, spec_model
from xlviz.views.colours import chart_colours


def _run_stamp(run) -> str:
    p = Path(run) / "status.json"
    try:
        return str(p.stat().st_mtime_ns)
    except OSError:
        return ""


def _alignment_rows(run, l2: str, systems, pooling: str, limit: int | None, max_length: int, center: bool):
    return _alignment_cached(str(Path(run).expanduser()), l2, tuple(systems) if systems is not None else None, pooling,
                             limit, int(max_length), bool(center), _run_stamp(Path(run).expanduser()))


@functools.lru_cache(maxsize=8)
def _alignment_cached(run: str, l2: str, systems: tuple | None, pooling: str, limit: int | None, max_length: int,
                      center: bool, stamp: str):
    """Rows of ``xlviz.analysis.reports.alignment_report`` (the page's numbers) and the data."""
    from xlviz.analysis.reports import alignment_report, parallel_data

    chosen = pick_systems(run, l2, systems)
    data = parallel_data("world", run_dir=run, l2=l2, lang_b=l2, limit=limit)
    rows = alignment_report(chosen, data, pooling=pooling, center=center, words=False, max_length=max_length, loader=spec_model)
    return rows, data, chosen


def retrieval(run: str | os.PathLike, l2: str, systems: Sequence[str] | None = None, *, pooling: str = "mean",
              limit: int | None = 500, max_length: int = 128, center: bool = False):
    """The Alignment page's retrieval chart for a run's L1-``l2`` parallel pairs: per layer, how
    often a sentence's nearest neighbour (cosine) in the other language is its translation, both
    directions. ``systems``: the run's systems by name (``["monotrans", "floor"]``), default all."""
    from xlviz.views.figures import retrieval_figure, retrieval_long, tidy

    rows, data, chosen = _alignment_rows(run, l2, systems, pooling, limit, max_length, center)
    long_rows = retrieval_long(rows, data.lang_a, data.lang_b)
    return tidy(retrieval_figure(long_rows, chart_colours([s.name for s in chosen])))


def cka(run: str | os.PathLike, l2: str, systems: Sequence[str] | None = None, *, pooling: str = "mean",
        limit: int | None = 500, max_length: int = 128):
    """The Alignment page's linear CKA chart (L1 vs ``l2`` sentence vectors, per layer)."""
    from xlviz.views.figures import cka_figure, tidy

    rows, _, chosen = _alignment_rows(run, l2, systems, pooling, limit, max_length, False)
    return tidy(cka_figure(rows, chart_colours([s.name for s in chosen])))


def projection(run: str | os.PathLike, l2: str, system: str | None = None, *, layer: int = -1, method: str = "pca",
               n: int = 150, pooling: str = "mean", max_length: int = 128):
    """The Alignment page's projection: the first ``n`` parallel sentences of both languages at
    one layer, projected together (``"pca"`` or ``"umap"``), lines joining translations."""
    from xlviz.analysis.reports import parallel_data, translation_projection
    from xlviz.analysis.representations import sentence_embeddings
    from xlviz.views.figures import projection_axes, projection_figure, tidy

    run = str(Path(run).expanduser())
    chosen = pick_systems(run, l2, [system] if system else None)[0]
    data = parallel_data("world", run_dir=run, l2=l2, lang_b=l2, limit=n)
    ma, ta = spec_model(chosen.a)
    mb, tb = spec_model(chosen.b)
    ea = sentence_embeddings(ma, ta, data.src, pooling=pooling, max_length=max_length)
    eb = sentence_embeddings(mb, tb, data.tgt, pooling=pooling, max_length=max_length)
    layer = layer_index(layer, min(ea.shape[0], eb.shape[0]), "these vectors (0: the embeddings)")
    pa, pb = ea[layer], eb[layer]
    pts = translation_projection(pa, pb, list(data.src), list(data.tgt), data.lang_a, data.lang_b, None, method=method.lower())
    label = "PCA" if method.lower() == "pca" else "UMAP"
    return tidy(projection_figure(pts, f"{chosen.name} · layer {layer} · {label} of sentences",
                                  axes=projection_axes(method, pa, pb)))


__all__ = ["retrieval", "cka", "projection"]
