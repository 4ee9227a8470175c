"""The app in a real browser: Debian chromium driven by Playwright, against `streamlit run app.py`.

Opens every page (no Streamlit exception box anywhere), walks a populated app (two tiny runs,
their models picked: XQuAD shows English and the run's own numbers, Attention caps Max tokens,
the Runs page's "Analyse this run" link wins over a remembered choice, comparison by run name),
starts a tiny transfer run from the Runs page, cancels and resumes it and watches it finish
(the live view keeps polling, the loss chart keeps attempts apart), answers real XQuAD
questions in two languages (when ../shared/data is present) and draws attention heatmaps.
Screenshots go to screenshots/ (or $XLVIZ_SCREENSHOTS).

    pytest -m browser tests/test_browser.py
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[1]
SHOTS = Path(os.environ.get("XLVIZ_SCREENSHOTS") or REPO / "screenshots")
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
EXCEPTION = '[data-testid="stException"]'


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium); the browser test needs Debian's chromium")
    pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")
    from tests.app_fixtures import make_run

    root = tmp_path_factory.mktemp("browser") / "checkpoints"
    make_run(root, "other-run", results_shift=5.0)
    time.sleep(1.1)  # folder mtimes order the runs: demo-run is the newest, every page's default
    make_run(root, "demo-run")
    port = _free_port()
    env = dict(os.environ, XLVIZ_CHECKPOINTS=str(root), PYTHONUNBUFFERED="1")
    log = open(root.parent / "streamlit.log", "w")
    proc = subprocess.Popen(
        # the README's command: .streamlit/config.toml in the repository root turns the file watcher off
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true", "--server.port", str(port)],
        cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    deadline = time.time() + 90
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            break
        except OSError:
            time.sleep(0.3)
    else:
        proc.kill()
        pytest.fail("streamlit did not start: " + (root.parent / "streamlit.log").read_text()[-2000:])
    yield f"http://127.0.0.1:{port}", root
    os.killpg(proc.pid, 15)
    proc.wait(timeout=20)
    log.close()


@pytest.fixture(scope="module")
def browser(server):
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture()
def page(browser):
    ctx = browser.new_context(viewport={"width": 1500, "height": 1000})
    pg = ctx.new_page()
    yield pg
    ctx.close()


def wait_idle(page, timeout_s: float = 120, quiet_s: float = 1.5) -> None:
    """Wait until Streamlit has stopped running the script for ``quiet_s`` seconds."""
    page.wait_for_selector("h1", timeout=timeout_s * 1000)
    end, quiet = time.time() + timeout_s, 0.0
    while time.time() < end and quiet < quiet_s:
        busy = page.locator('[data-testid="stStatusWidget"], [data-testid="stSpinner"]').count() > 0
        quiet = 0.0 if busy else quiet + 0.25
        page.wait_for_timeout(250)


def shot(page, name: str) -> None:
    """Full-height screenshot (Streamlit scrolls inside its own container, so grow the viewport)."""
    height = page.evaluate(
        "() => Math.max(...Array.from(document.querySelectorAll('section, [data-testid=stMain]'))"
        ".map(e => e.scrollHeight), 1000)")
    page.set_viewport_size({"width": 1500, "height": min(int(height) + 40, 6000)})
    page.wait_for_timeout(600)
    page.screenshot(path=str(SHOTS / f"{name}.png"))
    page.set_viewport_size({"width": 1500, "height": 1000})


def assert_no_exception(page) -> None:
    n = page.locator(EXCEPTION).count()
    assert n == 0, page.locator(EXCEPTION).first.inner_text()


def test_every_page_renders_and_the_sidebar_choice_follows(server, page):
    url, _ = server
    # a page first (a bookmark right after the server started): it too gets the app's navigation,
    # not the pages folder's file names ("app", "alignment", ...)
    for name, path in (("runs", "runs"), ("home", ""), ("xquad", "xquad"), ("attention", "attention"),
                       ("alignment", "alignment"), ("probing", "probing")):
        page.goto(f"{url}/{path}")
        wait_idle(page)
        assert_no_exception(page)
        nav = [t.strip().splitlines()[-1] for t in page.get_by_test_id("stSidebarNavLink").all_inner_texts()]  # icon name, title
        assert nav == ["Home", "Runs", "XQuAD", "Attention", "Alignment", "Probing"], nav
        shot(page, f"page-{name}")
    # navigate through the sidebar: the picked models stay
    page.goto(url)
    wait_idle(page)
    page.get_by_test_id("stSidebarNavLink").filter(has_text="XQuAD").click()
    wait_idle(page)
    assert "monotrans · QA (en, sov) · demo-run" in page.locator('[data-testid="stSidebar"]').inner_text()
    assert page.locator(".xlviz-qa").count() == 2
    assert_no_exception(page)


def _select(page, label: str, option: str) -> None:
    page.get_by_label(label, exact=True).click()
    page.get_by_role("option", name=option, exact=True).click()
    wait_idle(page)


def _selected(page, label: str) -> str:
    """What a selectbox shows (its value may live in an input, not in the text)."""
    box = page.locator('[data-testid="stSelectbox"]').filter(has=page.get_by_text(label, exact=True)).first
    return box.evaluate("e => e.innerText + ' ' + Array.from(e.querySelectorAll('input')).map(i => i.value).join(' ')")


def _nav(page, title: str) -> None:
    page.get_by_test_id("stSidebarNavLink").filter(has_text=title).click()
    wait_idle(page)


def test_populated_walk(server, page):
    """Every page with the demo run's models picked, and the issue-17 bugs as assertions."""
    url, _ = server
    page.goto(f"{url}/xquad")
    wait_idle(page, timeout_s=240)
    assert_no_exception(page)
    main = page.get_by_test_id("stMain")
    # English is there for a generated world, and the run's saved predictions are its numbers
    assert "this data set has en, sov" in main.inner_text()
    assert page.locator(".xlviz-qa[data-lang='en']").count() == 1
    page.get_by_text("How each cell was computed").click()
    assert "the run's saved predictions" in main.inner_text()
    shot(page, "walk-xquad")

    _nav(page, "Attention")
    assert_no_exception(page)
    assert "at most 64 positions" in main.inner_text()  # Max tokens capped at the tiny model's positions
    page.locator(".js-plotly-plot").first.wait_for(timeout=60_000)
    shot(page, "walk-attention")

    # a remembered choice on Alignment must not beat the Runs page's link
    _nav(page, "Alignment")
    assert_no_exception(page)
    _select(page, "Run", "other-run")
    page.locator(".js-plotly-plot").first.wait_for(timeout=120_000)
    wait_idle(page)
    shot(page, "walk-alignment-other-run")
    _nav(page, "Runs")
    assert_no_exception(page)
    page.get_by_role("link", name="Analyse this run · sov").first.click()
    wait_idle(page, timeout_s=180)
    assert_no_exception(page)
    assert "demo-run" in _selected(page, "Run")
    assert "run=demo-run" in page.url
    page.locator(".js-plotly-plot").first.wait_for(timeout=120_000)
    wait_idle(page)
    shot(page, "walk-alignment")

    _nav(page, "Probing")
    assert_no_exception(page)
    shot(page, "walk-probing")

    # comparison by run name, with curves, config diff and the L2/L1 ratio; opened from a
    # bookmarked URL (page state lives in st.query_params)
    from urllib.parse import quote

    page.goto(f"{url}/runs?runs_compare_pick=" + quote(json.dumps(["demo-run", "other-run"])))
    wait_idle(page, timeout_s=180)
    assert_no_exception(page)
    text = main.inner_text()
    # (tables are drawn on a canvas: their cells are checked by the AppTests)
    assert "F1 L2/L1" in text and "Mean ± sd over runs" in text and "Config:" in text
    assert page.locator(".js-plotly-plot").count() >= 3  # live loss, overlay curves, compare bars
    shot(page, "walk-runs-compare")
    _nav(page, "Home")
    assert_no_exception(page)
    shot(page, "walk-home")


