"""Plotly heatmaps drawn with Vega-Lite on screen: one map (attention weights with token
labels, lines between the sentences, outlined cells), maps side by side with their own colour
scales (layer × head shares, values in the cells), and thumbnails tiled on one pair of axes
(the model view) whose click opens a head.

Why: as :mod:`xlviz.views.vega`, a first view without a Plotly chart does not make a new tab
load plotly.js. The Plotly figure stays the figure (exports, reports, notebooks); this module
only reads it and returns ``None`` for anything it does not draw the same way.

Each map is drawn as one rect per finite cell (NaN cells, the blanks between thumbnails, are
not sent), coloured by Plotly's own colour scale (its stops as a piecewise-linear Vega-Lite
scale), with Plotly's hover text or hover template as the tooltip.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

import numpy as np

from xlviz.views.vega_base import DASHES, MARKUP, num as _num, plain as _plain

# the name of the click selection of a tiled figure (``meta["tiles"]``): Streamlit reports it as
# ``selection[CLICK]``, a list of ``{"layer": l, "head": h}``
CLICK = "head"
SPAN_COLOUR = re.compile(r"color:\s*(#[0-9a-fA-F]{3,8}|rgba?\([^)]*\)|[a-zA-Z]+)")
# past this many cells (a map of 170 x 170 tokens; 25 thumbnails of 35 x 35) a Plotly figure is the
# lighter one: 36 thumbnails of 40 x 40 took 0.14 s to write and 0.07 s to send as 1.8 MB of
# cells, against 0.03 s and 1 MB of Plotly's JSON (its code, 4.7 MB, loaded once per tab)
MAX_CELLS = 30_000
CANVAS_CELLS = 2_000  # past this many, on a canvas (Streamlit's own threshold for a chart's rows)
SEAM = 1.3  # a cell's right (and lower) half-width, relative: the overlap (15% of a cell) that hides seams
BAND_PX = 48  # a categorical cell's width: room for a value such as "0.93"
TEMPLATE = re.compile(r"%\{(x|y|z|text)(?::([^}]*))?\}")


def _axis_name(ref: str, kind: str) -> str:
    """``"x2"`` -> ``"xaxis2"``; ``"x"`` or None -> ``"xaxis"``."""
    return f"{kind}axis{(ref or kind)[1:]}"


def _dark(colour: str) -> bool:
    """Whether white text reads better than black on ``colour`` (rgb, rgba or hex; a named
    colour counts as light)."""
    from plotly.colors import convert_colors_to_same_type

    rgb = convert_colors_to_same_type(colour, "tuple")[0]
    return bool(rgb) and 0.299 * rgb[0][0] + 0.587 * rgb[0][1] + 0.114 * rgb[0][2] < 0.5


def _colour(fig, t, z: np.ndarray) -> tuple[dict, str, float, float] | None:
    """The trace's colour encoding (Plotly's colour scale as a Vega-Lite scale: its stops at
    their values, clamped), the colour of its low end, and the values of its two ends."""
    src = fig.layout[t.coloraxis] if t.coloraxis else t
    lo, hi = (_num(src.cmin), _num(src.cmax)) if t.coloraxis else (_num(t.zmin), _num(t.zmax))
    finite = z[np.isfinite(z)]
    lo = lo if lo is not None else float(finite.min()) if finite.size else 0.0
    hi = hi if hi is not None else float(finite.max()) if finite.size else 1.0
    stops = list(src.colorscale or ())
    if not stops or not all(isinstance(s, (list, tuple)) and len(s) == 2 for s in stops):
        return None
    if src.reversescale:
        stops = [(1 - f, c) for f, c in reversed(stops)]
    span = hi - lo if hi > lo else 1.0
    bar = src.colorbar
    title = _plain(bar.title.text) if bar is not None and bar.title is not None else ""
    return {"field": "z", "type": "quantitative", "title": title or None,
            "scale": {"domain": [lo + float(f) * span for f, _ in stops], "range": [c for _, c in stops], "clamp": True,
                      "interpolate": "rgb"},
            "legend": {"gradientThickness": 10, "orient": "right"}}, stops[0][1], lo, hi


def _tooltip(t, has_text: bool) -> str | None:
    """A Vega expression for the cell's hover: Plotly's text, or its hover template."""
    if t.hoverinfo == "skip":
        return None
    if t.hoverinfo == "text" and has_text:
        return "datum.t"
    template = re.sub(r"<extra>.*?</extra>", "", t.hovertemplate or "")
    if not template:
        return "'' + format(datum.z, '.3f')"
    parts, at = [], 0
    for m in TEMPLATE.finditer(template):
        if m.start() > at:
            parts.append(json.dumps(_literal(template[at:m.start()])))
        field = {"x": "datum.x", "y": "datum.y", "z": "datum.z", "text": "datum.t"}[m.group(1)]
        parts.append(f"format({field}, {json.dumps(m.group(2).lstrip(':'))})" if m.group(2) else f"'' + {field}")
        at = m.end()
    if at < len(template):
        parts.append(json.dumps(_literal(template[at:])))
    return " + ".join(parts) or None


def _literal(text: str) -> str:
    """A piece of a hover template as plain text, its spaces kept."""
    return html.unescape(MARKUP.sub("", text))


def _positions(values, n: int) -> tuple[list, bool, float] | None:
    """A heatmap axis' cell positions, whether they are numbers, and half a cell's width."""
    vals = list(values) if values is not None else list(range(n))
    if len(vals) != n:
        return None
    nums = [_num(v) for v in vals]
    if all(v is not None for v in nums):
        steps = np.diff(nums) if n > 1 else np.array([1.0])
        if steps.size and not np.allclose(steps, steps[0]):
            return None  # uneven cells: Plotly draws them between midpoints, not done here
        return nums, True, abs(float(steps[0])) / 2 or 0.5
    if any(isinstance(v, (int, float)) for v in vals):
        return None
    return [_plain(v) for v in vals], False, 0.0


def _axis(ax, numeric: bool, letter: str) -> tuple[dict | None, dict]:
    """The Vega-Lite axis and scale of a Plotly axis (tick labels with their colours, side,
    angle, a fixed or reversed range)."""
    if ax.visible is False:
        axis = None
    else:
        axis: dict[str, Any] = {"title": _plain(ax.title.text) or None, "grid": False, "ticks": False, "domain": False,
                                "labelOverlap": False, "labelPadding": 2}
        if ax.side in ("top", "bottom", "left", "right"):
            axis["orient"] = ax.side
        if ax.tickangle is not None and ax.tickangle != "auto":
            axis["labelAngle"] = float(ax.tickangle)
            if ax.tickangle < 0:
                axis["labelAlign"] = "left" if ax.side == "top" else "right"
        if ax.tickvals is not None and ax.ticktext is not None and numeric:
            values = [_num(v) for v in ax.tickvals]
            texts = [str(s) for s in ax.ticktext]
            axis["values"] = values
            axis["tickCount"] = len(values)  # else Vega thins explicit values to its default count
            axis["labelExpr"] = f"{json.dumps([_plain(s) for s in texts])}[indexof({json.dumps(values)}, datum.value)]"
            colours = [(SPAN_COLOUR.search(s) or [None, None])[1] for s in texts]
            if any(colours):
                axis["labelColor"] = {"expr": f"{json.dumps([c or 'black' for c in colours])}[indexof({json.dumps(values)}, datum.value)]"}
        elif numeric:
            axis["tickMinStep"] = 1
            axis["format"] = "d"
        else:
            axis["labelAngle"] = axis.get("labelAngle", 0)  # Plotly writes short categories level
    scale: dict[str, Any] = {}
    rng = [float(v) for v in ax.range] if ax.range is not None else None
    if rng is not None:
        scale = {"domain": sorted(rng), "nice": False, "zero": False}
        reversed_ = rng[0] > rng[1]
    else:
        reversed_ = ax.autorange == "reversed"
        if numeric:
            scale = {"nice": False, "zero": False}
    # a categorical axis: Plotly puts the first category at the bottom (y), Vega-Lite at the top
    if letter == "y" and not numeric:
        reversed_ = not reversed_
    if reversed_:
        scale["reverse"] = True
    return axis, scale


def _shapes(layout: dict, xref: str, yref: str) -> list[dict] | None:
    """The panel's lines and outlined rectangles as Vega-Lite layers (None: a shape not drawn here).
    ``layout``: the figure's layout as plain data (reading a Plotly object's properties one by
    one cost 0.1 s for the model view's 65 shapes)."""
    groups: dict[tuple, list[dict]] = {}
    for s in layout.get("shapes") or ():
        sx, sy = str(s.get("xref") or "x").replace(" ", ""), str(s.get("yref") or "y").replace(" ", "")
        if sx.replace("domain", "") != xref or sy.replace("domain", "") != yref:
            if sx.replace("domain", "") in (xref,) or sy.replace("domain", "") in (yref,):
                return None
            continue  # another panel's
        line = s.get("line") or {}
        style = (line.get("color") or "#444", float(line.get("width") or 1), json.dumps(DASHES.get(line.get("dash") or "solid", [1, 0])))
        x0, x1, y0, y1 = (_num(s.get(k)) for k in ("x0", "x1", "y0", "y1"))
        kind = s.get("type")
        if None in (x0, x1, y0, y1) or (s.get("fillcolor") not in (None, "rgba(0,0,0,0)", "transparent")):
            return None
        if kind == "line" and sy.endswith("domain") and not sx.endswith("domain") and x0 == x1:
            groups.setdefault(("vline",) + style, []).append({"x": x0})
        elif kind == "line" and sx.endswith("domain") and not sy.endswith("domain") and y0 == y1:
            groups.setdefault(("hline",) + style, []).append({"y": y0})
        elif kind in ("line", "rect") and not sx.endswith("domain") and not sy.endswith("domain"):
            groups.setdefault((kind,) + style, []).append({"x": x0, "x2": x1, "y": y0, "y2": y1})
        else:
            return None
    layers = []
    for (kind, colour, width, dash), rows in groups.items():
        mark = {"type": "rect" if kind == "rect" else "rule", "stroke" if kind == "rect" else "color": colour,
                "strokeWidth": width, "strokeDash": json.loads(dash)}
        if kind == "rect":
            mark["fill"] = None
            mark["fillOpacity"] = 0
        enc: dict[str, Any] = {}
        if kind in ("vline", "line", "rect"):
            enc["x"] = {"field": "x", "type": "quantitative"}
        if kind in ("hline", "line", "rect"):
            enc["y"] = {"field": "y", "type": "quantitative"}
        if kind in ("line", "rect"):
            enc |= {"x2": {"field": "x2"}, "y2": {"field": "y2"}}
        layers.append({"data": {"values": rows}, "mark": mark, "encoding": enc})
    return layers


