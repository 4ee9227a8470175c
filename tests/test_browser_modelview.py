"""The Attention page's model view and neuron view in a real browser (Debian chromium driven by
Playwright, the server and helpers of tests/test_browser.py): the thumbnails carry "L·H" labels,
clicking one opens that layer and head (selectboxes, the outline, the URL) and the neuron view
of that head is drawn. Screenshots go to screenshots/ (or $XLVIZ_SCREENSHOTS).

    pytest -m browser tests/test_browser_modelview.py
"""

from __future__ import annotations

import pytest

from tests.test_browser import _selected, assert_no_exception, browser, page, server, shot, wait_idle  # noqa: F401

pytestmark = pytest.mark.browser


def _model_view(page):
    """The first model-view chart (a Vega-Lite chart whose text marks hold the thumbnail labels)."""
    return page.locator("[data-testid=stVegaLiteChart]").filter(has=page.locator("text", has_text="L0 H0")).first


def test_model_view_labels_click_and_neuron_view(server, page):
    url, _ = server
    page.goto(f"{url}/attention")
    wait_idle(page, timeout_s=240)
    assert_no_exception(page)
    main = page.get_by_test_id("stMain")
    assert "Model view: every layer × head" in main.inner_text()
    chart = _model_view(page)
    chart.wait_for(timeout=60_000)
    labels = chart.locator("text").all_text_contents()
    assert {"L0 H0", "L0 H1", "L1 H0", "L1 H1"} <= set(labels), labels  # the tiny models: 2 layers × 2 heads
    # mean of heads at first: no single head for the neuron view yet
    assert "The neuron view takes one head apart" in main.inner_text()
    assert page.locator(".js-plotly-plot").count() == 0  # the first view loads no plotly.js
    shot(page, "modelview-before-click")

    # click a cell of the thumbnail "L0 H1" (each cell's hover names its thumbnail)
    cell = chart.locator("path[aria-label*='L0 H1: click']").nth(3)
    cell.scroll_into_view_if_needed()  # mouse coordinates are the viewport's
    page.wait_for_timeout(300)
    box = cell.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.wait_for_timeout(400)
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    wait_idle(page, timeout_s=120)
    assert_no_exception(page)
    assert "0" in _selected(page, "Layer").split() and "1" in _selected(page, "Head").split(), (
        _selected(page, "Layer"), _selected(page, "Head"))
    assert "att_layer=0" in page.url and "att_head=1" in page.url, page.url

    # the neuron view of layer 0, head 1: the query, the keys, q ⊙ k_j, the scores and the weights
    neuron = page.locator(".js-plotly-plot").filter(has=page.locator("text", has_text="q ⊙ k_j")).first
    neuron.wait_for(timeout=60_000)
    text = " ".join(neuron.locator("text").all_text_contents())
    assert "layer 0 · head 1" in text and "weight softmax" in text and "keys k_j" in text, text[:500]
    # the outline moved to the clicked thumbnail: one thick rectangle, around L0 H1's cells
    chart = _model_view(page)
    outline = chart.locator("path[stroke='#D55E00'][stroke-width='3']")
    assert outline.count() == 1, outline.count()
    o = outline.bounding_box()
    c = chart.locator("path[aria-label*='L0 H1: click']").nth(3).bounding_box()
    assert o["x"] < c["x"] < o["x"] + o["width"] and o["y"] < c["y"] < o["y"] + o["height"], (o, c)
    neuron.scroll_into_view_if_needed()
    shot(page, "modelview-neuron")


def test_a_large_model_view_on_a_canvas_opens_the_clicked_head(server, page):
    """A long typed pair: the model view has more than 2,000 cells and is drawn on a canvas (no
    element per cell); a click where the thumbnail "L0 H1" is drawn opens that head."""
    import urllib.parse

    url, _ = server
    words = " ".join(["paul reads a letter near the old lake ."] * 5)  # past the tiny model's 64 positions
    query = urllib.parse.urlencode({"att_source": "Typed", "att_text_a": words, "att_text_b": words})
    page.goto(f"{url}/attention?{query}")
    wait_idle(page, timeout_s=240)
    assert_no_exception(page)
    chart = page.locator("[data-testid=stVegaLiteChart]").first  # the first input's model view
    chart.locator("canvas").wait_for(timeout=60_000)
    assert chart.locator("path[aria-roledescription='rect mark']").count() == 0  # no SVG element per cell
    canvas = chart.locator("canvas")
    canvas.scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    box = canvas.bounding_box()
    # 2 × 2 thumbnails left of the colour bar: the top right one, L0 H1, about here
    x, y = box["x"] + (box["width"] - 90) * 0.75, box["y"] + box["height"] * 0.3
    page.mouse.move(x, y)
    tip = page.locator("#vg-tooltip-element")
    tip.wait_for(state="visible", timeout=10_000)
    assert "L0 H1: click to open it" in tip.inner_text(), tip.inner_text()  # the thumbnail under the pointer
    page.mouse.click(x, y)
    wait_idle(page, timeout_s=120)
    assert_no_exception(page)
    assert "att_layer=0" in page.url and "att_head=1" in page.url, page.url
    assert "0" in _selected(page, "Layer").split() and "1" in _selected(page, "Head").split()
    shot(page, "modelview-canvas-click")
