"""The embeddings projector (as TensorBoard's): several systems' sentence vectors in one 2-D space.

Why: the Alignment page's projection shows one system; comparing systems needs them in the
same coordinates (one projection fitted on all of them), colour = system, marker = language,
the sentence on hover, a search that highlights sentences, and the nearest neighbours of a
point measured in the original vectors (the 2-D picture misplaces most neighbours). The
Alignment page and ``xlviz.views.projector`` both build it here; the numbers come from
:mod:`xlviz.analysis.projection`. Nothing here imports Streamlit.
"""

from __future__ import annotations

import os
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from xlviz.views.cache import loaded, pick_systems, spec_model
from xlviz.views.colours import chart_colours

SIDE_SYMBOLS = {"a": "circle", "b": "diamond"}  # marker per language side: A (usually L1), B
AMONG = {"system": "the same system (both languages)", "all": "all points of the projector"}


@dataclass
class Block:
    """One system's vectors of one language's sentences at one layer."""

    system: str
    language: str
    side: str  # "a" or "b": which side of the parallel set (languages may share a code)
    texts: Sequence[str]
    vectors: np.ndarray  # [n, d]

    @property
    def label(self) -> str:
        return f"{self.system} · {self.language}"


@dataclass
class Projector:
    """Points of the projector: ``rows`` one per point (``system``, ``language``, ``side``,
    ``index`` in the parallel set, ``text``, ``x``, ``y``, ``match``), ``vectors`` [N, d] their
    original vectors (row i of ``vectors`` is ``rows[i]``), ``axes`` the axis titles,
    ``left_out`` blocks that could not join (another width), ``query`` the search."""

    rows: list[dict]
    vectors: np.ndarray
    axes: tuple[str, str]
    method: str
    query: str = ""
    left_out: list[str] = field(default_factory=list)

    @property
    def matches(self) -> list[int]:
        return [i for i, r in enumerate(self.rows) if r["match"]]

    def find(self, system: str, side: str, index: int) -> int | None:
        """The point of ``system``'s sentence ``index`` on ``side``, if it is shown."""
        for i, r in enumerate(self.rows):
            if r["system"] == system and r["side"] == side and r["index"] == index:
                return i
        return None

    def translation(self, point: int) -> int | None:
        """The point holding the translation of ``point``: same system, other side, same pair."""
        r = self.rows[point]
        return self.find(r["system"], "b" if r["side"] == "a" else "a", r["index"])


def build(blocks: Sequence[Block], method: str = "pca", query: str = "", seed: int = 0) -> Projector:
    """Project ``blocks`` together (fitted on their union). Blocks whose width differs from
    the first block's are left out and named in ``left_out``. ``query``: see :func:`search`."""
    from xlviz.analysis.projection import same_width, shared_projection

    if not blocks:
        from xlviz.errors import XlvizError

        raise XlvizError("no system to project", field="systems")
    _, kept_labels, left_out = same_width({b.label: int(np.asarray(b.vectors).shape[-1]) for b in blocks})
    kept = [b for b in blocks if b.label in kept_labels]
    coords = shared_projection([b.vectors for b in kept], [b.label for b in kept], method=method.lower(), seed=seed)
    rows: list[dict] = []
    for b, xy in zip(kept, coords):
        for i, text in enumerate(b.texts):
            rows.append({"system": b.system, "language": b.language, "side": b.side, "index": i, "text": str(text),
                         "x": float(xy[i, 0]), "y": float(xy[i, 1]), "match": False})
    X = np.vstack([np.asarray(b.vectors, dtype=np.float64) for b in kept])
    if method.lower() == "pca":
        # a PC's share of the variance is its coordinates' sum of squares over the total (no second SVD)
        xy = np.vstack(coords).astype(np.float64)
        total = float(((X - X.mean(axis=0)) ** 2).sum()) or 1.0
        v1, v2 = (float((xy[:, c] ** 2).sum()) / total for c in (0, 1))
        axes = (f"PC 1 ({100 * v1:.1f}% of variance)", f"PC 2 ({100 * v2:.1f}%)")
    else:
        axes = ("UMAP 1", "UMAP 2")
    return search(Projector(rows, X, axes, method.lower(), "", left_out), query)


def search(proj: Projector, query: str) -> Projector:
    """``proj`` with ``match`` set on the points whose text contains ``query`` (ignoring case,
    taken literally); the projection is not recomputed, so typing never waits for UMAP."""
    from dataclasses import replace

    from xlviz.analysis.projection import search_mask

    hits = search_mask([r["text"] for r in proj.rows], query)
    return replace(proj, rows=[{**r, "match": bool(h)} for r, h in zip(proj.rows, hits)], query=str(query or ""))