def _labels(layout: dict, xref: str, yref: str) -> list[dict] | None:
    """Text placed on the panel's axes (the thumbnails' "L3 H2") as one text layer."""
    rows, size, baseline = [], 11, "middle"
    for a in layout.get("annotations") or ():
        ax, ay = a.get("xref") or "x", a.get("yref") or "y"
        if ax == "paper" or ay == "paper":
            continue  # a subplot's title: the panel's title
        if ax != xref or ay != yref:
            if ax == xref or ay == yref:
                return None
            continue
        x, y = _num(a.get("x")), _num(a.get("y"))
        if x is None or y is None or a.get("showarrow"):
            return None
        rows.append({"x": x, "y": y, "text": _plain(a.get("text"))})
        size = int((a.get("font") or {}).get("size") or size)
        baseline = {"bottom": "bottom", "top": "top"}.get(a.get("yanchor"), "middle")
    if not rows:
        return []
    return [{"data": {"values": rows}, "mark": {"type": "text", "fontSize": size, "baseline": baseline, "color": "#333"},
             "encoding": {"x": {"field": "x", "type": "quantitative"}, "y": {"field": "y", "type": "quantitative"},
                          "text": {"field": "text"}}}]


def _click_targets(fig, heat) -> bool | None:
    """Whether the figure's other trace is the tiles' click targets (invisible markers with
    ``[layer, head]`` as customdata, over tiles listed in the heatmap's ``meta``); None: a trace
    this module does not draw."""
    others = [t for t in fig.data if t is not heat]
    if not others:
        return False
    if len(others) > 1 or others[0].type != "scatter" or others[0].customdata is None:
        return None
    if _num(others[0].marker.opacity) != 0 or not isinstance(heat.meta, dict) or "tiles" not in heat.meta:
        return None
    return True


