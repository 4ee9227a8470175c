"""The Alignment page's projector in a real browser (Debian chromium driven by Playwright).

Two tiny runs (tests/test_browser.py's server): the projector opened from the URL with the run's
two systems (transferred, floor), a search typed into it, a point clicked on the chart. Checks
that no exception shows, the search rings its matches, the neighbours table is there (column
headers and 10 rows), and that a click on the chart picks the point (the URL follows).
Screenshot: screenshots/projector.png (or $XLVIZ_SCREENSHOTS).

    pytest -m browser tests/test_browser_projector.py
"""

from __future__ import annotations

import time
from urllib.parse import parse_qs, urlparse

import pytest

from tests.test_browser import assert_no_exception, browser, page, server, shot, wait_idle  # noqa: F401 (fixtures)

pytestmark = pytest.mark.browser


def _projector_plot(page, timeout_s: float = 60):
    """The projector's chart, waited for: plotly.js may draw it after the script has finished."""
    plots = page.locator(".js-plotly-plot")
    end = time.time() + timeout_s
    while True:
        for i in range(plots.count()):
            title = plots.nth(i).evaluate("g => (g.layout && g.layout.title && g.layout.title.text) || ''")
            if "PCA of sentences" in title and "system" in title:
                return plots.nth(i)
        if time.time() > end:
            raise AssertionError("no projector chart on the page")
        page.wait_for_timeout(250)


def _neighbour_grid(page):
    grids = page.locator('[data-testid="stDataFrame"]')
    for i in range(grids.count()):
        heads = grids.nth(i).evaluate("e => Array.from(e.querySelectorAll('[role=columnheader]')).map(h => h.textContent)")
        if "translation" in heads:
            return grids.nth(i), heads
    raise AssertionError("no neighbours table on the page")


def _point(url: str) -> str | None:
    return (parse_qs(urlparse(url).query).get("al_pj_point") or [None])[0]


def test_projector_search_neighbours_and_a_click(server, page):
    url, _ = server
    page.goto(f"{url}/alignment?run=demo-run&l2=sov&al_pj_on=true")
    wait_idle(page, timeout_s=240)
    assert_no_exception(page)
    main = page.get_by_test_id("stMain")
    box = page.get_by_label("Search the sentences")
    box.fill("the")
    box.press("Enter")
    wait_idle(page, timeout_s=120)
    assert_no_exception(page)
    text = main.inner_text()
    assert "points contain “the” (ringed)" in text
    assert "contains “the”" in text  # the rings' legend entry on the chart
    grid, heads = _neighbour_grid(page)
    assert heads == ["rank", "system", "language", "sentence", "text", "cosine", "translation"]
    assert grid.evaluate("e => e.querySelectorAll('[role=row]').length") == 1 + 10
    assert "al_pj_query=the" in page.url
    first = _point(page.url)
    assert first and first.endswith("|a|0")  # the first point until another is picked

    # click the point of the second system's sov side farthest from the selected star
    plot = _projector_plot(page)
    plot.scroll_into_view_if_needed()
    page.wait_for_timeout(500)
    xy = plot.evaluate("""g => {
        const fl = g._fullLayout, r = g.getBoundingClientRect();
        const star = g._fullData.find(t => t.name === 'selected');
        const tr = g._fullData.filter(t => / · sov$/.test(t.name))[1];
        let best = 0, far = -1;
        for (let k = 0; k < tr.x.length; k++) {
            const d = (tr.x[k] - star.x[0]) ** 2 + (tr.y[k] - star.y[0]) ** 2;
            if (d > far) { far = d; best = k; }
        }
        return {x: r.left + fl._size.l + fl.xaxis.l2p(tr.x[best]), y: r.top + fl._size.t + fl.yaxis.l2p(tr.y[best])};
    }""")
    page.mouse.move(xy["x"], xy["y"])
    page.wait_for_timeout(300)
    page.mouse.click(xy["x"], xy["y"])
    page.wait_for_timeout(1000)
    wait_idle(page, timeout_s=120)
    assert_no_exception(page)
    picked = _point(page.url)
    assert picked and picked != first, (first, picked)
    grid, _ = _neighbour_grid(page)
    assert grid.evaluate("e => e.querySelectorAll('[role=row]').length") == 1 + 10
    shot(page, "projector")
