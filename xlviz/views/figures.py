"""The figures the app's pages draw, built without Streamlit.

Why here: the pages (through ``xlviz.ui``) and the notebook API (:mod:`xlviz.views`) call these
very functions, so a figure in a notebook is the figure on the page. Nothing here imports
Streamlit, and nothing computes a metric: the numbers come from ``xlviz.analysis``.
"""

from __future__ import annotations

from collections.abc import Sequence

from typing import Any

import numpy as np

LANG_COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]
# One clearly different colour per system/model (Streamlit's theme would give near-identical blues).
PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]


def tidy(fig):
    """Plot hygiene shared by every chart: titles left (clear of the toolbar at the right),
    room for them, axis labels that grow their margins instead of being cut."""
    title = fig.layout.title.text if fig.layout.title else None
    if title:
        top = fig.layout.margin.t if fig.layout.margin and fig.layout.margin.t is not None else 0
        fig.update_layout(title=dict(x=0.01, xanchor="left"), margin=dict(t=max(top, 56)))
    fig.update_xaxes(automargin=True)
    fig.update_yaxes(automargin=True)
    return fig


DASHES = ["solid", "dot", "dash", "longdash", "dashdot", "longdashdot"]  # plotly express's order


def layer_lines(rows: list[dict], y: str, title: str, *, percent: bool = True, color: str = "system",
                dash: str | None = None, y_label: str | None = None, baseline: float | None = None,
                colours: dict[str, str] | None = None):
    """A line chart over layers, one line per ``color`` (and ``dash``) value; ``colours``: a
    fixed colour per ``color`` value (the app-wide system colours), else the palette in order.
    Colour = system, dash = language (or direction): one system in two languages is two
    lines that can be told apart.

    Built with graph objects, not plotly express: ``px.line`` took 0.4 s a chart (its import
    and its data-frame machinery), a third of the Alignment page's render; the traces are the
    ones px drew (names ``"<colour value>, <dash value>"``, px's dash order)."""
    import plotly.graph_objects as go

    rows = [r for r in rows if r.get(y) is not None and r.get(y) == r.get(y)]  # drop None and NaN
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r.get(color), r.get(dash) if dash else None), []).append(r)
    colour_of: dict = dict(colours or {})  # px's rule: a new value takes PALETTE[number of colours known]
    dash_of: dict = {}
    y_title = y_label or y
    fig = go.Figure()
    for (c, d), members in groups.items():
        if c not in colour_of:
            colour_of[c] = PALETTE[len(colour_of) % len(PALETTE)]
        if d not in dash_of:
            dash_of[d] = DASHES[len(dash_of) % len(DASHES)]
        name = f"{c}, {d}" if dash else f"{c}"
        ys = [100 * float(r[y]) if percent else r[y] for r in members]
        hover = f"{color}={c}<br>" + (f"{dash}={d}<br>" if dash else "") + "layer=%{x}<br>" + f"{y_title}=%{{y}}<extra></extra>"
        fig.add_trace(go.Scatter(x=[r["layer"] for r in members], y=ys, mode="lines+markers", name=name,
                                 legendgroup=name, showlegend=True, hovertemplate=hover,
                                 line=dict(color=colour_of[c], dash=dash_of[d]), marker=dict(symbol="circle")))
    fig.update_layout(title=dict(text=title), template="plotly")
    fig.update_xaxes(dtick=1, title_text="layer (0 = embeddings)")
    fig.update_yaxes(title_text=y_title)
    if percent:
        fig.update_yaxes(range=[-2, 102])
    if baseline is not None:
        fig.add_hline(y=100 * baseline if percent else baseline, line_dash="dot", line_color="gray",
                      annotation_text="majority class", annotation_position="bottom right")
    # the legend below the plot: at the right it took half the width of a two-column layout
    fig.update_layout(margin=dict(t=50, l=10, r=10))
    return legend_below(fig, [t.name for t in fig.data if t.showlegend is not False], height=420)


LEGEND_ROW_PX, AXIS_PX = 24, 64  # one row of a horizontal legend; x tick labels and the x-axis title under the plot


def legend_rows(names: Sequence[str], width: int = 560) -> int:
    """Rows a horizontal legend of ``names`` takes at ``width`` pixels (about 7 px a character
    plus the symbol and gap; ``width``: a narrow column, so a wide one gets spare room, never overlap)."""
    rows, used = 1, 0
    for name in names:
        w = 7 * len(str(name)) + 48
        if used and used + w > width:
            rows, used = rows + 1, 0
        used += w
    return rows


def legend_below(fig, names: Sequence[str], height: int = 420):
    """A horizontal legend under the x-axis title that never covers it, however many entries:
    placed in the figure's own coordinates (``yref="container"``) just under the x-axis title,
    with the bottom margin made room for its rows plus the axis below the plot, and the figure
    as much taller. (At a paper
    position such as ``y=-0.2`` a legend of many rows shrank the plot until it sat on the
    x-axis title: eight systems on the Alignment page.)"""
    legend_px = LEGEND_ROW_PX * legend_rows(names) + 8
    total = height + legend_px
    # its top just under the axis title: rows fewer than estimated leave room at the bottom, not a gap
    fig.update_layout(legend=dict(title_text="", orientation="h", yref="container", yanchor="top", y=legend_px / total,
                                  x=0, xanchor="left"),
                      margin=dict(b=AXIS_PX + legend_px), height=total)
    return fig


