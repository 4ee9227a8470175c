"""The attention view without Streamlit: parallel-pair sources, heatmaps, the model view
(layer × head thumbnails, labelled and clickable), the neuron view (query × key), VECO-style
share matrices and CSV export, for the Attention page; and the notebook's :func:`head_view`,
:func:`model_view`, :func:`cross_language_attention` and :func:`neuron_view`, drawn with the
same figure functions (a notebook and the page never disagree).

Only the layers/heads the page asks for are turned into figures (``attention_slice``), so the
full [layers, heads, T, T] tensor never goes to the browser.
"""

from __future__ import annotations

import html
import io
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from xlviz.errors import XlvizError
from xlviz.views.cache import layer_index, loaded
from xlviz.views.text import HTML

SEGMENT_COLOURS = {0: "#0072B2", 1: "#D55E00", -1: "#888888"}
OVERVIEW_MAX_TOKENS = 40  # thumbnails are pooled down to this many tokens per side


@dataclass
class Pair:
    """A parallel pair to look at. ``words_*`` are pre-split words when the gold alignment
    refers to word indices; ``alignment`` holds (word in a, word in b) pairs."""

    id: str
    lang_a: str
    lang_b: str
    text_a: str
    text_b: str
    words_a: list[str] | None = None
    words_b: list[str] | None = None
    alignment: list[tuple[int, int]] = field(default_factory=list)

    def input_a(self):
        return self.words_a if self.words_a and self.words_b else self.text_a

    def input_b(self):
        return self.words_b if self.words_a and self.words_b else self.text_b


# --- sources ------------------------------------------------------------------------------------

def world_parallel_files(run_path: str | Path) -> dict[str, Path]:
    """``{l2: world/parallel/en-<l2>.jsonl}`` of a run (:func:`xlviz.runs.parallel_files`)."""
    from xlviz.runs import parallel_files

    return parallel_files(run_path)


TYPED_DEFAULTS = {"en": "The cat sits on the mat.", "de": "Die Katze sitzt auf der Matte.",
                  "fr": "Le chat est assis sur le tapis.", "es": "El gato está sentado en la alfombra."}


def typed_default(lang: str, run_paths: list[Path] | None = None) -> str:
    """A sentence in ``lang`` to start the typed pair with: a known one for a few real
    languages, else the first sentence of a generated world's parallel file in that language
    (its invented L2), else empty (the user types one): never another language's text under
    this language's label."""
    if lang in TYPED_DEFAULTS:
        return TYPED_DEFAULTS[lang]
    for run_path in run_paths or []:
        file = world_parallel_files(run_path).get(lang)
        if file is not None:
            try:
                pairs = read_world_pairs(file, limit=1)
            except XlvizError:
                continue
            if pairs:
                return pairs[0].text_b
    return ""


# a typed text read mostly as [UNK] or as single characters says little about the model
UNK_WARN = 0.05
CHARS_PER_TOKEN_WARN = 1.6


def text_stats(tokenizer, text: str) -> dict:
    """How a tokenizer reads a typed text: tokens, [UNK] share, characters per token (spaces
    not counted) and the share of one-character tokens; low characters-per-token means the
    text is shredded into characters (a script or language the vocabulary does not know)."""
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    tokens = tokenizer.convert_ids_to_tokens(ids)
    unk = getattr(tokenizer, "unk_token_id", None)
    chars = len("".join(text.split()))
    pieces = [t.replace("##", "").replace("\u2581", "").replace("Ġ", "") for t in tokens]
    n = len(ids)
    return {"tokens": n, "unk_rate": (sum(i == unk for i in ids) / n) if n and unk is not None else 0.0,
            "chars_per_token": chars / n if n else 0.0,
            "single_char_share": sum(len(p) <= 1 for p in pieces) / n if n else 0.0}


def text_stats_warning(stats: dict) -> str | None:
    """One sentence when a typed text is read badly (many [UNK], or shredded), else None."""
    if stats["tokens"] and stats["unk_rate"] >= UNK_WARN:
        return f"{stats['unk_rate']:.0%} of its tokens are [UNK]: the tokenizer does not know this text's characters"
    if stats["tokens"] and stats["chars_per_token"] < CHARS_PER_TOKEN_WARN:
        return (f"shredded into characters ({stats['chars_per_token']:.1f} characters per token): the tokenizer "
                "does not know this language; its attention says little")
    return None


def read_world_pairs(path: str | Path, limit: int | None = 500) -> list[Pair]:
    """Pairs of a generated world's ``en-<l2>.jsonl`` (fields id, src, tgt, src_words, tgt_words, alignment)."""
    path = Path(path)
    from xlviz.runs import parallel_languages

    lang_a, lang_b = parallel_languages(path)
    out = []
    from xlviz import confined, limits

    # a run folder's file: regular, inside the run folder, bounded (xlviz.confined)
    rows = confined.read_jsonl(path, root=path.parents[2], max_bytes=limits.METRICS_MAX_BYTES, what="parallel pairs")
    for i, row in enumerate(rows):
        if limit is not None and i >= limit:
            break
        if not isinstance(row, dict) or "src" not in row or "tgt" not in row:
            raise XlvizError("expected fields 'src' and 'tgt'", path=path, field=f"line {i + 1}")
        out.append(Pair(
            id=str(row.get("id", i)), lang_a=lang_a, lang_b=lang_b, text_a=row["src"], text_b=row["tgt"],
            words_a=row.get("src_words"), words_b=row.get("tgt_words"),
            alignment=[(int(a), int(b)) for a, b in row.get("alignment") or []],
        ))
    return out


