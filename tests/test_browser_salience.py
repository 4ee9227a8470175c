"""The XQuAD page's "Why this answer" in a real browser (chromium via Playwright), on the
browser test's tiny runs: opening the expander under the L2 card computes integrated gradients,
shades the question and context, and links the English model's most salient words to their
gold translations. Screenshot: screenshots/xquad-salience.png.

    pytest -m browser tests/test_browser_salience.py
"""

from __future__ import annotations

import pytest

from tests.test_browser import assert_no_exception, browser, page, server, shot, wait_idle  # noqa: F401 (fixtures)

pytestmark = pytest.mark.browser


def test_xquad_why_this_answer_renders(server, page):  # noqa: F811
    url, _ = server
    page.goto(f"{url}/xquad")
    wait_idle(page)
    page.wait_for_selector(".xlviz-qa", timeout=120_000)  # the cards come last on the page: wait for them too
    wait_idle(page)
    assert_no_exception(page)
    assert page.locator(".xlviz-qa").count() == 2
    assert page.locator(".xlviz-salience").count() == 0  # nothing computed before a click
    expanders = page.locator('[data-testid="stExpander"]').filter(has_text="Why this answer")
    assert expanders.count() == 2  # one model, the en and the sov card
    expanders.nth(1).locator("summary").click()  # the sov card's
    page.wait_for_selector(".xlviz-salience", timeout=120_000)
    wait_idle(page)
    assert_no_exception(page)
    box = page.locator(".xlviz-salience")
    assert box.count() == 1
    shaded = box.locator(".xlviz-sal")
    assert shaded.count() > 5  # question and context tokens
    assert "Σ attributions" in box.inner_text()
    linked = expanders.nth(1).inner_text()
    assert "gold translations under the sov model" in linked
    expanders.nth(1).scroll_into_view_if_needed()
    shot(page, "xquad-salience")