def explained_variance(points_a: np.ndarray, points_b: np.ndarray) -> tuple[float, float]:
    """Share of the variance (0..1) along the first two principal axes of both languages'
    points together: how much of the picture a 2-D PCA shows."""
    X = np.vstack([np.asarray(points_a, dtype=np.float64), np.asarray(points_b, dtype=np.float64)])
    S = np.linalg.svd(X - X.mean(axis=0), compute_uv=False) ** 2
    total = float(S.sum()) or 1.0
    return (float(S[0]) / total if len(S) > 0 else 0.0), (float(S[1]) / total if len(S) > 1 else 0.0)


def projection_figure(rows: list[dict], title: str, lines: bool = True, axes: tuple[str, str] | None = None):
    """Scatter of projected points coloured by language, with grey lines between translations.

    SVG traces, not WebGL: the Alignment page's 750 points drew in 0.28 s as SVG and 0.73 s as
    WebGL in headless Chromium (``bench/bench_plotly_webgl.py``: setting up a WebGL context costs
    more than drawing a few hundred SVG markers), on every visit that shows this figure."""
    import plotly.graph_objects as go

    fig = go.Figure()
    if lines:
        ends: dict[int, list[dict]] = {}
        for r in rows:
            if r["pair"] is not None:
                ends.setdefault(r["pair"], []).append(r)
        xs: list[Any] = []
        ys: list[Any] = []
        for pts in ends.values():
            if len(pts) >= 2:
                xs += [pts[0]["x"], pts[1]["x"], None]
                ys += [pts[0]["y"], pts[1]["y"], None]
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line=dict(color="rgba(120,120,120,0.35)", width=1),
                                   hoverinfo="skip", name="translation", showlegend=True))
    langs = list(dict.fromkeys(r["language"] for r in rows))
    for k, lang in enumerate(langs):
        pts = [r for r in rows if r["language"] == lang]
        fig.add_trace(go.Scatter(
            x=[r["x"] for r in pts], y=[r["y"] for r in pts], mode="markers", name=lang,
            marker=dict(size=7, color=LANG_COLOURS[k % len(LANG_COLOURS)], opacity=0.8),
            text=[_wrap(r["text"]) for r in pts], hovertemplate="%{text}<extra>" + lang + "</extra>"))
    fig.update_layout(title=title, height=520, margin=dict(t=50, b=10, l=10, r=10), legend_title_text="")
    fig.update_xaxes(showticklabels=False, title=axes[0] if axes else None)
    fig.update_yaxes(showticklabels=False, scaleanchor="x", scaleratio=1, title=axes[1] if axes else None)
    return fig


def _wrap(text: str, width: int = 70) -> str:
    words, lines, line = text.split(), [], ""
    for w in words:
        if len(line) + len(w) + 1 > width and line:
            lines.append(line)
            line = w
        else:
            line = f"{line} {w}".strip()
    lines.append(line)
    return "<br>".join(lines)


# --------------------------------------------------------------------------- the Alignment page's charts
def direction_labels(lang_a: str, lang_b: str) -> tuple[str, str]:
    """The two retrieval directions as the charts name them (``"en → sov"``, ``"sov → en"``)."""
    return f"{lang_a} → {lang_b}", f"{lang_b} → {lang_a}"


def retrieval_long(rows: list[dict], lang_a: str, lang_b: str) -> list[dict]:
    """Alignment rows (one per system and layer) as one row per direction: what the retrieval
    chart draws, a dashed line per direction. Systems without cosine retrieval (different
    hidden sizes) give no rows."""
    ab, ba = direction_labels(lang_a, lang_b)
    return [{"system": r["system"], "layer": r["layer"], "direction": d, "retrieval": r[k]}
            for r in rows for d, k in ((ab, "retrieval_a_to_b"), (ba, "retrieval_b_to_a")) if r.get(k) is not None]


def retrieval_figure(long_rows: list[dict], colours: dict[str, str] | None = None):
    """Sentence retrieval accuracy per layer (``long_rows`` from :func:`retrieval_long`)."""
    return layer_lines(long_rows, "retrieval", "Sentence retrieval accuracy (nearest neighbour is the translation)",
                       dash="direction", y_label="accuracy (%)", colours=colours)


def cka_figure(rows: list[dict], colours: dict[str, str] | None = None):
    """Linear CKA between the two languages' sentence vectors per layer."""
    return layer_lines(rows, "cka", "Linear CKA between the two languages' sentence vectors", percent=False,
                       y_label="linear CKA", colours=colours)


def projection_axes(method: str, points_a: np.ndarray, points_b: np.ndarray) -> tuple[str, str]:
    """Axis titles of a projection: PCA's share of the variance per axis, else the method's name."""
    if method.lower() == "pca":
        v1, v2 = explained_variance(points_a, points_b)
        return f"PC 1 ({100 * v1:.1f}% of variance)", f"PC 2 ({100 * v2:.1f}%)"
    return "UMAP 1", "UMAP 2"