def _panel(fig, layout: dict, t, clickable: bool) -> dict | None:
    """One heatmap trace with its axes, shapes and labels as a layered Vega-Lite view."""
    z = np.asarray(t.z if t.z is not None else [], dtype=float)
    if z.ndim != 2 or not z.size or t.zsmooth not in (None, False) or t.transpose:
        return None
    if np.isfinite(z).sum() > MAX_CELLS:
        return None
    ny, nx = z.shape
    xs, ys = _positions(t.x, nx), _positions(t.y, ny)
    if xs is None or ys is None:
        return None
    (xv, x_num, x_half), (yv, y_num, y_half) = xs, ys
    text = np.asarray(t.text, dtype=object) if isinstance(t.text, (list, tuple, np.ndarray)) else None
    if text is not None and text.shape != z.shape:
        text = None
    cell_text = text is not None and (t.texttemplate or "").strip() == "%{text}"
    hover = _tooltip(t, text is not None)
    scale = _colour(fig, t, z)
    if scale is None:
        return None
    colour, low, lo, hi = scale
    tiles = (t.meta or {}).get("tiles") if clickable else None
    size = (t.meta or {}).get("size") if clickable else None
    tile_of = np.full(z.shape, -1)
    if tiles:
        h, w = size
        for k, tile in enumerate(tiles):
            tile_of[tile["y0"]:tile["y0"] + h, tile["x0"]:tile["x0"] + w] = k
    ii, jj = np.nonzero(np.isfinite(z))  # the cells, column by column (a loop over cells cost 0.09 s for the model view)
    cols: dict[str, list] = {"x": np.asarray(xv, dtype=object)[jj].tolist(), "y": np.asarray(yv, dtype=object)[ii].tolist(),
                             "z": np.round(z[ii, jj], 5).tolist()}
    if text is not None and (hover == "datum.t" or cell_text):
        cols["t"] = [_plain(v) for v in text[ii, jj]]
    if tiles:
        cols["k"] = tile_of[ii, jj].tolist()
    rows = [dict(zip(cols, values)) for values in zip(*cols.values())]
    xref, yref = (t.xaxis or "x"), (t.yaxis or "y")
    x_axis, x_scale = _axis(fig.layout[_axis_name(xref, "x")], x_num, "x")
    y_axis, y_scale = _axis(fig.layout[_axis_name(yref, "y")], y_num, "y")
    transform: list[dict] = []
    if tiles:  # each cell's layer and head (the click's fields) and the click target's hover
        transform += [{"calculate": f"{json.dumps([tile['layer'] for tile in tiles])}[datum.k]", "as": "layer"},
                      {"calculate": f"{json.dumps([tile['head'] for tile in tiles])}[datum.k]", "as": "head"}]
        hint = next((o for o in fig.data if o is not t), None)
        tip = re.sub(r"<extra>.*?</extra>", "", (hint.hovertemplate if hint is not None else "") or "")
        name = f"{json.dumps([tile['name'] for tile in tiles])}[datum.k]"
        pieces = re.split(r"%\{text\}", tip) if tip else ["", ""]
        parts = [json.dumps(_literal(pieces[0]))] + [p for piece in pieces[1:] for p in (name, json.dumps(_literal(piece)))]
        hover = " + ".join(p for p in parts if p != '""')
    if hover:
        transform.append({"calculate": hover, "as": "tip"})
    enc: dict[str, Any] = {"color": colour}
    for axis_key, num, half, axis, scale in (("x", x_num, x_half, x_axis, x_scale), ("y", y_num, y_half, y_axis, y_scale)):
        if num:
            # each cell a little wider than its half-widths (clipped at the edge): cells that only
            # touch leave hairline seams where the browser smooths their edges
            transform += [{"calculate": f"datum.{axis_key} - {half}", "as": f"{axis_key}0"},
                          {"calculate": f"datum.{axis_key} + {half * SEAM}", "as": f"{axis_key}1"}]
            if "domain" not in scale:
                vals = xv if axis_key == "x" else yv
                scale = {**scale, "domain": [min(vals) - half, max(vals) + half]}
            enc[axis_key] = {"field": f"{axis_key}0", "type": "quantitative", "axis": axis, "scale": scale, "title": None}
            enc[f"{axis_key}2"] = {"field": f"{axis_key}1"}
        else:
            domain = xv if axis_key == "x" else yv
            enc[axis_key] = {"field": axis_key, "type": "ordinal", "axis": axis, "scale": {**scale, "domain": domain},
                             "title": (axis or {}).get("title")}
    if hover:
        enc["tooltip"] = {"field": "tip", "type": "nominal"}
    cells: dict[str, Any] = {"mark": {"type": "rect", "clip": True} | ({"cursor": "pointer"} if tiles else {}), "encoding": enc}
    if tiles:
        cells["params"] = [{"name": CLICK, "select": {"type": "point", "fields": ["layer", "head"], "on": "click"}}]
    layers: list[dict] = [cells]
    if cell_text:
        mid = (lo + hi) / 2
        light_on_low = _dark(low)
        layers.append({"mark": {"type": "text", "fontSize": 10},
                       "encoding": {"x": {"field": "x", "type": "ordinal" if not x_num else "quantitative"},
                                    "y": {"field": "y", "type": "ordinal" if not y_num else "quantitative"},
                                    "text": {"field": "t"},
                                    "color": {"condition": {"test": f"datum.z < {mid}", "value": "white" if light_on_low else "black"},
                                              "value": "black" if light_on_low else "white"}}})
    shapes, labels = _shapes(layout, xref, yref), _labels(layout, xref, yref)
    if shapes is None or labels is None or (not x_num and (shapes or labels)) or (not y_num and (shapes or labels)):
        return None
    layers += shapes + labels
    return {"data": {"values": rows}, "transform": transform, "layer": layers}