def _loss_lines_go_forward(page) -> bool:
    """Every line of every loss chart goes forward in x (no diagonal back to step 0)."""
    return page.evaluate("""() => Array.from(document.querySelectorAll('.js-plotly-plot')).every(p =>
        (p.data || []).filter(t => (t.xaxis || 'x').startsWith('x') && t.mode && t.mode.includes('lines')).every(t => {
            const x = Array.from(t.x || []);
            return typeof x[0] !== 'number' || x.every((v, i) => i === 0 || v > x[i - 1]);
        }))""")


def test_start_a_tiny_run_and_watch_it_finish(server, page):
    url, root = server
    page.goto(f"{url}/runs")
    wait_idle(page)
    page.get_by_text("Start a transfer run").click()
    sizes = {
        # enough pre-training steps to cancel and resume it mid-stage
        "Pre-training steps (L1 MLM)": 400, "Transfer steps (L2 embeddings)": 4, "Fine-tuning steps (L1 QA)": 4,
        "MLM batch (blocks)": 4, "QA batch size": 4, "Corpus documents per language": 60, "QA training paragraphs (L1)": 12,
        "QA test paragraphs (per language)": 4,
    }
    for label, value in sizes.items():
        page.get_by_label(label, exact=True).fill(str(value))
    page.get_by_label("Run name (optional)").fill("browser-run")
    page.get_by_role("button", name="Start run").click()
    page.get_by_text("Started browser-run").wait_for(timeout=30_000)
    run_dir = root / "browser-run"
    page.locator("h4", has_text="browser-run").first.wait_for(timeout=30_000)  # the live view follows the new run
    page.wait_for_timeout(8000)
    shot(page, "runs-running")
    # cancel once it trains, then resume: the view must keep polling without a reload
    deadline = time.time() + 240
    while time.time() < deadline and not (run_dir / "metrics.jsonl").exists():
        time.sleep(1)
    page.get_by_role("button", name="Cancel").first.click()
    page.get_by_role("button", name="Resume").first.wait_for(timeout=60_000)
    page.get_by_role("button", name="Resume").first.click()
    page.get_by_role("button", name="Cancel").first.wait_for(timeout=60_000)  # polling again: the state came back
    deadline = time.time() + 120  # the run picker follows the state without a reload
    while time.time() < deadline and not any(f"browser-run ({st})" in _selected(page, "Run") for st in ("running", "completed")):
        page.wait_for_timeout(1000)
    assert any(f"browser-run ({st})" in _selected(page, "Run") for st in ("running", "completed")), _selected(page, "Run")
    deadline = time.time() + 420
    state = None
    while time.time() < deadline:
        try:
            state = json.loads((run_dir / "status.json").read_text()).get("state")
        except (OSError, ValueError):
            state = None
        if state in ("completed", "failed", "cancelled"):
            break
        time.sleep(2)
    assert state == "completed", (run_dir / "job-output.txt").read_text()[-3000:]
    # the live view (polling fragment) shows it finished without a reload
    assert page.locator("h4", has_text="demo-run").count() == 0
    page.locator('[data-testid="stProgress"]', has_text="completed").first.wait_for(timeout=30_000)
    wait_idle(page)
    assert_no_exception(page)
    assert _loss_lines_go_forward(page)
    shot(page, "runs-finished")
    assert json.loads((run_dir / "results.json").read_text())


