"""Plotly figures drawn with Vega-Lite on screen, where the figure is simple enough to be drawn
the same way: lines over layers and scatters of points (with segments between pairs).

Why: a page's first Plotly chart makes a new tab load and run plotly.js (4.7 MB, 1.8 s on two
cores, ``bench/bench_chart_code.py``), where Streamlit's Vega-Lite element costs 0.2 s. The
Plotly figure stays the figure: the Export buttons (PNG and SVG through kaleido, CSV), run
reports and the notebook API use it; this module only reads it. A figure with anything this
module does not draw (another trace type, error bars, a second axis, a shape that is not a
horizontal line) gets ``None`` from :func:`vega_spec` and is drawn by Plotly, as before.
"""

from __future__ import annotations

import re
from typing import Any

# Plotly's dash names as SVG dash arrays (plotly draws "dot" as 3,3 px at width 2, and so on)
DASHES = {"solid": [1, 0], "dot": [2, 3], "dash": [8, 4], "longdash": [14, 5], "dashdot": [8, 3, 2, 3],
          "longdashdot": [14, 4, 2, 4]}
LEGEND_PX = 900  # the width a legend's columns are counted for (a tab at full width on a laptop)


def _plain(text: Any) -> str:
    """Plotly's title markup as plain text (Vega-Lite draws text as it is)."""
    return re.sub(r"<[^>]+>", "", str(text or "").replace("<br>", " ")).strip()


def _num(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if f == f else None


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


def vega_spec(fig) -> dict | None:
    """A Vega-Lite spec that draws ``fig`` as Plotly would, or None when it cannot.

    Drawn: scatter traces as lines (with or without markers), as points (hover text in the
    tooltip) or, for a line trace broken by ``None`` gaps, as one segment per pair; horizontal
    lines with their labels; the title, axis titles, a fixed y range, integer ticks, hidden tick
    labels and equal scales (``scaleanchor``). The legend is below the chart and a click on it
    fades the other series; drag to pan, scroll to zoom, as on a Plotly chart."""
    lay = fig.layout
    if any(k in lay and lay[k] is not None for k in ("yaxis2", "xaxis2")) or lay.grid.rows or lay.images:
        return None
    rules = _hlines(fig)
    if rules is None:
        return None
    lines, points, segments = [], [], []
    names: list[str] = []  # legend order
    colour: dict[str, str] = {}
    dash: dict[str, list[int]] = {}
    for t in fig.data:
        if t.type != "scatter" or t.error_y.array is not None or t.error_x.array is not None or t.fill not in (None, "none"):
            return None
        if t.yaxis not in (None, "y") or t.xaxis not in (None, "x"):
            return None
        name = _plain(t.name) or f"trace {len(names)}"
        mode = t.mode or "lines+markers"
        xs, ys = list(t.x if t.x is not None else ()), list(t.y if t.y is not None else ())
        texts = list(t.text) if isinstance(t.text, (list, tuple)) else [t.text] * len(xs)
        if len(xs) != len(ys):
            return None
        if name not in colour:
            names.append(name)
            colour[name] = ((t.line.color if "lines" in mode else None) or (t.marker.color if isinstance(t.marker.color, str) else None)
                            or "#1f77b4")
        gaps = any(x is None or y is None for x, y in zip(xs, ys))
        if "lines" in mode and gaps:  # pairs joined by a segment each, None between pairs
            run: list[tuple] = []
            for x, y in list(zip(xs, ys)) + [(None, None)]:
                if x is None or y is None:
                    segments += [{"series": name, "x": a[0], "y": a[1], "x2": b[0], "y2": b[1]} for a, b in zip(run, run[1:])]
                    run = []
                else:
                    run.append((_num(x), _num(y)))
            if "markers" in mode:
                return None
            continue
        if "lines" in mode:
            dash[name] = DASHES.get(t.line.dash or "solid", [1, 0])
            lines += [{"series": name, "x": _num(x), "y": _num(y), "marker": "markers" in mode} for x, y in zip(xs, ys)]
        elif "markers" in mode:
            points += [{"series": name, "x": _num(x), "y": _num(y), "text": _plain(s)} for x, y, s in zip(xs, ys, texts)]
        else:
            return None
    if not names:
        return None
    x_title, y_title = _plain(lay.xaxis.title.text), _plain(lay.yaxis.title.text)
    x_axis, y_axis = _axis(lay.xaxis, x_title), _axis(lay.yaxis, y_title)
    x_scale: dict[str, Any] = {"zero": False}
    y_scale: dict[str, Any] = {"zero": False}
    if lay.yaxis.range is not None:
        y_scale = {"domain": [float(v) for v in lay.yaxis.range]}
    if lay.xaxis.range is not None:
        x_scale = {"domain": [float(v) for v in lay.xaxis.range]}
    equal = lay.yaxis.scaleanchor == "x"
    if equal:  # one unit is as long on both axes: the same span on a square plot
        xv = [r["x"] for r in points + lines if r["x"] is not None] + [v for r in segments for v in (r["x"], r["x2"])]
        yv = [r["y"] for r in points + lines if r["y"] is not None] + [v for r in segments for v in (r["y"], r["y2"])]
        if xv and yv:
            half = max(max(xv) - min(xv), max(yv) - min(yv)) / 2 * 1.05 or 1.0
            cx, cy = (max(xv) + min(xv)) / 2, (max(yv) + min(yv)) / 2
            x_scale, y_scale = {"domain": [cx - half, cx + half], "nice": False}, {"domain": [cy - half, cy + half], "nice": False}
    longest = max(len(n) for n in names)
    legend = {"orient": "bottom", "direction": "horizontal", "title": None, "symbolType": "stroke" if lines else "circle",
              "columns": max(1, min(len(names), LEGEND_PX // (7 * longest + 48))), "labelLimit": 0}
    color = {"field": "series", "type": "nominal", "legend": legend,
             "scale": {"domain": names, "range": [colour[n] for n in names]}}
    x = {"field": "x", "type": "quantitative", "title": x_title or None, "axis": x_axis, "scale": x_scale}
    y = {"field": "y", "type": "quantitative", "title": y_title or None, "axis": y_axis, "scale": y_scale}
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
    # the legend click and the zoom live on the last data layer (Vega-Lite shares a layer's params with the others)
    layers[-1]["params"] = [{"name": "legend", "select": {"type": "point", "fields": ["series"]}, "bind": "legend"},
                            {"name": "zoom", "select": "interval", "bind": "scales"}]
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
