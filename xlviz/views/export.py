"""Figures and runs out of the app: PNG/SVG/CSV of any chart, and a self-contained HTML report.

No Streamlit here. Images are rendered offline by kaleido with the system's chromium (the hub
and Chrome downloads are unreachable); the HTML report inlines plotly.js so it opens without a
network (no CDN).
"""

from __future__ import annotations

import html
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from xlviz.errors import XlvizError

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")


def _browser() -> str:
    """The chromium kaleido drives: $BROWSER_PATH, else the system's."""
    found = os.environ.get("BROWSER_PATH") or next((c for c in CHROMIUM_CANDIDATES if Path(c).exists()), None) \
        or shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        raise XlvizError("image export needs a chromium browser (apt-get install chromium) or $BROWSER_PATH")
    os.environ["BROWSER_PATH"] = found
    return found


def figure_image(fig, fmt: str = "png", scale: float = 2.0) -> bytes:
    """PNG or SVG bytes of a plotly figure (kaleido + system chromium, offline)."""
    if fmt not in ("png", "svg"):
        raise XlvizError(f"unknown image format {fmt!r}; choose png or svg", field="format")
    _browser()
    try:
        return fig.to_image(format=fmt, scale=scale if fmt == "png" else 1, width=fig.layout.width or 1000,
                            height=fig.layout.height or 500)
    except Exception as e:  # noqa: BLE001 - kaleido's errors are long; one line for the user
        raise XlvizError(f"could not render the {fmt.upper()} image: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from None


def figure_frame(fig) -> pd.DataFrame:
    """The data behind a figure, one row per point: trace, x, y (and z for heatmaps), plus the
    fields a figure names in ``layout.meta["customdata"]`` (e.g. a bar's metric, EM or F1,
    which only its facet showed)."""
    meta = fig.layout.meta if isinstance(fig.layout.meta, dict) else {}
    extra = [str(f) for f in meta.get("customdata", [])] if isinstance(meta.get("customdata"), (list, tuple)) else []
    rows = []
    for i, t in enumerate(fig.data):
        name = t.name if t.name else f"trace {i}"
        z = getattr(t, "z", None)
        tiles = t.meta.get("tiles") if z is not None and isinstance(t.meta, dict) else None
        if tiles:  # one heatmap tiled from several maps (the model view): each map's cells under its name
            (h, w), z = t.meta["size"], np.asarray(z, dtype=float)  # each tile's rows and columns
            for tile in tiles:
                block = z[tile["y0"]:tile["y0"] + h, tile["x0"]:tile["x0"] + w]
                rows += [{"trace": tile["name"], "x": c, "y": r, "z": float(v)} for (r, c), v in np.ndenumerate(block)]
            continue
        if z is not None:
            xs = list(t.x) if getattr(t, "x", None) is not None else list(range(len(z[0]) if len(z) else 0))
            ys = list(t.y) if getattr(t, "y", None) is not None else list(range(len(z)))
            for r, row in enumerate(z):
                for c, v in enumerate(row):
                    rows.append({"trace": name, "x": xs[c] if c < len(xs) else c, "y": ys[r] if r < len(ys) else r, "z": v})
            continue
        xs, ys = getattr(t, "x", None), getattr(t, "y", None)
        if xs is None and ys is None:
            continue
        xs = list(xs) if xs is not None else list(range(len(ys)))
        ys = list(ys) if ys is not None else [None] * len(xs)
        custom = list(t.customdata) if extra and getattr(t, "customdata", None) is not None else []
        for i, (x, y) in enumerate(zip(xs, ys)):
            row = {"trace": name, "x": x, "y": y}
            if i < len(custom):
                row.update({f: custom[i][j] for j, f in enumerate(extra) if j < len(custom[i])})
            rows.append(row)
    if isinstance(meta.get("left_out"), (list, tuple)):  # a chart of result rows: each bar "ok", and the rows it
        # does not draw (degenerate: no result) listed with their verdict and no score
        rows = [{**r, "verdict": "ok"} for r in rows] + [dict(r) for r in meta["left_out"] if isinstance(r, dict)]
        extra = [*extra, "verdict"]
    cols = ["trace", "x", "y"] + (["z"] if any("z" in r for r in rows) else []) + extra
    return pd.DataFrame(rows, columns=cols)


def figure_csv(fig) -> bytes:
    return figure_frame(fig).to_csv(index=False).encode("utf-8")


# --- one-click run report ---------------------------------------------------------------------

_CSS = """body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:1100px;color:#222}
table{border-collapse:collapse;font-size:.9em}td,th{border:1px solid #ccc;padding:.2rem .5rem;text-align:right}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}h2{margin-top:2rem}"""


def _cell(column: str, value) -> str:
    """A results cell as the report writes it: n/a for a missing number (never "None"), scores
    with one decimal, F1 L2/L1 ratios with two (0.94, as the app and `xlviz report`)."""
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return "n/a"
    if isinstance(value, float):
        return f"{value:.2f}" if column.endswith("/L1") else f"{value:.1f}"
    return str(value)


def go_copy(fig):
    """A copy of a plotly figure (the app's session keeps its own)."""
    import plotly.graph_objects as go

    return go.Figure(fig)


def run_report_html(run, figures: dict[str, object] | None = None) -> str:
    """A self-contained HTML page for one run: config, status, loss curves, results table and
    ``figures`` (title -> plotly figure: analyses computed so far). plotly.js is inlined once."""
    from xlviz.views.runs import compare_table, flat_config, loss_figure, results_frame

    try:
        cfg = run.config()
    except XlvizError:
        cfg = {}
    try:
        status = run.status()
    except XlvizError:
        status = {}
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>xlviz run {html.escape(run.name)}</title>"
             f"<style>{_CSS}</style></head><body><h1>Run {html.escape(run.name)}</h1>",
             f"<p>State: {html.escape(str(status.get('state', '?')))} · stages done: "
             f"{html.escape(', '.join(status.get('stages_done') or []) or 'none')}</p>"]
    figs: list[tuple[str, object]] = []
    try:
        loss = loss_figure(run.metrics(all_attempts=True))
    except XlvizError:  # unreadable metrics (xlviz.confined): the report goes without the curve
        loss = None
    if loss is not None:
        figs.append(("Training loss", loss))
    results = results_frame([run])
    parts.append("<h2>Results (%)</h2>")
    if results.empty:
        parts.append("<p>No results yet.</p>")
    else:  # scores with one decimal, F1 L2/L1 ratios with two (0.94), as the app shows them
        table = compare_table(results)
        shown = pd.DataFrame({c: [_cell(str(c), v) for v in table[c].tolist()] for c in table.columns})
        parts.append("<div style='overflow-x:auto'>" + shown.to_html(index=False) + "</div>")
    # the live view's loss chart (drawn as "loss_<run>") is the one above: not a second time
    figs += [(t, f) for t, f in (figures or {}).items() if not (loss is not None and str(t).startswith("loss_"))]
    from xlviz.views.figures import tidy

    first = True
    for title, fig in figs:
        fig = tidy(go_copy(fig))  # axis labels grow their margins (as in the app), not over the ticks
        parts.append(f"<h2>{html.escape(title)}</h2>")
        parts.append(fig.to_html(full_html=False, include_plotlyjs=True if first else False))
        first = False
    flat = flat_config(cfg)
    parts.append("<h2>Config</h2><table><tr><th>key</th><th>value</th></tr>" + "".join(
        f"<tr><td>{html.escape(k)}</td><td>{html.escape(json.dumps(v) if not isinstance(v, str) else v)}</td></tr>"
        for k, v in sorted(flat.items())) + "</table>")
    parts.append("</body></html>")
    return "\n".join(parts)
