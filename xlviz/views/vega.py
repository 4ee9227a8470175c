"""Plotly figures drawn with Vega-Lite on screen, where the figure is simple enough to be drawn
the same way: lines over layers, scatters of points (with segments between pairs) and bars
grouped per category with their error bars.

Why: a page's first Plotly chart makes a new tab load and run plotly.js (4.7 MB, 1.8 s on two
cores, ``bench/bench_chart_code.py``), where Streamlit's Vega-Lite element costs 0.2 s. The
Plotly figure stays the figure: the Export buttons (PNG and SVG through kaleido, CSV), run
reports and the notebook API use it; this module only reads it. A figure with anything this
module does not draw (another trace type, error bars on a scatter, a second axis, a shape
that is not a horizontal line) gets ``None`` from :func:`vega_spec` and is drawn by Plotly, as before.
Heatmaps are :mod:`xlviz.views.vega_heatmap`'s.
"""

from __future__ import annotations

import json
from typing import Any

from xlviz.views.vega_base import DASHES, num as _num, plain as _plain
from xlviz.views.vega_heatmap import heatmap_spec

FILLS = [1.0, 0.6, 0.35, 0.15]  # bars' fill opacity per Plotly pattern: none, the first, the second, the rest
LEGEND_PX = 900  # the width a legend's columns are counted for (a tab at full width on a laptop)


def _hlines(fig) -> list[dict] | None:
    """The figure's horizontal lines (``add_hline``) with their labels, or None for any other shape."""
    rules = []
    for s in fig.layout.shapes or ():
        y0, y1 = _num(s.y0), _num(s.y1)
        if s.type != "line" or str(s.xref or "").replace(" ", "") != "xdomain" or y0 is None or y0 != y1:
            return None
        rules.append({"y": y0, "label": "", "color": (s.line.color if s.line else None) or "gray",
                      "dash": DASHES.get((s.line.dash if s.line else None) or "solid", [1, 0])})
    for a in fig.layout.annotations or ():
        y = _num(a.y)
        hit = next((r for r in rules if y is not None and r["y"] == y), None)
        if hit is None or str(a.xref or "").replace(" ", "") != "xdomain":
            return None
        hit["label"] = _plain(a.text)
    return rules


def _axis(axis, title: str) -> dict:
    out: dict[str, Any] = {"title": title or None, "grid": True}
    if axis.showticklabels is False:
        out["labels"] = False
        out["ticks"] = False
    if _num(axis.dtick) == 1:
        out["tickMinStep"] = 1
        out["format"] = "d"
    return out