def _candidates(proj: Projector, point: int, among: str):
    from xlviz.errors import XlvizError

    if among not in AMONG:
        raise XlvizError(f"unknown choice {among!r}; use one of {sorted(AMONG)}", field="among")
    if not 0 <= int(point) < len(proj.rows):
        raise XlvizError(f"no point {point}; there are {len(proj.rows)}", field="point")
    system = proj.rows[point]["system"]
    return None if among == "all" else np.array([r["system"] == system for r in proj.rows])


def neighbour_points(proj: Projector, point: int, k: int | None = 10, among: str = "system") -> list[int]:
    """Row numbers of the ``k`` nearest points to ``point`` (cosine in the original vectors),
    nearest first. ``among="system"``: the point's own system, both languages (does its
    translation come first?); ``"all"``: every point shown."""
    from xlviz.analysis.projection import cosine_neighbours

    return cosine_neighbours(proj.vectors, point, k, among=_candidates(proj, point, among))[0].tolist()


def neighbours(proj: Projector, point: int, k: int | None = 10, among: str = "system") -> list[dict]:
    """:func:`neighbour_points` as table rows: ``rank``, ``system``, ``language``, ``sentence``
    (its number in the parallel set), ``text``, ``cosine``, ``translation`` (True for the
    point's own translation)."""
    from xlviz.analysis.projection import cosine_neighbours

    idx, sims = cosine_neighbours(proj.vectors, point, k, among=_candidates(proj, point, among))
    tr = proj.translation(point)
    return [{"rank": n + 1, "system": proj.rows[j]["system"], "language": proj.rows[j]["language"],
             "sentence": proj.rows[j]["index"], "text": proj.rows[j]["text"], "cosine": float(s),
             "translation": bool(j == tr)} for n, (j, s) in enumerate(zip(idx.tolist(), sims.tolist()))]


def translation_rank(proj: Projector, point: int, among: str = "system") -> tuple[int, int, float] | None:
    """Where the translation of ``point`` ranks among its candidates (1 = nearest): ``(rank,
    candidates, cosine)``; None when the translation is not shown."""
    from xlviz.analysis.projection import cosine_neighbours

    tr = proj.translation(point)
    if tr is None:
        return None
    idx, sims = cosine_neighbours(proj.vectors, point, None, among=_candidates(proj, point, among))
    pos = int(np.flatnonzero(idx == tr)[0])
    return pos + 1, len(idx), float(sims[pos])


def point_label(row: dict, width: int = 60) -> str:
    """A point as a picker shows it: ``system · language #i: text`` (plain text)."""
    text = row["text"] if len(row["text"]) <= width else row["text"][: width - 1] + "…"
    return f"{row['system']} · {row['language']} #{row['index']}: {text}"


def _hover(row: dict) -> str:
    from xlviz.views.text import plot_text

    body = "<br>".join(plot_text(line) for line in textwrap.wrap(row["text"], 70)) or "(empty)"
    return f"<b>{plot_text(row['system'])} · {plot_text(row['language'])} #{row['index']}</b><br>{body}"