def pairs_of(data) -> list[Pair]:
    """The pairs of a :class:`xlviz.data.parallel.ParallelData` (any source of the registry)."""
    return [Pair(i, data.lang_a, data.lang_b, a, b) for i, a, b in zip(data.ids, data.src, data.tgt)]


# --- figures ----------------------------------------------------------------------------------

def _tick(tok: str, seg: int) -> str:
    return f"<span style='color:{SEGMENT_COLOURS.get(seg, '#888')}'>{html.escape(tok)}</span>"


def heatmap(attn: np.ndarray, tokens: list[str], segment: list[int], title: str, height: int | None = None,
            marks: list[tuple[int, int]] | None = None):
    """One attention map [T, T] (rows = queries) with tokens coloured by sentence; ``marks``:
    (query, key) cells outlined (a gold word alignment's, :func:`aligned_cells`)."""
    import plotly.graph_objects as go

    T = len(tokens)
    ticks = [_tick(t, s) for t, s in zip(tokens, segment)]
    hover = [[f"{tokens[q]} → {tokens[k]}: {attn[q, k]:.3f}" for k in range(T)] for q in range(T)]
    fig = go.Figure(go.Heatmap(z=attn, x=list(range(T)), y=list(range(T)), colorscale="Blues", zmin=0,
                               zmax=float(np.nanmax(attn)) if attn.size else 1.0, hoverinfo="text", text=hover,
                               colorbar=dict(thickness=10)))
    fig.update_xaxes(tickmode="array", tickvals=list(range(T)), ticktext=ticks, tickangle=-60, side="top")
    fig.update_yaxes(tickmode="array", tickvals=list(range(T)), ticktext=ticks, autorange="reversed")
    for b in _boundaries(segment):  # lines between the two sentences
        fig.add_vline(x=b - 0.5, line_color="#D55E00", line_width=1)
        fig.add_hline(y=b - 0.5, line_color="#D55E00", line_width=1)
    for q, k in marks or ():  # added to the separators (a new shapes list would update theirs in place)
        fig.add_shape(type="rect", x0=k - 0.5, x1=k + 0.5, y0=q - 0.5, y1=q + 0.5, xref="x", yref="y",
                      line=dict(color="#009E73", width=1.5))
    size = height or int(min(900, max(360, 14 * T + 160)))
    # the second line as plotly's subtitle: a "<br><sup>" line pushed the title above the figure's top edge
    fig.update_layout(title=dict(text=html.escape(title), subtitle=dict(text="rows: queries · columns: keys"), x=0.5,
                                 yref="container", y=0.99, yanchor="top",
                                 font=dict(size=13)), height=size,
                      margin=dict(l=10, r=10, t=110, b=10))
    return fig


