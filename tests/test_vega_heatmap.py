"""Plotly heatmaps drawn with Vega-Lite (xlviz.views.vega_heatmap): the cells, colours, token
labels, separators, outlines and cell texts of the Attention page's figures, the model view's
click selection, valid Vega-Lite, and the figures left to Plotly (None)."""

from __future__ import annotations

import altair as alt
import numpy as np
import plotly.graph_objects as go

from tests.app_fixtures import heat_values, layer_rows, outlined_heads, tile_heads
from xlviz.views import attention as av
from xlviz.views.vega import vega_clicks, vega_spec
from xlviz.views.vega_heatmap import CLICK, MAX_CELLS

TOKENS = ["[CLS]", "a", "b<c>", "[SEP]", "x", "[SEP]"]
SEGMENT = [-1, 0, 0, -1, 1, -1]


def _attn(n: int = 6, seed: int = 0) -> np.ndarray:
    a = np.random.default_rng(seed).random((n, n))
    return a / a.sum(1, keepdims=True)


def test_a_map_holds_every_cell_its_colours_and_token_labels():
    attn = _attn()
    fig = av.heatmap(attn, TOKENS, SEGMENT, "A + B · layer 1 & more", marks=[(1, 4)])
    spec = vega_spec(fig)
    alt.LayerChart.from_dict(spec, validate=True)
    np.testing.assert_allclose(heat_values(spec), attn, atol=5e-6)  # every cell, rounded to 5 decimals
    cells = spec["layer"][0]["encoding"]
    # Plotly's Blues from 0 to the largest weight: its nine stops at their values
    assert cells["color"]["scale"]["range"][0] == "rgb(247,251,255)" and cells["color"]["scale"]["range"][-1] == "rgb(8,48,107)"
    np.testing.assert_allclose(cells["color"]["scale"]["domain"], np.linspace(0, attn.max(), 9))
    # the tokens label the cells (text, never HTML), coloured by sentence, and the keys' labels are on top
    x = cells["x"]["axis"]
    assert x["orient"] == "top" and x["values"] == [0, 1, 2, 3, 4, 5] and x["tickCount"] == 6
    assert '"b<c>"' in x["labelExpr"] and "span" not in x["labelExpr"]
    assert '"#0072B2", "#0072B2", "#888888", "#D55E00"' in x["labelColor"]["expr"]
    assert cells["y"]["scale"]["reverse"] is True  # the first query at the top
    # a cell spans its position ± 0.5
    assert {"calculate": "datum.x - 0.5", "as": "x0"} in spec["transform"]
    # the line between the sentences (after A's last token, 2), both ways, and the outlined aligned cell
    assert layer_rows(spec, "rule") == [{"x": 2.5}, {"y": 2.5}]
    assert layer_rows(spec, "rect", stroke="#009E73") == [{"x": 3.5, "x2": 4.5, "y": 0.5, "y2": 1.5}]
    assert spec["title"] == {"text": "A + B · layer 1 & more", "anchor": "middle", "subtitle": "rows: queries · columns: keys"}
    tip = next(t["calculate"] for t in spec["transform"] if t["as"] == "tip")
    assert tip == "datum.t" and {c["t"] for c in spec["data"]["values"]} >= {f"a → b<c>: {attn[1, 2]:.3f}"}