def _legend(names: list[str], symbol: str) -> dict:
    """A legend under the chart, as many columns as fit (labels never cut)."""
    longest = max(len(n) for n in names)
    return {"orient": "bottom", "direction": "horizontal", "title": None, "symbolType": symbol,
            "columns": max(1, min(len(names), LEGEND_PX // (7 * longest + 48))), "labelLimit": 0}


def _colour(names: list[str], colour: dict[str, str], legend: dict) -> dict:
    return {"field": "series", "type": "nominal", "legend": legend, "scale": {"domain": names, "range": [colour[n] for n in names]}}


def _titles(lay) -> tuple[str, str]:
    return _plain(lay.xaxis.title.text), _plain(lay.yaxis.title.text)


def _scale(axis) -> dict:
    """The axis's fixed range, else Plotly's autorange (which, unlike Vega-Lite, does not start at 0)."""
    return {"domain": [float(v) for v in axis.range], "nice": False} if axis.range is not None else {"zero": False}


def _series(fig) -> tuple[list[str], dict[str, str]] | None:
    """The traces' legend names in order and each one's colour (None: two traces share a name)."""
    names = [_plain(t.name) or f"trace {i}" for i, t in enumerate(fig.data)]
    if len(set(names)) != len(names):
        return None
    colour = {}
    for n, t in zip(names, fig.data):
        line = t.line.color if t.type == "scatter" and "lines" in (t.mode or "lines+markers") else None
        colour[n] = line or (t.marker.color if isinstance(t.marker.color, str) else None) or "#1f77b4"
    return names, colour


def _scatter_layers(fig, names: list[str], colour: dict[str, str]) -> tuple[list[dict], bool] | None:
    """Scatter traces as lines (with points), points (hover text in the tooltip) or segments
    (a line broken by ``None`` gaps: one segment per pair); and whether the scales are equal."""
    lay = fig.layout
    lines, points, segments = [], [], []
    dash: dict[str, list[int]] = {}
    for name, t in zip(names, fig.data):
        if t.error_y.array is not None or t.error_x.array is not None or t.fill not in (None, "none"):
            return None
        mode = t.mode or "lines+markers"
        xs, ys = list(t.x if t.x is not None else ()), list(t.y if t.y is not None else ())
        texts = list(t.text) if isinstance(t.text, (list, tuple)) else [t.text] * len(xs)
        if len(xs) != len(ys):
            return None
        gaps = any(x is None or y is None for x, y in zip(xs, ys))
        if "lines" in mode and gaps:  # pairs joined by a segment each, None between pairs
            if "markers" in mode:
                return None
            run: list[tuple] = []
            for x, y in list(zip(xs, ys)) + [(None, None)]:
                if x is None or y is None:
                    segments += [{"series": name, "x": a[0], "y": a[1], "x2": b[0], "y2": b[1]} for a, b in zip(run, run[1:])]
                    run = []
                else:
                    run.append((_num(x), _num(y)))
        elif "lines" in mode:
            dash[name] = DASHES.get(t.line.dash or "solid", [1, 0])
            lines += [{"series": name, "x": _num(x), "y": _num(y)} for x, y in zip(xs, ys)]
        elif "markers" in mode:
            points += [{"series": name, "x": _num(x), "y": _num(y), "text": _plain(s)} for x, y, s in zip(xs, ys, texts)]
        else:
            return None
    x_title, y_title = _titles(lay)
    x_scale, y_scale = _scale(lay.xaxis), _scale(lay.yaxis)
    equal = lay.yaxis.scaleanchor == "x"
    if equal:  # one unit is as long on both axes: the same span on a square plot
        xv = [r["x"] for r in points + lines if r["x"] is not None] + [v for r in segments for v in (r["x"], r["x2"])]
        yv = [r["y"] for r in points + lines if r["y"] is not None] + [v for r in segments for v in (r["y"], r["y2"])]
        if xv and yv:
            half = max(max(xv) - min(xv), max(yv) - min(yv)) / 2 * 1.05 or 1.0
            cx, cy = (max(xv) + min(xv)) / 2, (max(yv) + min(yv)) / 2
            x_scale, y_scale = {"domain": [cx - half, cx + half], "nice": False}, {"domain": [cy - half, cy + half], "nice": False}
    legend = _legend(names, "stroke" if lines else "circle")
    color = _colour(names, colour, legend)
    x = {"field": "x", "type": "quantitative", "title": x_title or None, "axis": _axis(lay.xaxis, x_title), "scale": x_scale}
    y = {"field": "y", "type": "quantitative", "title": y_title or None, "axis": _axis(lay.yaxis, y_title), "scale": y_scale}
    fade = {"condition": {"param": "legend", "value": 1}, "value": 0.15}
    layers: list[dict] = []
    if segments:
        layers.append({"data": {"values": segments}, "mark": {"type": "rule", "strokeWidth": 1},
                       "encoding": {"x": x, "y": y, "x2": {"field": "x2"}, "y2": {"field": "y2"}, "color": color}})
    if lines:
        enc = {"x": x, "y": y, "color": color, "opacity": fade,
               "tooltip": [{"field": "series", "title": "series"}, {"field": "x", "title": x_title or "x"},
                           {"field": "y", "title": y_title or "y", "format": ".4~g"}]}
        if len(set(map(tuple, dash.values()))) > 1:
            enc["strokeDash"] = {"field": "series", "type": "nominal", "legend": legend,
                                 "scale": {"domain": [n for n in names if n in dash], "range": [dash[n] for n in names if n in dash]}}
        layers.append({"data": {"values": lines}, "mark": {"type": "line", "point": {"filled": True, "size": 36}, "strokeWidth": 2},
                       "encoding": enc})
    if points:
        layers.append({"data": {"values": points}, "mark": {"type": "circle", "size": 42, "opacity": 0.8},
                       "encoding": {"x": x, "y": y, "color": color, "opacity": fade,
                                    "tooltip": [{"field": "text", "title": "text"}, {"field": "series", "title": "series"}]}})
    return layers, equal


def _bar_layers(fig, names: list[str], colour: dict[str, str]) -> list[dict] | None:
    """Vertical bars side by side per category (``barmode="group"``), with their error bars; a
    patterned bar (Plotly's ``pattern_shape``, e.g. another language) is drawn lighter, one
    shade per pattern, with its outline in full colour (Vega-Lite has no fill patterns)."""
    lay = fig.layout
    if len(fig.data) > 1 and lay.barmode != "group":
        return None
    rows = []
    shape: dict[str, str] = {}
    for name, t in zip(names, fig.data):
        if (t.orientation or "v") != "v" or t.base is not None or not isinstance(t.marker.color, str):
            return None
        xs, ys = list(t.x if t.x is not None else ()), list(t.y if t.y is not None else ())
        if len(xs) != len(ys) or any(isinstance(x, (int, float)) for x in xs):
            return None
        plus = list(t.error_y.array) if t.error_y.array is not None else [None] * len(ys)
        minus = list(t.error_y.arrayminus) if t.error_y.arrayminus is not None else plus
        shape[name] = t.marker.pattern.shape or ""
        for x, y, p, m in zip(xs, ys, plus, minus):
            y, p, m = _num(y), _num(p), _num(m)
            rows.append({"series": name, "x": str(x), "y": y, "lo": None if y is None or m is None else y - m,
                         "hi": None if y is None or p is None else y + p})
    x_title, y_title = _titles(lay)
    # each bar placed by number (category k at k, its group's bars side by side in 0.8 of a unit), as Plotly
    # places them: Vega-Lite's xOffset put a second layer's error bars beside their bars once there were many
    order = list(dict.fromkeys(r["x"] for r in rows))
    category, slot = {c: k for k, c in enumerate(order)}, {n: i for i, n in enumerate(names)}
    width = 0.8 / len(names)
    for r in rows:
        r["at"] = category[r["x"]] + (slot[r["series"]] - (len(names) - 1) / 2) * width
        r["from"], r["to"] = r["at"] - width / 2, r["at"] + width / 2
    legend = _legend(names, "square")
    axis = {"values": list(range(len(order))), "labelExpr": f"{json.dumps(order)}[datum.value]", "grid": False, "labelAngle": 0,
            "ticks": False}
    scale = {"domain": [-0.5, len(order) - 0.5], "nice": False, "zero": False}
    x = {"field": "from", "type": "quantitative", "title": x_title or None, "axis": axis, "scale": scale}
    y = {"field": "y", "type": "quantitative", "title": y_title or None, "scale": _scale(lay.yaxis)}
    enc = {"x": x, "x2": {"field": "to"}, "y": y, "y2": {"datum": 0}, "color": _colour(names, colour, legend),
           "tooltip": [{"field": "series", "title": "series"}, {"field": "x", "title": x_title or "x"},
                       {"field": "y", "title": y_title or "y", "format": ".4~g"}, {"field": "lo", "title": "interval from", "format": ".4~g"},
                       {"field": "hi", "title": "to", "format": ".4~g"}]}
    # each pattern a lighter fill, in the order Plotly gave them (no pattern: full colour)
    patterns = [v for v in dict.fromkeys(shape.values()) if v]
    fill = {"": FILLS[0]} | {v: FILLS[min(i + 1, len(FILLS) - 1)] for i, v in enumerate(patterns)}
    patterned = bool(patterns)
    if patterned:
        enc["fillOpacity"] = {"field": "series", "type": "nominal", "legend": legend,
                              "scale": {"domain": names, "range": [fill[shape[n]] for n in names]}}
    bars = {"data": {"values": rows}, "mark": {"type": "bar", "stroke": None, "strokeWidth": 1.5}, "encoding": enc}
    if patterned:
        bars["encoding"]["stroke"] = {"field": "series", "type": "nominal", "legend": None,
                                      "scale": {"domain": names, "range": [colour[n] for n in names]}}
    errors = [r for r in rows if r["lo"] is not None and r["hi"] is not None]
    layers = [bars]
    if errors:
        layers.append({"data": {"values": errors}, "mark": {"type": "rule", "color": "#444", "strokeWidth": 1.2},
                       "encoding": {"x": {"field": "at", "type": "quantitative"}, "y": {"field": "lo", "type": "quantitative"},
                                    "y2": {"field": "hi"}}})
    return layers


def vega_spec(fig) -> dict | None:
    """A Vega-Lite spec that draws ``fig`` as Plotly would, or None when it cannot.

    Drawn: scatter traces as lines (with or without markers), as points (hover text in the
    tooltip) or, for a line trace broken by ``None`` gaps, as one segment per pair; vertical
    bars grouped per category, with error bars; horizontal lines with their labels; the title,
    axis titles, a fixed y range, integer ticks, hidden tick labels and equal scales
    (``scaleanchor``). The legend is below the chart; on lines and points a click on it fades
    the other series, and drag pans, scroll zooms, as on a Plotly chart."""
    lay = fig.layout
    if any(t.type == "heatmap" for t in fig.data):
        return heatmap_spec(fig)
    if any(k in lay and lay[k] is not None for k in ("yaxis2", "xaxis2")) or lay.grid.rows or lay.images or not fig.data:
        return None
    if any(t.yaxis not in (None, "y") or t.xaxis not in (None, "x") for t in fig.data):
        return None
    kinds = {t.type for t in fig.data}
    if kinds not in ({"scatter"}, {"bar"}):
        return None
    rules = _hlines(fig)
    series = _series(fig)
    if rules is None or series is None:
        return None
    equal = False
    if kinds == {"scatter"}:
        got = _scatter_layers(fig, *series)
        if got is None:
            return None
        layers, equal = got
        # the legend click and the zoom live on the last data layer (Vega-Lite shares a layer's params with the others)
        layers[-1]["params"] = [{"name": "legend", "select": {"type": "point", "fields": ["series"]}, "bind": "legend"},
                                {"name": "zoom", "select": "interval", "bind": "scales"}]
    else:
        layers = _bar_layers(fig, *series)
        if layers is None:
            return None
    for r in rules:
        layers.append({"data": {"values": [{"y": r["y"], "label": r["label"]}]}, "mark": {"type": "rule", "strokeDash": r["dash"],
                       "color": r["color"]}, "encoding": {"y": {"field": "y", "type": "quantitative"}}})
        if r["label"]:
            layers.append({"data": {"values": [{"y": r["y"], "label": r["label"]}]},
                           "mark": {"type": "text", "align": "right", "baseline": "top", "dy": 4, "x": "width", "color": r["color"]},
                           "encoding": {"y": {"field": "y", "type": "quantitative"}, "text": {"field": "label"}}})
    margin = lay.margin
    height = int(lay.height or 450) - int(margin.t if margin.t is not None else 80) - int(margin.b if margin.b is not None else 80)
    spec: dict[str, Any] = {"$schema": "https://vega.github.io/schema/vega-lite/v5.json",
                            "title": {"text": _plain(lay.title.text), "anchor": "start"} if lay.title.text else None,
                            "height": 440 if equal else max(240, height), "layer": layers,
                            # the width fits the container, the height is the plot's (legend and title add to it)
                            "autosize": {"type": "fit-x", "contains": "padding"}}
    if equal:  # a square plot, as Plotly draws one with scaleanchor: drawn at its own width (``plotly``)
        spec["width"] = 440
        spec["autosize"] = {"type": "pad"}
    return {k: v for k, v in spec.items() if v is not None}


def vega_clicks(spec: dict) -> list[str]:
    """The names of a spec's click selections (point selections bound to nothing: a legend's
    or a zoom's are not), which a page listens to as Streamlit's ``selection_mode``."""
    names = [p["name"] for p in spec.get("params", ()) if isinstance(p.get("select"), dict) and "bind" not in p
             and p["select"].get("type") == "point"]
    for part in (*spec.get("layer", ()), *spec.get("hconcat", ())):
        names += vega_clicks(part)
    return names