def aligned_cells(segment: list[int], word_ids: list[int | None], alignment: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The (query, key) cells of a pair's map where a token of word i of sentence a meets a
    token of word j of sentence b, for each aligned (i, j), both ways (``segment`` and
    ``word_ids`` as :class:`xlviz.analysis.attention.AttentionSlice` has them)."""
    pairs = set(alignment)
    cells = []
    for q, (sq, wq) in enumerate(zip(segment, word_ids)):
        for k, (sk, wk) in enumerate(zip(segment, word_ids)):
            if wq is None or wk is None:
                continue
            if (sq, sk) == (0, 1) and (wq, wk) in pairs or (sq, sk) == (1, 0) and (wk, wq) in pairs:
                cells.append((q, k))
    return cells


def alignment_html(words_a: list[str], words_b: list[str], pairs: list[tuple[int, int]], label_a: str = "A",
                   label_b: str = "B") -> str:
    """A gold word alignment drawn: sentence a's words on the top row, b's below, one line per
    aligned pair (a word of b whose partner sits elsewhere draws a slanted line, so a reordering
    reads at a glance); unaligned words in grey. Self-contained SVG, texts HTML-escaped."""
    char, gap = 8.0, 14.0
    pad = char * max(len(label_a), len(label_b)) + 20.0  # the two labels' column

    def xs(words: list[str]) -> list[tuple[float, float]]:
        out, x = [], pad
        for w in words:
            width = max(1, len(w)) * char
            out.append((x, x + width))
            x += width + gap
        return out

    pa, pb = xs(words_a), xs(words_b)
    width = int(max([pad + 20] + [e for _, e in pa + pb]) + 20)
    aligned_a, aligned_b = {i for i, _ in pairs}, {j for _, j in pairs}
    lines = "".join(
        f'<line x1="{(pa[i][0] + pa[i][1]) / 2:.1f}" y1="30" x2="{(pb[j][0] + pb[j][1]) / 2:.1f}" y2="84" '
        f'stroke="#009E73" stroke-width="1.5"><title>{html.escape(words_a[i])} ↔ {html.escape(words_b[j])}</title></line>'
        for i, j in pairs if i < len(pa) and j < len(pb))

    def row(words, spans, y, colour, aligned):
        return "".join(f'<text x="{a:.1f}" y="{y}" fill="{colour if i in aligned else "#999999"}">{html.escape(w)}</text>'
                       for i, (w, (a, _)) in enumerate(zip(words, spans)))

    labels = (f'<text x="4" y="24" fill="{SEGMENT_COLOURS[0]}" font-weight="bold">{html.escape(label_a)}</text>'
              f'<text x="4" y="100" fill="{SEGMENT_COLOURS[1]}" font-weight="bold">{html.escape(label_b)}</text>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="110" font-family="monospace" font-size="13">'
            f'{labels}{lines}{row(words_a, pa, 24, SEGMENT_COLOURS[0], aligned_a)}'
            f'{row(words_b, pb, 100, SEGMENT_COLOURS[1], aligned_b)}</svg>')


def _boundaries(segment: list[int]) -> list[int]:
    """Token positions where sentence b starts (before any special token between them)."""
    out = []
    first_b = next((i for i, s in enumerate(segment) if s == 1), None)
    if first_b is not None:
        last_a = max((i for i, s in enumerate(segment) if s == 0), default=None)
        if last_a is not None:
            out.append(last_a + 1)
    return out


def _pool(a: np.ndarray, n: int) -> np.ndarray:
    """Average-pool a [T, T] map down to at most [n, n]."""
    T = a.shape[0]
    if T <= n:
        return a
    edges = np.linspace(0, T, n + 1).astype(int)
    return np.array([[a[edges[i]:edges[i + 1], edges[j]:edges[j + 1]].mean() for j in range(n)] for i in range(n)])


def head_label(layer: int, head: int) -> str:
    """A thumbnail's label in the model view: ``"L3 H2"``."""
    return f"L{layer} H{head}"


@dataclass
class Tiles:
    """Where thumbnails of ``rows`` × ``cols`` maps of ``h`` × ``w`` cells lie in one array: tile
    (i, j) starts at row ``i * (h + gap_y) + gap_y`` and column ``j * (w + gap_x)``, with blank
    (NaN) cells between tiles and a band of ``gap_y`` rows above each row of tiles for its labels."""

    rows: int
    cols: int
    h: int
    w: int
    gap_x: int
    gap_y: int

    @classmethod
    def fit(cls, rows: int, cols: int, h: int, w: int, height_px: float, label_px: float = 22) -> "Tiles":
        """Gaps for a figure ``height_px`` tall: about ``label_px`` above each row, a few pixels between columns."""
        row_px = max(height_px, 1) / max(rows, 1)
        gap_y = max(1, int(np.ceil(h * label_px / max(row_px - label_px, label_px)))) if h else 1
        return cls(rows, cols, h, w, max(1, round(w * 0.05)), gap_y)

    def origin(self, i: int, j: int) -> tuple[int, int]:
        """The first column and row of tile (i, j)."""
        return j * (self.w + self.gap_x), i * (self.h + self.gap_y) + self.gap_y

    def canvas(self) -> np.ndarray:
        return np.full((self.rows * (self.h + self.gap_y), max(self.cols * (self.w + self.gap_x) - self.gap_x, 1)), np.nan)

    def ranges(self) -> tuple[list[float], list[float]]:
        """The x and y axis ranges (y reversed: the first row at the top)."""
        width = self.cols * (self.w + self.gap_x) - self.gap_x
        return ([-0.5 - self.gap_x / 2, width - 0.5 + self.gap_x / 2],
                [self.rows * (self.h + self.gap_y) - 0.5 + self.gap_y / 4, -0.5])


def overview(attn: np.ndarray, layers: list[int], heads: list[int], max_tokens: int = OVERVIEW_MAX_TOKENS,
             segment: list[int] | None = None, selected: tuple[int, int | None] | None = None):
    """The model view (as bertviz's): one thumbnail per selected layer (rows) × head (columns),
    each labelled ``"L3 H2"``.

    ``attn`` is the slice [len(layers), len(heads), T, T]; maps longer than ``max_tokens`` are
    average-pooled, which keeps the patterns (diagonal, [SEP] columns, cross-sentence blocks).
    The thumbnails are tiles of one heatmap on one pair of axes, blank (NaN) between them: the
    browser draws one trace and one pair of axes however many heads there are (a grid of
    subplots, two traces and two axes per head, took 2x the time for 4 × 4 heads and 5x for
    12 × 12). One scatter trace holds a click target per thumbnail, at its centre, whose
    ``customdata`` is ``[layer, head]``; with ``hoverdistance=-1`` the nearest centre, the
    thumbnail under the pointer, answers anywhere (heatmaps give no selection events in
    Streamlit). ``selected`` = (layer, head or None for all heads) outlines the head(s) the page
    shows in detail. The heatmap's ``meta["tiles"]`` says where each thumbnail lies, so its CSV
    lists each head's pooled map (:func:`xlviz.views.export.figure_frame`).
    """
    import plotly.graph_objects as go

    nl, nh = len(layers), len(heads)
    cell = 110 if nh > 6 else 150
    height = min(1400, 20 + cell * nl)
    T = attn.shape[-1] if attn.size else 0
    n = min(T, max_tokens)
    grid = Tiles.fit(nl, nh, n, n, height - 20)  # about 22 px above each row for its labels
    z = grid.canvas()
    tiles, centres, labels, shapes = [], [], [], []
    cuts = [b * n / T - 0.5 if T else b - 0.5 for b in _boundaries(segment or [])]  # A | B, pooled coordinates
    line = dict(color="#D55E00", width=1)
    for i in range(nl):
        for j in range(nh):
            x0, y0 = grid.origin(i, j)  # the thumbnail's first column and row
            z[y0:y0 + n, x0:x0 + n] = _pool(attn[i, j], max_tokens)
            tiles.append({"name": head_label(layers[i], heads[j]), "layer": layers[i], "head": heads[j], "x0": x0, "y0": y0})
            centres.append((x0 + (n - 1) / 2, y0 + (n - 1) / 2))
            labels.append(dict(x=x0 + (n - 1) / 2, y=y0 - 0.5, text=head_label(layers[i], heads[j]), showarrow=False,
                               yanchor="bottom", font=dict(size=11)))
            for pos in cuts:
                shapes.append(dict(type="line", x0=x0 + pos, x1=x0 + pos, y0=y0 - 0.5, y1=y0 + n - 0.5, line=line))
                shapes.append(dict(type="line", x0=x0 - 0.5, x1=x0 + n - 0.5, y0=y0 + pos, y1=y0 + pos, line=line))
            if selected is not None and layers[i] == selected[0] and selected[1] in (None, heads[j]):
                pad = max(0.3, n * 0.02)
                shapes.append(dict(type="rect", x0=x0 - 0.5 - pad, x1=x0 + n - 0.5 + pad, y0=y0 - 0.5 - pad,
                                   y1=y0 + n - 0.5 + pad, line=dict(color="#D55E00", width=3)))
    # one colour scale for every thumbnail, with its colorbar: cells compare across heads
    top = float(np.nanmax(attn)) if attn.size and np.isfinite(attn).any() else 1.0
    fig = go.Figure([
        go.Heatmap(z=z, coloraxis="coloraxis", hoverinfo="skip", name="pooled attention",
                   meta={"tiles": tiles, "size": [n, n]}),
        go.Scatter(x=[c[0] for c in centres], y=[c[1] for c in centres], mode="markers", showlegend=False,
                   name="click targets", marker=dict(size=1, opacity=0),
                   customdata=[[t["layer"], t["head"]] for t in tiles], text=[t["name"] for t in tiles],
                   hovertemplate="%{text}: click to open it in “One layer and head”<extra></extra>"),
    ])
    x_range, y_range = grid.ranges()
    fig.update_xaxes(visible=False, showgrid=False, zeroline=False, fixedrange=True, range=x_range)
    fig.update_yaxes(visible=False, showgrid=False, zeroline=False, fixedrange=True, range=y_range)  # layer 0 at the top
    fig.update_layout(height=height, margin=dict(l=10, r=30, t=10, b=10), hovermode="closest", hoverdistance=-1,
                      dragmode=False, clickmode="event+select", annotations=labels, shapes=shapes,
                      plot_bgcolor="rgba(0,0,0,0)",  # the blanks between tiles show the page, in any template
                      coloraxis=dict(colorscale="Blues", cmin=0, cmax=top, colorbar=dict(thickness=10, title="weight")))
    return fig


def clicked_points(event) -> list[dict]:
    """The points of a click on the model view in Streamlit's chart event: a Plotly chart's
    ``selection.points``, or a Vega-Lite chart's click selection (``xlviz.views.vega_heatmap.CLICK``)."""
    from xlviz.views.vega_heatmap import CLICK

    selection = (event.get("selection") if hasattr(event, "get") else None) or {}
    points = selection.get("points") or selection.get(CLICK)
    return list(points) if isinstance(points, (list, tuple)) else []


def clicked_head(points: list[dict] | None, layers: range | list[int], heads: range | list[int]) -> tuple[int, int] | None:
    """The (layer, head) of a click on the model view, from Streamlit's selection points (the
    Plotly click target's ``customdata``, or the Vega-Lite cell's ``layer`` and ``head``), or
    None when nothing valid was clicked."""
    for p in points or []:
        if not isinstance(p, dict):
            continue
        data = p.get("customdata") if "customdata" in p else [p.get("layer"), p.get("head")]
        if isinstance(data, (list, tuple)) and len(data) == 2:
            try:
                l, h = int(data[0]), int(data[1])
            except (TypeError, ValueError):
                continue
            if l in layers and h in heads:
                return l, h
    return None


def neuron_figure(n, title: str | None = None):
    """bertviz's neuron view of one query token of one head (``xlviz.analysis.attention.Neuron``):
    the query q and every key k_j (one row each, one column per dimension), their elementwise
    products q ⊙ k_j, and beside them each row's sum times the scaling (the score) and the
    softmax of the scores (the attention weight)."""
    from plotly.subplots import make_subplots
    import plotly.graph_objects as go

    T, d = n.keys.shape
    ticks = [f"{j} " + _tick(t, s) for j, (t, s) in enumerate(zip(n.tokens, n.segment))]
    row_px = 18 if T <= 60 else 12
    body = row_px * T
    head_px = 34
    height = int(min(2400, body + head_px + 170))
    scale = f"× {n.scaling:.3g}" if abs(n.scaling * np.sqrt(d) - 1) > 1e-6 else f"/ √{d}"
    fig = make_subplots(rows=2, cols=4, shared_yaxes=False, column_widths=[0.33, 0.33, 0.17, 0.17],
                        row_heights=[head_px / (head_px + body), body / (head_px + body)],
                        horizontal_spacing=0.03, vertical_spacing=24 / height,
                        subplot_titles=[f"query q ({html.escape(n.tokens[n.token])})", "", "", "",
                                        "keys k_j", "q ⊙ k_j", f"score q·k_j {scale}", "weight softmax"])
    lim_v = float(max(np.abs(n.query).max(), np.abs(n.keys).max(), 1e-9))
    lim_p = float(max(np.abs(n.products).max(), 1e-9))
    dims = list(range(d))
    fig.add_trace(go.Heatmap(z=[n.query], x=dims, y=[0], coloraxis="coloraxis",
                             hovertemplate="q[%{x}] = %{z:.3f}<extra></extra>"), row=1, col=1)
    key_hover = [[f"k_{j} ({html.escape(n.tokens[j])})[{i}] = {n.keys[j, i]:.3f}" for i in dims] for j in range(T)]
    fig.add_trace(go.Heatmap(z=n.keys, x=dims, y=list(range(T)), coloraxis="coloraxis", hoverinfo="text", text=key_hover),
                  row=2, col=1)
    prod_hover = [[f"q[{i}] × k_{j}[{i}] = {n.query[i]:.3f} × {n.keys[j, i]:.3f} = {n.products[j, i]:.3f}" for i in dims]
                  for j in range(T)]
    fig.add_trace(go.Heatmap(z=n.products, x=dims, y=list(range(T)), coloraxis="coloraxis2", hoverinfo="text",
                             text=prod_hover), row=2, col=2)
    colours = ["#D55E00" if j == n.token else "#888888" for j in range(T)]
    fig.add_trace(go.Bar(x=n.scores, y=list(range(T)), orientation="h", marker_color=colours, showlegend=False,
                         text=[f"{v:.2f}" for v in n.scores], textposition="outside", textfont=dict(size=10), cliponaxis=False,
                         hovertemplate="score %{x:.4f}<extra></extra>"), row=2, col=3)
    fig.add_trace(go.Bar(x=n.weights, y=list(range(T)), orientation="h", marker_color="#0072B2", showlegend=False,
                         text=[f"{v:.2f}" for v in n.weights], textposition="outside", textfont=dict(size=10), cliponaxis=False,
                         hovertemplate="weight %{x:.4f}<extra></extra>"), row=2, col=4)
    for col in (1, 2, 3, 4):
        fig.update_yaxes(autorange="reversed", row=2, col=col, tickmode="array", tickvals=list(range(T)),
                         ticktext=ticks if col == 1 else [""] * T, matches="y5" if col > 1 else None)
    fig.update_xaxes(ticks="", showgrid=False, zeroline=False)
    fig.update_yaxes(ticks="", showgrid=False, zeroline=False)
    fig.update_yaxes(showticklabels=False, row=1, col=1)
    fig.update_xaxes(showticklabels=False, row=1, col=1, matches="x5")
    fig.update_xaxes(title_text="dimension", row=2, col=1)
    fig.update_xaxes(title_text="dimension", row=2, col=2)
    fig.update_xaxes(range=[0, 1.15], tickvals=[0, 0.5, 1], row=2, col=4)  # room for the value beside a full bar
    fig.update_xaxes(zeroline=True, zerolinecolor="#888888", row=2, col=3)
    for col in (2, 3, 4):
        fig.update_xaxes(visible=False, row=1, col=col)
        fig.update_yaxes(visible=False, row=1, col=col)
    fig.update_layout(
        height=height, margin=dict(l=10, r=50, t=90, b=10), bargap=0.15,
        coloraxis=dict(colorscale="RdBu", reversescale=True, cmin=-lim_v, cmax=lim_v,
                       colorbar=dict(thickness=8, len=0.42, x=1.01, y=0.76, title="q, k")),
        coloraxis2=dict(colorscale="PuOr", reversescale=True, cmin=-lim_p, cmax=lim_p,
                        colorbar=dict(thickness=8, len=0.42, x=1.01, y=0.24, title="q⊙k")),
        title=dict(text=html.escape(title or f"layer {n.layer} · head {n.head} · query {n.token} ({n.tokens[n.token]})"),
                   subtitle=dict(text="rows: key tokens j · weight = softmax over j of the scores"), x=0.5,
                   yref="container", y=0.99, yanchor="top", font=dict(size=13)),
    )
    fig.for_each_annotation(lambda a: a.update(font=dict(size=11)))
    return fig


def _share_trace(share: np.ndarray, zmax: float | None = None, **colorbar):
    """One layer × head matrix of shares (0..1) as a heatmap, values written in the cells."""
    import plotly.graph_objects as go

    L, H = share.shape
    text = [[f"{v:.2f}" if np.isfinite(v) else "" for v in row] for row in share]
    top = zmax if zmax is not None else float(np.nanmax(share)) if np.isfinite(share).any() else 1
    return go.Heatmap(z=share, x=[f"h{h}" for h in range(H)], y=[f"L{l}" for l in range(L)], colorscale="Viridis",
                      zmin=0, zmax=top, text=text, texttemplate="%{text}" if L * H <= 200 else None,
                      hovertemplate="layer %{y}, head %{x}: %{z:.3f}<extra></extra>", colorbar=dict(thickness=10, **colorbar))


def share_heatmap(share: np.ndarray, title: str, zmax: float | None = None):
    """A layer × head matrix of shares (0..1), values written in the cells."""
    import plotly.graph_objects as go

    L, _ = share.shape
    fig = go.Figure(_share_trace(share, zmax))
    fig.update_yaxes(autorange="reversed", title="layer")
    fig.update_xaxes(title="head", side="bottom")
    fig.update_layout(title=dict(text=html.escape(title), x=0.5, font=dict(size=13)), height=max(280, 40 + 32 * L),
                      margin=dict(l=10, r=10, t=40, b=10))
    return fig


def share_heatmaps(panels: Sequence[tuple[np.ndarray, str]]):
    """Layer × head share matrices side by side in one figure, each with its own colour scale and
    title (the Attention page's other-sentence and aligned-word shares). One figure, not one per
    matrix: a browser takes about as long to draw a figure of two heatmaps as one of one (0.3 s
    against 0.24 s on two cores), so a second figure would cost 0.2 s of every visit."""
    from plotly.subplots import make_subplots

    if len(panels) == 1:
        return share_heatmap(*panels[0])
    k = len(panels)
    fig = make_subplots(rows=1, cols=k, horizontal_spacing=0.14, subplot_titles=[html.escape(t) for _, t in panels])
    for j, (share, _) in enumerate(panels):
        right = fig.get_subplot(1, j + 1).xaxis.domain[1]  # the panel's right edge: its colour bar beside it
        fig.add_trace(_share_trace(share, x=right + 0.01, xanchor="left"), row=1, col=j + 1)
    L = max(share.shape[0] for share, _ in panels)
    fig.update_yaxes(autorange="reversed", title="layer")
    fig.update_xaxes(title="head", side="bottom")
    fig.update_layout(height=max(280, 40 + 32 * L), margin=dict(l=10, r=10, t=40, b=10))
    fig.for_each_annotation(lambda a: a.update(font=dict(size=13)))
    return fig


# --- numbers ----------------------------------------------------------------------------------

def slice_frame(attn: np.ndarray, layers: list[int], heads: list[int] | None, tokens: list[str], sentence: str = "") -> pd.DataFrame:
    """Long table of the selected maps: layer, head, query/key index and token, weight."""
    rows = []
    T = len(tokens)
    head_labels = heads if heads is not None else ["mean"]
    for i, l in enumerate(layers):
        for j, h in enumerate(head_labels):
            a = attn[i, j]
            for q in range(T):
                for k in range(T):
                    rows.append((sentence, l, h, q, tokens[q], k, tokens[k], float(a[q, k])))
    return pd.DataFrame(rows, columns=["input", "layer", "head", "query", "query_token", "key", "key_token", "weight"])


def share_frame(shares: dict[str, np.ndarray]) -> pd.DataFrame:
    """Layer × head shares (``{"cross_sentence": [L, H], "aligned_word": [L, H]}``) as rows."""
    rows = []
    for name, m in shares.items():
        for l in range(m.shape[0]):
            for h in range(m.shape[1]):
                rows.append((name, l, h, float(m[l, h])))
    return pd.DataFrame(rows, columns=["measure", "layer", "head", "share"])


def to_csv(*frames: pd.DataFrame) -> bytes:
    buf = io.StringIO()
    pd.concat([f for f in frames if f is not None and not f.empty], ignore_index=True).to_csv(buf, index=False)
    return buf.getvalue().encode("utf-8")


def head_view_html(attn: np.ndarray, tokens: list[str], segment: list[int], height: int | None = None) -> str:
    """A bertviz-style head view: the tokens in two columns (queries left, keys right), one line
    per weight above 1% with its opacity, hover a token to keep only its lines. Self-contained
    SVG and a few lines of script: no library, no network."""
    T = len(tokens)
    row = 22
    h = height or 30 + row * T
    colours = ["#0072B2", "#D55E00", "#777777"]

    def colour(seg: int) -> str:
        return colours[seg] if seg in (0, 1) else colours[2]

    lines = []
    for q in range(T):
        for k in range(T):
            w = float(attn[q, k])
            if w >= 0.01:
                lines.append(f'<line x1="150" y1="{20 + q * row}" x2="350" y2="{20 + k * row}" data-q="{q}" data-k="{k}" '
                             f'stroke="{colour(segment[q] if q < len(segment) else -1)}" stroke-width="2" '
                             f'stroke-opacity="{min(1.0, w):.3f}"><title>{html.escape(tokens[q])} → {html.escape(tokens[k])}: {w:.3f}</title></line>')
    left = "".join(f'<text x="140" y="{24 + i * row}" text-anchor="end" data-side="q" data-i="{i}" fill="{colour(segment[i] if i < len(segment) else -1)}">'
                   f'{html.escape(t)}</text>' for i, t in enumerate(tokens))
    right = "".join(f'<text x="360" y="{24 + i * row}" data-side="k" data-i="{i}" fill="{colour(segment[i] if i < len(segment) else -1)}">'
                    f'{html.escape(t)}</text>' for i, t in enumerate(tokens))
    script = """<script>
const svg = document.currentScript.previousElementSibling;
svg.querySelectorAll('text').forEach(t => {
  const attr = t.dataset.side === 'q' ? 'data-q' : 'data-k';
  t.addEventListener('mouseenter', () => svg.querySelectorAll('line').forEach(l =>
    l.style.display = l.getAttribute(attr) === t.dataset.i ? '' : 'none'));
  t.addEventListener('mouseleave', () => svg.querySelectorAll('line').forEach(l => l.style.display = ''));
});
</script>"""
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="520" height="{h}" font-family="sans-serif" font-size="13" '
            f'style="cursor:default">{"".join(lines)}{left}{right}</svg>{script}')


