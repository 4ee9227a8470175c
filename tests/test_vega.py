"""Plotly figures drawn with Vega-Lite (xlviz.views.vega): the spec holds the figure's numbers,
names and colours exactly, is valid Vega-Lite (Altair's schema), and a figure it cannot draw
the same way is left to Plotly (None)."""

from __future__ import annotations

import altair as alt
import plotly.graph_objects as go
import pytest

from xlviz.views.vega import DASHES, vega_spec
from xlviz.views import figures as vf


def _layer(spec: dict, mark: str) -> dict:
    return next(la for la in spec["layer"] if (la["mark"]["type"] if isinstance(la["mark"], dict) else la["mark"]) == mark)


def _retrieval():
    rows = [{"system": s, "layer": layer, "direction": d, "retrieval": (0.1 * layer + (0.05 if s == "b" else 0)) if d == "en → sov" else 0.3}
            for s in ("a", "b") for d in ("en → sov", "sov → en") for layer in range(3)]
    return vf.tidy(vf.layer_lines(rows, "retrieval", "Sentence <b>retrieval</b>", dash="direction", y_label="accuracy (%)",
                                  baseline=0.5, colours={"a": "#123456"}))


def test_lines_hold_the_figures_points_names_and_colours():
    fig = _retrieval()
    spec = vega_spec(fig)
    alt.LayerChart.from_dict(spec, validate=True)  # valid Vega-Lite
    line = _layer(spec, "line")
    got = {(r["series"], r["x"], r["y"]) for r in line["data"]["values"]}
    want = {(t.name, float(x), float(y)) for t in fig.data for x, y in zip(t.x, t.y)}
    assert got == want and len(got) == 12
    scale = line["encoding"]["color"]["scale"]
    assert dict(zip(scale["domain"], scale["range"])) == {t.name: t.line.color for t in fig.data}
    assert scale["domain"] == ["a, en → sov", "a, sov → en", "b, en → sov", "b, sov → en"]  # the legend's order
    assert scale["range"][0] == "#123456"  # the app-wide colour passed in
    dash = dict(zip(line["encoding"]["strokeDash"]["scale"]["domain"], line["encoding"]["strokeDash"]["scale"]["range"]))
    assert dash["a, en → sov"] == DASHES["solid"] and dash["a, sov → en"] == DASHES["dot"]
    assert line["encoding"]["y"]["scale"]["domain"] == [-2.0, 102.0] and line["encoding"]["y"]["title"] == "accuracy (%)"
    assert line["encoding"]["x"]["axis"]["format"] == "d"  # layers are integers
    assert spec["title"]["text"] == "Sentence retrieval"  # markup dropped
    rule, text = _layer(spec, "rule"), _layer(spec, "text")
    assert rule["data"]["values"][0]["y"] == 50.0 and text["data"]["values"][0]["label"] == "majority class"
    assert {p["name"] for p in line["params"]} == {"legend", "zoom"}  # the legend fades the others; zoom and pan


