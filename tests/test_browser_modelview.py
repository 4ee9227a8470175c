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
    """The first model-view chart (the one whose annotations hold the thumbnail labels)."""
    return page.locator(".js-plotly-plot").filter(has=page.locator("text.annotation-text", has_text="L0 H0")).first


def test_model_view_labels_click_and_neuron_view(server, page):
    url, _ = server
    page.goto(f"{url}/attention")
    wait_idle(page, timeout_s=240)
    assert_no_exception(page)
    main = page.get_by_test_id("stMain")
    assert "Model view: every layer × head" in main.inner_text()
    chart = _model_view(page)
    chart.wait_for(timeout=60_000)
    labels = chart.locator("text.annotation-text").all_text_contents()
    assert {"L0 H0", "L0 H1", "L1 H0", "L1 H1"} <= set(labels), labels  # the tiny models: 2 layers × 2 heads
    # mean of heads at first: no single head for the neuron view yet
    assert "The neuron view takes one head apart" in main.inner_text()
    shot(page, "modelview-before-click")

    # click inside the thumbnail under the label "L0 H1" (its invisible click target covers it)
    label = chart.locator("text.annotation-text", has_text="L0 H1").first
    label.scroll_into_view_if_needed()  # mouse coordinates are the viewport's
    page.wait_for_timeout(300)
    box = label.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] + 40)
    page.wait_for_timeout(400)
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] + 40)
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
    # the outline moved to the clicked thumbnail (one rectangle per model-view chart)
    assert _model_view(page).locator("path[style*='rgb(213, 94, 0)'][style*='stroke-width: 3']").count() >= 1
    neuron.scroll_into_view_if_needed()
    shot(page, "modelview-neuron")