# --- a model's own cross-attention (A's tokens over B's) ---------------------------------------

def cross_heatmap(attn: np.ndarray, tokens_a: list[str], tokens_b: list[str], title: str):
    """One cross-attention map [Ta, Tb]: rows are A's tokens (queries), columns B's (keys)."""
    import plotly.graph_objects as go

    ta, tb = len(tokens_a), len(tokens_b)
    hover = [[f"{tokens_a[q]} → {tokens_b[k]}: {attn[q, k]:.3f}" for k in range(tb)] for q in range(ta)]
    fig = go.Figure(go.Heatmap(z=attn, x=list(range(tb)), y=list(range(ta)), colorscale="Oranges", zmin=0,
                               zmax=float(np.nanmax(attn)) if attn.size else 1.0, hoverinfo="text", text=hover,
                               colorbar=dict(thickness=10)))
    fig.update_xaxes(tickmode="array", tickvals=list(range(tb)), ticktext=[_tick(t, 1) for t in tokens_b], tickangle=-60, side="top")
    fig.update_yaxes(tickmode="array", tickvals=list(range(ta)), ticktext=[_tick(t, 0) for t in tokens_a], autorange="reversed")
    fig.update_layout(title=dict(text=html.escape(title), subtitle=dict(text="rows: A's tokens (queries) · columns: B's tokens (keys)"),
                                 x=0.5, yref="container", y=0.99, yanchor="top", font=dict(size=13)),
                      height=int(min(900, max(320, 16 * ta + 170))), margin=dict(l=10, r=10, t=110, b=10))
    return fig