def figure(proj: Projector, colours: dict[str, str] | None = None, title: str = "", selected: int | None = None,
           near: Sequence[int] = ()):
    """The projector's scatter: colour = system, marker = language (circle: side A, diamond:
    side B), hover = the sentence (as text). Search matches get a ring (the rest fades),
    ``selected`` a star with a dotted line to its translation, ``near`` (its neighbours) a
    black ring. Every point carries its row number as ``customdata`` so a click selects it."""
    import plotly.graph_objects as go

    from xlviz.views.text import plot_text
    from xlviz.views.figures import PALETTE

    colours = dict(colours or {})
    systems = list(dict.fromkeys(r["system"] for r in proj.rows))
    for s in systems:
        colours.setdefault(s, PALETTE[len(colours) % len(PALETTE)])
    searching = bool(proj.query.strip()) and bool(proj.matches)
    fig = go.Figure()
    groups: dict[tuple, list[int]] = {}
    for i, r in enumerate(proj.rows):
        groups.setdefault((r["system"], r["side"], r["language"]), []).append(i)
    for (system, side, language), idx in groups.items():
        fig.add_trace(go.Scattergl(
            x=[proj.rows[i]["x"] for i in idx], y=[proj.rows[i]["y"] for i in idx], mode="markers",
            name=f"{plot_text(system)} · {plot_text(language)}", legendgroup=plot_text(system), customdata=idx,
            marker=dict(size=8, color=colours[system], symbol=SIDE_SYMBOLS.get(side, "circle"),
                        opacity=0.3 if searching else 0.8, line=dict(width=0)),
            text=[_hover(proj.rows[i]) for i in idx], hovertemplate="%{text}<extra></extra>"))

    def overlay(idx: list[int], name: str, marker: dict) -> None:
        fig.add_trace(go.Scattergl(
            x=[proj.rows[i]["x"] for i in idx], y=[proj.rows[i]["y"] for i in idx], mode="markers", name=name,
            customdata=idx, marker=marker, text=[_hover(proj.rows[i]) for i in idx], hovertemplate="%{text}<extra></extra>"))

    if searching:
        overlay(proj.matches, f"contains “{plot_text(proj.query.strip())}” ({len(proj.matches)})",
                dict(size=15, symbol="circle-open", color="#e6a700", line=dict(width=2.5, color="#e6a700")))
    if near:
        overlay(list(near), "nearest neighbours", dict(size=13, symbol="circle-open", color="#222222",
                                                      line=dict(width=1.5, color="#222222")))
    if selected is not None and 0 <= selected < len(proj.rows):
        tr = proj.translation(selected)
        if tr is not None:
            fig.add_trace(go.Scattergl(x=[proj.rows[selected]["x"], proj.rows[tr]["x"]],
                                       y=[proj.rows[selected]["y"], proj.rows[tr]["y"]], mode="lines",
                                       line=dict(color="#555555", width=1.5, dash="dot"), hoverinfo="skip",
                                       name="its translation"))
        overlay([selected], "selected", dict(size=18, symbol="star", color=colours[proj.rows[selected]["system"]],
                                             line=dict(width=1.5, color="#000000")))
    fig.update_layout(title=title, height=600, margin=dict(t=50, b=10, l=10, r=10), legend_title_text="",
                      clickmode="event+select", dragmode="pan")
    fig.update_xaxes(showticklabels=False, title=proj.axes[0])
    fig.update_yaxes(showticklabels=False, scaleanchor="x", scaleratio=1, title=proj.axes[1])
    return fig


def clicked_point(selection) -> int | None:
    """The row number of the point a ``st.plotly_chart(on_select=...)`` selection holds (its
    first point's ``customdata``), or None."""
    try:
        points = selection["points"]
    except (KeyError, TypeError):
        return None
    for p in points or []:
        cd = p.get("customdata") if isinstance(p, dict) else None
        if isinstance(cd, list):
            cd = cd[0] if cd else None
        if isinstance(cd, (int, float)) and not isinstance(cd, bool):
            return int(cd)
    return None


def coinciding(blocks: Sequence[Block]) -> list[list[str]]:
    """Groups of blocks with identical vectors (systems that read a language with one encoder,
    e.g. the L1 side of every MONOTRANS system): their points lie on each other, the last
    drawn hides the others, and the reader needs telling."""
    groups: list[list[Block]] = []
    for b in blocks:
        for g in groups:
            v = np.asarray(g[0].vectors)
            if g[0].side == b.side and v.shape == np.asarray(b.vectors).shape and np.array_equal(v, b.vectors):
                g.append(b)
                break
        else:
            groups.append([b])
    return [[b.label for b in g] for g in groups if len(g) > 1]


# --------------------------------------------------------------------------- the notebook's projector
@dataclass
class ProjectorView:
    """The Alignment page's projector: ``figure`` (plotly: colour = system, marker = language,
    search matches ringed, the selected point starred with its neighbours ringed), ``points``
    (one row per point: system, language, sentence, text, x, y, match), ``neighbours`` (the
    selected point's nearest points by cosine in the original vectors; ``translation`` marks
    its own translation). ``neighbours_of(point)`` asks for another point."""

    figure: Any
    points: Any
    neighbours: Any
    point: int
    data: Any = field(repr=False, default=None)

    def neighbours_of(self, point, k: int = 10, among: str = "system"):
        """Neighbours of ``point``: a row number of ``points`` or ``(system, language, sentence)``."""
        import pandas as pd

        return pd.DataFrame(neighbours(self.data, _projector_point(self.data, point), k, among))


def _projector_point(proj, point) -> int:
    from xlviz.errors import XlvizError

    if point is None:
        return 0
    if isinstance(point, int) and not isinstance(point, bool):
        if not 0 <= point < len(proj.rows):
            raise XlvizError(f"no point {point}; there are {len(proj.rows)}", field="point")
        return point
    try:
        system, language, index = point
    except (TypeError, ValueError):
        raise XlvizError(f"a point is a row number or (system, language, sentence), got {point!r}", field="point") from None
    for i, r in enumerate(proj.rows):
        if system in (r["system"], r["system"].rsplit(" · ", 1)[-1]) and r["language"] == language and r["index"] == index:
            return i
    raise XlvizError(f"no point {point!r} in the projector", field="point")