def test_the_model_view_clicks_give_the_thumbnails_layer_and_head():
    attn = np.random.default_rng(1).random((2, 3, 5, 5))
    fig = av.overview(attn, [1, 3], [0, 1, 2], segment=[-1, 0, 0, 1, -1], selected=(3, 2))
    spec = vega_spec(fig)
    alt.LayerChart.from_dict(spec, validate=True)
    assert vega_clicks(spec) == [CLICK]
    assert spec["layer"][0]["params"][0]["select"] == {"type": "point", "fields": ["layer", "head"], "on": "click"}
    assert list(tile_heads(spec).values()) == [(1, 0), (1, 1), (1, 2), (3, 0), (3, 1), (3, 2)]
    assert outlined_heads(spec) == [(3, 2)]
    assert [r["text"] for r in layer_rows(spec, "text")] == ["L1 H0", "L1 H1", "L1 H2", "L3 H0", "L3 H1", "L3 H2"]
    # the cells: each thumbnail's map, where the Plotly figure has it (no blank between tiles is sent)
    tiles = fig.data[0].meta["tiles"]
    cells = spec["data"]["values"]
    assert len(cells) == 6 * 25
    for k, tile in enumerate(tiles):
        mine = [c for c in cells if c["k"] == k]
        z = np.zeros((5, 5))
        for c in mine:
            z[int(c["y"]) - tile["y0"], int(c["x"]) - tile["x0"]] = c["z"]
        i, j = [1, 3].index(tile["layer"]), tile["head"]
        np.testing.assert_allclose(z, attn[i, j], atol=5e-6)
    tip = next(t["calculate"] for t in spec["transform"] if t["as"] == "tip")
    assert tip.endswith('[datum.k] + ": click to open it in \\u201cOne layer and head\\u201d"'), tip
    assert av.clicked_head(av.clicked_points({"selection": {CLICK: [{"layer": 3, "head": 1}]}}), [1, 3], range(3)) == (3, 1)
    assert av.clicked_head(av.clicked_points({"selection": {CLICK: {}}}), [1, 3], range(3)) is None  # a click that clears


def test_share_matrices_side_by_side_each_with_its_scale_and_values():
    a, b = np.array([[0.1, 0.5], [0.25, np.nan]]), np.array([[0.0, 0.02], [0.03, 0.04]])
    spec = vega_spec(av.share_heatmaps([(a, "to the other sentence"), (b, "to the aligned word")]))
    alt.HConcatChart.from_dict(spec, validate=True)
    assert [p["title"]["text"] for p in spec["hconcat"]] == ["to the other sentence", "to the aligned word"]
    assert spec["resolve"]["scale"]["color"] == "independent"
    first, second = spec["hconcat"]
    assert [(c["x"], c["y"], c["z"], c["t"]) for c in first["data"]["values"]] == [
        ("h0", "L0", 0.1, "0.10"), ("h1", "L0", 0.5, "0.50"), ("h0", "L1", 0.25, "0.25")]  # NaN: no cell
    assert first["layer"][0]["encoding"]["color"]["scale"]["domain"][-1] == 0.5
    assert second["layer"][0]["encoding"]["color"]["scale"]["domain"][-1] == 0.04  # its own scale
    assert first["layer"][0]["encoding"]["y"]["scale"]["domain"] == ["L0", "L1"]  # layer 0 at the top
    assert first["layer"][1]["encoding"]["text"] == {"field": "t"}  # the values written in the cells
    tip = next(t["calculate"] for t in first["transform"] if t["as"] == "tip")
    assert tip == "\"layer \" + '' + datum.y + \", head \" + '' + datum.x + \": \" + format(datum.z, \".3f\")"


def test_maps_it_cannot_draw_the_same_are_left_to_plotly():
    big = int(np.sqrt(MAX_CELLS)) + 1
    assert vega_spec(av.heatmap(_attn(big), [f"t{i}" for i in range(big)], [0] * big, "long")) is None  # too many cells
    assert vega_spec(go.Figure(go.Heatmap(z=[[1, 2]], zsmooth="best"))) is None  # smoothed
    assert vega_spec(go.Figure(go.Heatmap(z=[[1, 2, 3]], x=[0, 1, 5], y=[0]))) is None  # uneven cells
    fig = go.Figure([go.Heatmap(z=[[1, 2]]), go.Scatter(x=[0], y=[0])])  # a visible scatter on the map
    assert vega_spec(fig) is None
    fig = go.Figure(go.Heatmap(z=[[1, 2]])).add_shape(type="circle", x0=0, x1=1, y0=0, y1=1)
    assert vega_spec(fig) is None


def test_a_large_map_is_drawn_on_a_canvas():
    from xlviz.views.vega_heatmap import CANVAS_CELLS

    small = vega_spec(av.heatmap(_attn(), TOKENS, SEGMENT, "small"))
    assert "usermeta" not in small  # SVG: Streamlit's default, each cell an element a test can find
    n = int(np.sqrt(CANVAS_CELLS)) + 1
    big = vega_spec(av.heatmap(_attn(n), [f"t{i}" for i in range(n)], [0] * n, "big"))
    assert big["usermeta"] == {"embedOptions": {"renderer": "canvas"}} and len(big["data"]["values"]) == n * n
