"""The Sweeps page in a real browser (Debian chromium driven by Playwright, against
``streamlit run app.py``) on a fake finished sweep (tests/sweep_fixtures.py): no Streamlit
exception, the page in the navigation, its table, the ratio figure drawn, and a cell's
Alignment link opening that cell as the Alignment page's run. Screenshot: sweeps.png in
screenshots/ (or $XLVIZ_SCREENSHOTS).

    pytest -m browser tests/test_browser_sweepview.py
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_browser import CHROMIUM, CHROMIUM_ARGS, SHOTS, assert_no_exception, serve, shot, wait_idle

pytestmark = pytest.mark.browser
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def sweep_server(tmp_path_factory):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium); the browser test needs Debian's chromium")
    pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")
    from tests.sweep_fixtures import make_sweep

    root = tmp_path_factory.mktemp("browser-sweeps") / "checkpoints"
    make_sweep(root)
    yield from serve(root)


@pytest.fixture()
def page(sweep_server):
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        ctx = b.new_context(viewport={"width": 1500, "height": 1000})
        yield ctx.new_page()
        ctx.close()
        b.close()


def test_sweeps_page_in_the_browser(sweep_server, page):
    page.goto(f"{sweep_server}/sweeps")
    wait_idle(page, timeout_s=180)
    # the status widget can be hidden for a moment between reruns: wait for the sweep's own table too
    # (the sweep's heading: a data grid's cells holding the name are hidden from the locator)
    page.get_by_test_id("stMain").get_by_role("heading").filter(has_text="tiny-sweep").first.wait_for(timeout=180_000)
    wait_idle(page, timeout_s=180)
    assert_no_exception(page)
    nav = [t.strip().splitlines()[-1] for t in page.get_by_test_id("stSidebarNavLink").all_inner_texts()]
    assert "Sweeps" in nav, nav
    main = page.get_by_test_id("stMain")
    text = main.inner_text()
    assert "tiny-sweep" in text and "4 of 4 cells completed" in text
    page.wait_for_selector('[data-testid="stPlotlyChart"] .main-svg', timeout=120_000)  # plotly draws after the tables
    assert page.locator('[data-testid="stPlotlyChart"] .main-svg').count() > 0  # the ratio figure was drawn
    assert page.locator('[data-testid="stDataFrame"]').count() >= 4  # sweeps, cells, results, paired difference
    shot(page, "sweeps")
    # a cell opens as the Alignment page's run
    page.get_by_role("link", name="Alignment · sov").first.click()
    wait_idle(page, timeout_s=240)
    assert_no_exception(page)
    assert "run=tiny-sweep%2F000-languages-sov_seed-0" in page.url or "run=tiny-sweep/000-languages-sov_seed-0" in page.url
    assert "tiny-sweep/000-languages-sov_seed-0" in page.get_by_test_id("stMain").inner_text()
    shot(page, "sweeps-cell-alignment")