def test_xquad_on_real_data_in_two_languages(server, page, shared_data):
    url, root = server
    export_en = root / "demo-run" / "export" / "monotrans-en"
    page.goto(f"{url}/xquad")
    wait_idle(page)
    # a typed model folder reads every language
    page.locator('[data-testid="stSidebar"]').get_by_text("Add a model folder or hub id").click()
    box = page.get_by_label("Local folder or Hugging Face id")
    box.fill(str(export_en))
    box.press("Enter")
    wait_idle(page)
    # few questions: tiny random tokenizers split real text into many windows
    limit = page.locator('input[aria-label^="Questions to answer"]')
    limit.fill("6")
    limit.press("Enter")
    wait_idle(page)
    page.get_by_label("Questions from").click()
    page.get_by_role("option", name="a folder of SQuAD files …").click()
    wait_idle(page, timeout_s=240)
    assert_no_exception(page)
    cards = page.locator(".xlviz-qa")
    assert cards.count() == 2
    langs = [cards.nth(i).get_attribute("data-lang") for i in range(2)]
    assert langs[0] == "en" and langs[1] != "en"
    for i in range(2):  # the gold span and the typed model's span are highlighted in both languages
        assert cards.nth(i).locator(".xlviz-span").count() >= 1
    assert page.locator(".xlviz-qa .xlviz-span[style*='box-shadow']").count() >= 2
    shot(page, "xquad-real")


def test_attention_heatmaps_render(server, page):
    url, _ = server
    page.goto(f"{url}/attention")
    wait_idle(page)
    assert_no_exception(page)
    page.locator(".js-plotly-plot").first.wait_for(timeout=30_000)
    assert page.locator(".js-plotly-plot").count() >= 3  # A and B heatmaps + overview
    shot(page, "attention-alone")
    page.get_by_text("Typed").click()
    wait_idle(page)
    assert_no_exception(page)
    shot(page, "attention-typed")