def cross_overview(result, layers: list[int], hide_special: bool = True):
    """Small multiples of the cross-attention: one thumbnail per layer (rows) × head (columns),
    labelled ``"L3 H2"``, one colour scale. Tiles of one heatmap on one pair of axes, as
    :func:`overview` (a browser draws one trace, not two axes per head); its CSV lists each
    head's map under its label."""
    import plotly.graph_objects as go

    heads = list(range(result.n_heads))
    maps = [[result.slice(l, h, hide_special)[0] for h in heads] for l in layers]
    ta, tb = (maps[0][0].shape if layers and heads else (0, 0))
    height = min(1400, 20 + 130 * len(layers))
    grid = Tiles.fit(len(layers), len(heads), ta, tb, height - 20)
    z = grid.canvas()
    tiles, labels = [], []
    for i, l in enumerate(layers):
        for j, h in enumerate(heads):
            x0, y0 = grid.origin(i, j)
            z[y0:y0 + ta, x0:x0 + tb] = maps[i][j]
            tiles.append({"name": head_label(l, h), "layer": l, "head": h, "x0": x0, "y0": y0})
            labels.append(dict(x=x0 + (tb - 1) / 2, y=y0 - 0.5, text=head_label(l, h), showarrow=False, yanchor="bottom",
                               font=dict(size=10)))
    top = max((float(m.max()) for row in maps for m in row if m.size), default=1.0)
    fig = go.Figure(go.Heatmap(z=z, coloraxis="coloraxis", name="cross-attention", hoverongaps=False,
                               hovertemplate="weight %{z:.3f}<extra></extra>", meta={"tiles": tiles, "size": [ta, tb]}))
    x_range, y_range = grid.ranges()
    fig.update_xaxes(visible=False, showgrid=False, zeroline=False, range=x_range)
    fig.update_yaxes(visible=False, showgrid=False, zeroline=False, range=y_range)  # layer at the top first
    fig.update_layout(height=height, margin=dict(l=10, r=30, t=10, b=10), annotations=labels, plot_bgcolor="rgba(0,0,0,0)",
                      coloraxis=dict(colorscale="Oranges", cmin=0, cmax=top, colorbar=dict(thickness=10, title="weight")))
    return fig