def test_a_projection_is_segments_and_points_on_equal_scales():
    rows = [{"x": float(i), "y": 3.0 * i, "language": "en" if i % 2 else "sov", "text": f"t <b>{i}</b>", "pair": i // 2 if i < 4 else None}
            for i in range(6)]
    fig = vf.tidy(vf.projection_figure(rows, "proj", axes=("PC 1 (40% of variance)", "PC 2")))
    spec = vega_spec(fig)
    alt.LayerChart.from_dict(spec, validate=True)
    segments = _layer(spec, "rule")["data"]["values"]
    assert [(s["x"], s["y"], s["x2"], s["y2"]) for s in segments] == [(0, 0, 1, 3), (2, 6, 3, 9)]  # points 4, 5: no pair
    points = _layer(spec, "circle")
    assert {(r["series"], r["text"]) for r in points["data"]["values"]} == {("sov", "t 0"), ("en", "t 1"), ("sov", "t 2"), ("en", "t 3"),
                                                                              ("sov", "t 4"), ("en", "t 5")}
    x, y = points["encoding"]["x"]["scale"]["domain"], points["encoding"]["y"]["scale"]["domain"]
    assert x[1] - x[0] == pytest.approx(y[1] - y[0]) and spec["width"] == spec["height"]  # one unit as long on both axes
    assert points["encoding"]["x"]["axis"]["labels"] is False and points["encoding"]["x"]["title"] == "PC 1 (40% of variance)"


@pytest.mark.parametrize("make", [
    lambda: go.Figure(go.Heatmap(z=[[1, 2], [3, 4]])),  # another trace type
    lambda: go.Figure(go.Bar(x=["a", "b"], y=[1, 2], marker_color="#123456", orientation="v", base=[1, 1])),  # floating bars
    lambda: go.Figure([go.Bar(x=["a"], y=[1], marker_color="#111111"), go.Bar(x=["a"], y=[2], marker_color="#222222")]).update_layout(barmode="stack"),
    lambda: go.Figure(go.Scatter(x=[0, 1], y=[1, 2], error_y=dict(array=[0.1, 0.2]))),  # error bars
    lambda: go.Figure(go.Scatter(x=[0, 1], y=[1, 2])).add_vline(x=0.5),  # a shape that is not a horizontal line
    lambda: go.Figure(go.Scatter(x=[0, 1], y=[1, 2], yaxis="y2")).update_layout(yaxis2=dict(overlaying="y")),  # a second axis
    lambda: go.Figure(go.Scatter(x=[0, 1], y=[1, 2], fill="tozeroy")),  # an area
    lambda: go.Figure(),  # nothing to draw
])
def test_what_it_cannot_draw_the_same_is_left_to_plotly(make):
    assert vega_spec(make()) is None


def test_grouped_bars_keep_their_intervals_colours_and_patterns():
    import pandas as pd
    import plotly.express as px

    df = pd.DataFrame([{"row": r, "language": lang, "category": c, "accuracy": acc, "plus": 5.0, "minus": 4.0}
                       for (r, lang), acc in ((("A · en", "en"), 60.0), (("A · sov", "sov"), 70.0), (("B · sov", "sov"), 80.0))
                       for c in ("subject", "object")])
    # as the Probing page draws agreement: colour = system, pattern = language
    fig = px.bar(df, x="category", y="accuracy", color="row", pattern_shape="language", barmode="group",
                 color_discrete_map={"A · en": "#111111", "A · sov": "#111111", "B · sov": "#222222"}, error_y="plus",
                 error_y_minus="minus", labels={"accuracy": "accuracy (%)"})
    fig.add_hline(y=50, line_dash="dot", line_color="gray")
    fig.for_each_trace(lambda t: t.update(name=t.name.split(",")[0]))
    spec = vega_spec(fig)
    alt.LayerChart.from_dict(spec, validate=True)
    bars = _layer(spec, "bar")
    assert {(r["series"], r["x"], r["y"], r["lo"], r["hi"]) for r in bars["data"]["values"]} == {
        (s, c, y, y - 4, y + 5) for s, y in (("A · en", 60.0), ("A · sov", 70.0), ("B · sov", 80.0)) for c in ("subject", "object")}
    # side by side in the legend's order around their category (0, 1), each error bar at its bar's middle
    at = {(r["series"], r["x"]): (r["from"], r["at"], r["to"]) for r in bars["data"]["values"]}
    assert at["A · en", "object"][0] == pytest.approx(1 - 0.4) and at["B · sov", "object"][2] == pytest.approx(1 + 0.4)
    assert at["A · sov", "subject"][1] == pytest.approx(0.0) and at["A · en", "subject"][2] == pytest.approx(at["A · sov", "subject"][0])
    assert "subject" in bars["encoding"]["x"]["axis"]["labelExpr"]
    assert dict(zip(bars["encoding"]["color"]["scale"]["domain"], bars["encoding"]["color"]["scale"]["range"])) == {
        "A · en": "#111111", "A · sov": "#111111", "B · sov": "#222222"}
    # the same system in two languages: the patterned (second-language) bar is lighter
    opacity = dict(zip(bars["encoding"]["fillOpacity"]["scale"]["domain"], bars["encoding"]["fillOpacity"]["scale"]["range"]))
    assert opacity["A · en"] == 1.0 and opacity["A · sov"] < 1.0
    errors = [la for la in spec["layer"] if la["mark"]["type"] == "rule" and "y2" in la["encoding"]]
    assert len(errors) == 1 and {(r["at"], r["lo"], r["hi"]) for r in errors[0]["data"]["values"]} == {
        (v[1], r["lo"], r["hi"]) for r in bars["data"]["values"] for v in [at[r["series"], r["x"]]]}
    assert any(la["mark"]["type"] == "rule" and la["data"]["values"][0].get("y") == 50.0 for la in spec["layer"])  # chance


def test_text_keeps_what_is_not_plotly_markup():
    from xlviz.views.vega_base import plain as _plain

    assert _plain("a <b>bold</b><br>line") == "a bold line"
    assert _plain("if a < b > c then <i>x</i>") == "if a < b > c then x"  # a sentence's own angle brackets stay
    assert _plain('<span style="color:red">red</span>') == "red"


def test_the_page_helper_draws_with_vega_lite_only_what_it_can():
    from streamlit.testing.v1 import AppTest

    def page():
        import plotly.graph_objects as go

        from xlviz.ui.common import plotly
        from xlviz.views import figures as vf

        rows = [{"system": "a", "layer": i, "retrieval": 0.1 * i} for i in range(3)]
        plotly(vf.layer_lines(rows, "retrieval", "lines"), key="lines", vega=True)
        plotly(go.Figure(go.Heatmap(z=[[1, 2], [3, 4]])), key="heat", vega=True)  # left to Plotly
        plotly(vf.layer_lines(rows, "retrieval", "plotly asked for"), key="asked")  # vega not asked for

    at = AppTest.from_function(page, default_timeout=60).run()
    assert not at.exception
    from tests.app_fixtures import charts

    drawn = charts(at)
    assert sorted(drawn) == ["asked", "heat", "lines"]
    assert "layer" in drawn["lines"] and "layout" in drawn["heat"] and "layout" in drawn["asked"]
    # the Export buttons are there for the Vega-Lite chart too (they render the Plotly figure)
    assert {b.key for b in at.get("download_button")} >= {"lines_png", "lines_svg", "lines_csv"}