def _two_sides(value) -> tuple:
    """A model for each language: ``(model_a, model_b)`` given as two folders (or two loaded
    pairs), else one model reading both languages (a folder, or a ``(model, tokenizer)`` pair)."""
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], (str, os.PathLike, tuple)):
        return value
    return value, value


def projector(run_or_models, lang: str, systems: Sequence[str] | None = None, *, sentences=None, lang_a: str = "en",
              layer: int = -1, method: str = "pca", n: int = 150, query: str = "", point=None, k: int = 10,
              among: str = "system", pooling: str = "mean", max_length: int = 128) -> ProjectorView:
    """Several systems' sentence vectors of one parallel set in one 2-D space (the Alignment
    page's projector), with a search (``query``: case ignored, literal text) and the nearest
    neighbours of ``point`` (cosine in the original vectors).

    ``run_or_models``: a run folder (its L1-``lang`` parallel pairs, its systems; ``systems``
    picks some by name) or a dict ``{name: model or (model_a, model_b)}`` with ``sentences=
    (texts_a, texts_b)`` (line i translates line i; ``lang_a`` names side A). All systems need
    one hidden size; others are left out (``points`` does not have them; the figure title says so).
    """
    import pandas as pd

    from xlviz.analysis.representations import sentence_embeddings
    from xlviz.errors import XlvizError
    from xlviz.views.figures import tidy

    encoders = []  # (name, (model, tok) of side A, (model, tok) of side B)
    if isinstance(run_or_models, dict):
        if sentences is None or len(sentences) != 2:
            raise XlvizError("models need sentences=(texts_a, texts_b), the parallel set to project", field="sentences")
        src, tgt = list(sentences[0])[:n], list(sentences[1])[:n]
        if len(src) != len(tgt) or not src:
            raise XlvizError(f"sentences: {len(src)} and {len(tgt)} lines; both sides need the same number (> 0)",
                             field="sentences")
        names = list(systems) if systems is not None else list(run_or_models)
        for name in names:
            if name not in run_or_models:
                raise XlvizError(f"no model {name!r}; there are {sorted(run_or_models)}", field="systems")
            a, b = _two_sides(run_or_models[name])
            encoders.append((str(name), lambda a=a: loaded(a), lambda b=b: loaded(b)))
        la, lb = lang_a, lang
    else:
        from xlviz.analysis.reports import parallel_data

        run = str(Path(run_or_models).expanduser())
        chosen = pick_systems(run, lang, systems)
        data = parallel_data("world", run_dir=run, l2=lang, lang_b=lang, limit=n)
        src, tgt, la, lb = list(data.src), list(data.tgt), data.lang_a, data.lang_b
        encoders = [(s.name, lambda s=s: spec_model(s.a), lambda s=s: spec_model(s.b)) for s in chosen]
    blocks, layers = [], []
    for name, load_a, load_b in encoders:
        ea = sentence_embeddings(*load_a(), src, pooling=pooling, max_length=max_length)
        eb = sentence_embeddings(*load_b(), tgt, pooling=pooling, max_length=max_length)
        layers.append(min(ea.shape[0], eb.shape[0]))
        blocks.append((name, ea, eb))
    n_layers = min(layers)
    if not -n_layers <= layer < n_layers:
        raise XlvizError(f"no layer {layer}; the systems have layers 0 to {n_layers - 1}", field="layer")
    layer = layer % n_layers
    proj = build([b for name, ea, eb in blocks for b in (Block(name, la, "a", src, ea[layer]), Block(name, lb, "b", tgt, eb[layer]))],
                 method=method, query=query)
    chosen_point = _projector_point(proj, point)
    near = neighbour_points(proj, chosen_point, k, among)
    label = "PCA" if proj.method == "pca" else "UMAP"
    title = f"{len(blocks)} system{'s' if len(blocks) > 1 else ''} · layer {layer} · {label} of sentences"
    if proj.left_out:
        from xlviz.views.text import plot_text

        title += f" (left out, another width: {plot_text(', '.join(proj.left_out))})"
    fig = tidy(figure(proj, chart_colours([name for name, _, _ in blocks]), title, selected=chosen_point, near=near))
    points = pd.DataFrame([{"system": r["system"], "language": r["language"], "sentence": r["index"], "text": r["text"],
                            "x": r["x"], "y": r["y"], "match": r["match"]} for r in proj.rows])
    return ProjectorView(fig, points, pd.DataFrame(neighbours(proj, chosen_point, k, among)), chosen_point, proj)