def cross_frame(result, hide_special: bool = True) -> pd.DataFrame:
    """Every layer/head of a cross-attention result as rows (for the CSV download)."""
    rows = []
    for l in range(result.n_layers):
        for h in range(result.n_heads):
            A, ta, tb = result.slice(l, h, hide_special)
            for q in range(len(ta)):
                for k in range(len(tb)):
                    rows.append(("cross-attention A→B", l, h, q, ta[q], k, tb[k], float(A[q, k])))
    return pd.DataFrame(rows, columns=["input", "layer", "head", "query", "query_token", "key", "key_token", "weight"])


# --------------------------------------------------------------------------- the notebook's attention views
def _attention(model, sentence_a, sentence_b, tokenizer, max_length: int):
    from xlviz.analysis.attention import attention_maps

    m, tok = loaded(model, tokenizer)
    return attention_maps(m, tok, sentence_a, sentence_b, max_length=max_length)


def head_view(model: Any, sentence_a: str, sentence_b: str | None = None, *, layer: int = -1, head: int | None = None,
              hide_special: bool = True, tokenizer: str | os.PathLike | None = None, max_length: int = 128) -> HTML:
    """The Attention page's head view (as bertviz): queries left, keys right, one line per weight.

    ``layer`` (negative counts from the top) and ``head`` (None: mean of the heads) pick the map;
    ``sentence_b`` feeds the pair as one input so attention can cross between the sentences.
    """
    from xlviz.analysis.attention import attention_slice

    res = _attention(model, sentence_a, sentence_b, tokenizer, max_length)
    layer = layer_index(layer, res.n_layers)
    sl = attention_slice(res, layers=[layer], heads=None if head is None else [head], hide_special=hide_special,
                         average_heads=head is None)
    return HTML(head_view_html(sl.attentions[0, 0], sl.tokens, sl.segment))