def _subtitle_of(fig, layout: dict, t) -> str:
    """A subplot's title: the paper annotation over the panel's x domain."""
    dom = fig.layout[_axis_name(t.xaxis or "x", "x")].domain or (0, 1)
    for a in layout.get("annotations") or ():
        x = _num(a.get("x"))
        if a.get("xref") == "paper" and a.get("yref") == "paper" and x is not None and dom[0] <= x <= dom[1]:
            return _plain(a.get("text"))
    return ""


def heatmap_spec(fig) -> dict | None:
    """A Vega-Lite spec drawing a figure of heatmaps (one, or side by side each with its own
    colour scale), or None when it cannot be drawn the same way."""
    heats = [t for t in fig.data if t.type == "heatmap"]
    if not heats:
        return None
    clickable = _click_targets(fig, heats[0]) if len(heats) == 1 else (False if len(heats) == len(fig.data) else None)
    if clickable is None:
        return None
    lay = fig.layout
    margin = lay.margin
    height = max(120, int(lay.height or 450) - int(margin.t if margin.t is not None else 80)
                 - int(margin.b if margin.b is not None else 80))
    title = _plain(lay.title.text)
    head: dict[str, Any] = {"text": title, "anchor": "middle" if _num(lay.title.x) == 0.5 else "start"} if title else {}
    if title and lay.title.subtitle and lay.title.subtitle.text:
        head["subtitle"] = _plain(lay.title.subtitle.text)
    layout = lay.to_plotly_json()  # plain data: a Plotly object's properties are slow to read one by one
    panels = []
    for t in heats:
        panel = _panel(fig, layout, t, bool(clickable))
        if panel is None:
            return None
        panels.append(panel)
    spec: dict[str, Any] = {"$schema": "https://vega.github.io/schema/vega-lite/v5.json"}
    if head:
        spec["title"] = head
    # a categorical x (layer × head shares): a band per head wide enough for its value, as the
    # page's columns allow; numbers (token positions, tiles): the container's width
    bands = any(p["layer"][0]["encoding"]["x"]["type"] == "ordinal" for p in panels)
    if sum(len(p["data"]["values"]) for p in panels) > CANVAS_CELLS:  # drawn on a canvas: one element, not one per cell
        spec["usermeta"] = {"embedOptions": {"renderer": "canvas"}}
    if len(panels) == 1:
        size = {"width": {"step": BAND_PX}} if bands else {"autosize": {"type": "fit-x", "contains": "padding"}}
        spec |= panels[0] | {"height": height} | size
        return spec
    for t, panel in zip(heats, panels):
        panel["height"] = height
        if panel["layer"][0]["encoding"]["x"]["type"] == "ordinal":
            panel["width"] = {"step": BAND_PX}
        sub = _subtitle_of(fig, layout, t)
        if sub:
            panel["title"] = {"text": sub, "fontSize": 13}
    spec |= {"hconcat": panels, "resolve": {"scale": {"color": "independent"}, "legend": {"color": "independent"}},
             "spacing": 40}
    return spec