def model_view(model: Any, sentence_a: str, sentence_b: str | None = None, *, layers: Sequence[int] | None = None,
               hide_special: bool = True, tokenizer: str | os.PathLike | None = None, max_length: int = 128):
    """The Attention page's model view: one small map per layer (rows) and head (columns), each
    labelled ``"L3 H2"``, all layers unless ``layers`` is given. A plotly figure; each thumbnail's
    click target carries ``customdata`` ``[layer, head]`` (the page opens that head on a click)."""
    from xlviz.analysis.attention import attention_slice
    from xlviz.views.figures import tidy

    res = _attention(model, sentence_a, sentence_b, tokenizer, max_length)
    sl = attention_slice(res, layers=sorted(layers) if layers is not None else None, heads=None, hide_special=hide_special)
    return tidy(overview(sl.attentions, sl.layers, sl.heads, segment=sl.segment))


def cross_language_attention(model: Any, sentence_a: str, sentence_b: str, *, hide_special: bool = True,
                             tokenizer: str | os.PathLike | None = None, max_length: int = 128):
    """Per layer and head, the share of attention that goes to the other sentence when a
    translation pair is read as one input (VECO's Fig. 1 question). A plotly heatmap."""
    from xlviz.analysis.attention import cross_attention_share
    from xlviz.views.figures import tidy

    res = _attention(model, sentence_a, sentence_b, tokenizer, max_length)
    share = cross_attention_share(res, hide_special=hide_special)
    return tidy(share_heatmap(share, "share of attention to the other sentence"))


def neuron_view(model: Any, text: str, layer: int, head: int, token: int | str, *, text_b: str | None = None,
                tokenizer: str | os.PathLike | None = None, max_length: int = 128):
    """bertviz's neuron view, as the Attention page draws it: for query ``token`` (a position
    counting [CLS], negative from the end, or the token's text) of ``head`` in ``layer``
    (negative counts from the top), the query q, every key k_j, the products q ⊙ k_j, the scores
    q·k_j/√d and their softmax (the head's attention weights). A plotly figure."""
    from xlviz.analysis.attention import query_key_vectors
    from xlviz.views.figures import tidy

    m, tok = loaded(model, tokenizer)
    qk = query_key_vectors(m, tok, text, text_b, max_length=max_length)
    return tidy(neuron_figure(qk.neuron(layer, head, token)))
