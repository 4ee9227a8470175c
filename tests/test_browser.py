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


def _encoder_only(src: Path, dest: Path) -> Path:
    """A copy of a masked LM whose config says it is a bare encoder (no head to score pairs with)."""
    import shutil

    shutil.copytree(src, dest)
    cfg = json.loads((dest / "config.json").read_text())
    cfg["architectures"] = ["BertModel"]
    (dest / "config.json").write_text(json.dumps(cfg))
    return dest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(root: Path, **env_extra: str):
    """The app as ``xlviz app`` serves it (``python -m xlviz.ui.serve app.py``: ``streamlit run
    app.py`` with the model stack imported first; .streamlit/config.toml in the repository root
    turns the file watcher off) on a free port over the runs in ``root``; yields its address once
    it accepts connections, stops it after."""
    port = _free_port()
    env = dict(os.environ, XLVIZ_CHECKPOINTS=str(root), PYTHONUNBUFFERED="1", **env_extra)
    log = open(root.parent / "streamlit.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "xlviz.ui.serve", "app.py", "--server.headless", "true", "--server.port", str(port)],
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
    yield f"http://127.0.0.1:{port}"
    os.killpg(proc.pid, 15)
    proc.wait(timeout=20)
    log.close()


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
    models = root.parent / "models"  # typed folders live here ($XLVIZ_MODELS), not among the runs
    _encoder_only(root / "demo-run" / "s1_pretrain", models / "minilm-encoder")  # Probing must not offer it
    # no network: a hub id is checked against the local cache only
    for address in serve(root, XLVIZ_MODELS=str(models), HF_HUB_OFFLINE="1"):
        yield address, root


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


PLOTLY = ".js-plotly-plot"  # a Plotly chart drawn
VEGA = "[data-testid=stVegaLiteChart] .marks"  # a Vega-Lite chart drawn (its canvas or svg)


def wait_plots(page, n: int, timeout_s: float = 120, charts: str = PLOTLY) -> int:
    """Wait for ``n`` charts (Plotly's, or ``charts=VEGA``) and return how many there are.

    A chart's code is a chunk the browser loads after the script has finished (plotly.js:
    4.7 MB), so a chart can be drawn well after ``wait_idle`` on a slow machine; counting at
    once would race it.
    """
    page.locator(charts).nth(n - 1).wait_for(timeout=timeout_s * 1000)
    return page.locator(charts).count()


def assert_no_exception(page) -> None:
    n = page.locator(EXCEPTION).count()
    assert n == 0, page.locator(EXCEPTION).first.inner_text()


def test_every_page_renders_and_the_sidebar_choice_follows(server, page):
    url, _ = server
    # the server's root is named in the page (xlviz.ui.base_url): no page probes /<page>/_stcore/health first
    probes = []
    page.on("request", lambda r: probes.append(r.url) if "/_stcore/" in r.url and not r.url.startswith(f"{url}/_stcore/") else None)
    # a page first (a bookmark right after the server started): it too gets the app's navigation,
    # not the pages folder's file names ("app", "alignment", ...)
    for name, path in (("runs", "runs"), ("home", ""), ("xquad", "xquad"), ("attention", "attention"),
                       ("alignment", "alignment"), ("probing", "probing")):
        page.goto(f"{url}/{path}")
        wait_idle(page)
        assert_no_exception(page)
        nav = [t.strip().splitlines()[-1] for t in page.get_by_test_id("stSidebarNavLink").all_inner_texts()]  # icon name, title
        assert nav == ["Home", "Runs", "Sweeps", "XQuAD", "Attention", "Alignment", "Probing"], nav
        shot(page, f"page-{name}")
    assert probes == [], probes
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
    page.locator(".xlviz-qa[data-lang='en']").first.wait_for(timeout=120_000)  # the cards come after the tables
    assert page.locator(".xlviz-qa[data-lang='en']").count() == 1
    page.get_by_text("How each cell was computed").click()  # a lazy panel: drawn by the rerun its click starts
    main.get_by_text("the run's saved predictions").first.wait_for(timeout=60_000)
    assert "the run's saved predictions" in main.inner_text()
    shot(page, "walk-xquad")

    _nav(page, "Attention")
    assert_no_exception(page)
    assert "at most 64 positions" in main.inner_text()  # Max tokens capped at the tiny model's positions
    wait_plots(page, 1, charts=VEGA)  # the model view and the heatmaps: Vega-Lite charts
    shot(page, "walk-attention")

    # a remembered choice on Alignment must not beat the Runs page's link
    _nav(page, "Alignment")
    assert_no_exception(page)
    _select(page, "Run", "other-run")
    wait_plots(page, 1, charts=VEGA)  # Alignment's charts are drawn with Vega-Lite
    wait_idle(page)
    shot(page, "walk-alignment-other-run")
    _nav(page, "Runs")
    assert_no_exception(page)
    page.get_by_role("link", name="Analyse this run · sov").first.click()
    wait_idle(page, timeout_s=180)
    assert_no_exception(page)
    assert "demo-run" in _selected(page, "Run")
    assert "run=demo-run" in page.url
    # the first view loads no plotly.js: retrieval and the projection are Vega-Lite charts
    assert wait_plots(page, 2, charts=VEGA) == 2 and page.locator(PLOTLY).count() == 0
    wait_idle(page)
    shot(page, "walk-alignment")
    # only the open result tab is drawn: another tab draws its own chart and goes into the URL
    page.get_by_role("tab", name="CKA").click()
    wait_idle(page)
    assert_no_exception(page)
    assert "al_tab=CKA" in page.url
    wait_plots(page, 2, timeout_s=60, charts=VEGA)  # the CKA chart and the projection
    assert page.get_by_text("1 = the same representation up to rotation and scale").count() == 1
    page.get_by_role("tab", name="Table").click()
    wait_idle(page)
    assert page.get_by_role("button", name="Download alignment table (CSV)").count() == 1
    shot(page, "walk-alignment-table")

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
    assert wait_plots(page, 2) >= 2  # overlay curves, compare bars (a completed run's loss is one click away)
    shot(page, "walk-runs-compare")
    _nav(page, "Home")
    assert_no_exception(page)
    shot(page, "walk-home")


# --- the faults, one assertion each, and every page's shared link --------------------------

def test_a_hub_id_that_is_not_downloaded_is_refused_once(server, page):
    url, _ = server
    page.goto(f"{url}/xquad")
    wait_idle(page)
    sidebar = page.get_by_test_id("stSidebar")
    sidebar.get_by_text("Add a model folder or hub id").click()
    box = page.get_by_label("Local folder or Hugging Face id")
    box.fill("org/not-downloaded")
    box.press("Enter")
    wait_idle(page)
    errors = [e for e in sidebar.locator('[data-testid="stAlert"]').all_inner_texts() if "not-downloaded" in e]
    assert len(errors) == 1 and errors[0].strip().startswith("org/not-downloaded: not in the local Hugging Face cache"), errors
    main = page.get_by_test_id("stMain")
    assert "not-downloaded" not in main.inner_text(), "one message, in the sidebar only"
    _nav(page, "Attention")
    assert "not-downloaded" not in main.inner_text() and "not-downloaded" not in sidebar.locator("[data-testid=stMultiSelect]").first.inner_text()


def test_probing_offers_only_probeable_models_and_draws_languages_apart(server, page):
    url, root = server
    page.goto(f"{url}/probing")
    wait_idle(page)
    page.get_by_test_id("stSidebar").get_by_text("Add a model folder or hub id").click()
    box = page.get_by_label("Local folder or Hugging Face id")
    box.fill(str(root.parent / "models" / "minilm-encoder"))
    box.press("Enter")
    wait_idle(page, timeout_s=240)
    assert_no_exception(page)
    main = page.get_by_test_id("stMain")
    assert "Not offered, no masked-LM head to score minimal pairs with: minilm-encoder." in main.inner_text()
    # word in context: only languages whose sense pairs test the context (English here); the sov
    # rows would test word identity and are named as not probed (line styles: test_app_faults)
    page.get_by_test_id("stButtonGroup").get_by_text("Word in context", exact=True).click()
    wait_idle(page, timeout_s=240)
    # the word-in-context figure, not the agreement one still on screen (stored results draw it at once)
    names_js = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).flatMap(p =>
        (p.data || []).filter(t => t.name && t.name.includes(', ')).map(t => t.name))"""
    page.wait_for_function(f"({names_js})().length > 0", timeout=120_000)
    assert_no_exception(page)
    names = page.evaluate(names_js)
    assert names and {n.rsplit(", ", 1)[1] for n in names} == {"en"}, names
    assert "Not probed (same sense = same word in sov" in page.get_by_test_id("stMain").inner_text()
    shot(page, "probing-wic")


def test_xquad_card_score_is_the_tables(server, page):
    url, _ = server
    page.goto(f"{url}/xquad")
    wait_idle(page, timeout_s=240)
    assert_no_exception(page)
    box = page.locator('[data-testid="stSelectbox"]').filter(has_text="Question (").first
    qid = box.evaluate("e => Array.from(e.querySelectorAll('input')).map(i => i.value).join(' ') + ' ' + e.innerText")
    import csv
    import io
    import re

    with page.expect_download() as dl:
        page.get_by_role("button", name="Download predictions and scores (CSV)").click()
    rows = list(csv.DictReader(io.StringIO(Path(dl.value.path()).read_text(encoding="utf-8"))))
    ids = {r["id"] for r in rows}
    qid = next(i for i in re.findall(r"[^\s—]+", qid) if i in ids)
    compared = 0
    for card in page.locator('[data-testid="stHtml"]').filter(has=page.locator(".xlviz-qa")).all():
        lang = card.locator(".xlviz-qa").get_attribute("data-lang")
        for tr in card.locator(".xlviz-answers tr").all()[1:]:
            cells = [c.strip() for c in tr.locator("td").all_inner_texts()]
            model, em, f1 = cells[0], cells[2], cells[3]
            row = next(r for r in rows if r["id"] == qid and r["language"] == lang and r["model"] == model)
            assert (em, f1) == (f"{float(row['exact_match']):.0f}", f"{float(row['f1']):.1f}"), (lang, model, cells, row)
            compared += 1
    assert compared >= 2, "a card per language, each with the model's row"


WIDGETS = ", ".join(f"[data-testid={w}]" for w in ("stSelectbox", "stMultiSelect", "stRadio", "stNumberInput", "stTextInput",
                                                   "stTextArea", "stSlider", "stCheckbox", "stButtonGroup"))


def _widgets(page) -> dict:
    """Every widget's label and shown value (inputs, checked boxes, pressed buttons, slider values)."""
    return page.evaluate("""(sel) => { const out = {};
        document.querySelectorAll(sel).forEach((e, i) => {
            if (e.closest('[data-testid=stSidebarNav]')) return;
            const label = (e.querySelector('[data-testid=stWidgetLabel]') || {innerText: ''}).innerText.trim();
            const inputs = Array.from(e.querySelectorAll('input, textarea')).map(x =>
                x.type === 'radio' || x.type === 'checkbox' ? String(x.checked) : x.value);
            const buttons = Array.from(e.querySelectorAll('button')).map(b => b.getAttribute('data-testid') || '');
            const sliders = Array.from(e.querySelectorAll('[role=slider]')).map(s => s.getAttribute('aria-valuenow'));
            out[`${e.getAttribute('data-testid')} ${label} #${i}`] =
                [e.innerText.replace(/\\s+/g, ' ').trim(), ...inputs, ...buttons, ...sliders].join(' | ');
        }); return out; }""", WIDGETS)


def _settled_widgets(page, timeout_s: float = 90) -> dict:
    """The widgets once two looks 1.5 s apart agree (a page may draw its widgets over two runs)."""
    end, last = time.time() + timeout_s, _widgets(page)
    while time.time() < end:
        page.wait_for_timeout(1500)
        now = _widgets(page)
        if now == last:
            return now
        last = now
    return last


def _select_other(page, label: str) -> None:
    """Pick an option of a selectbox other than the one it shows."""
    box = page.locator('[data-testid="stSelectbox"]').filter(has=page.get_by_text(label, exact=True)).first
    shown = _selected(page, label)  # the value lives in the box's input, not in its text
    options = page.get_by_role("option")
    for attempt in range(4):  # a rerun that ends after the click closes the list again: wait, then reopen
        box.locator("input").first.click()
        try:
            options.first.wait_for(timeout=5_000)
            break
        except Exception:
            if attempt == 3:
                raise
            page.keyboard.press("Escape")
            wait_idle(page, timeout_s=120)
    other = next(o for o in options.all() if o.inner_text().strip() and o.inner_text().strip() not in shown)
    other.click()
    wait_idle(page, timeout_s=180)


def _add_language(page) -> None:
    box = page.get_by_test_id("stSidebar").locator('[data-testid="stMultiSelect"]').filter(has=page.get_by_text("Languages", exact=True))
    box.locator("input").first.fill("de")
    box.locator("input").first.press("Enter")
    page.keyboard.press("Escape")
    wait_idle(page)


ROUND_TRIPS = {  # page path: how to move it off its defaults
    "": _add_language,
    "runs": lambda page: _select_other(page, "Run"),
    "xquad": lambda page: (page.locator('input[aria-label^="Questions to answer"]').fill("2"),
                           page.locator('input[aria-label^="Questions to answer"]').press("Enter"), wait_idle(page)),
    "attention": lambda page: _select_other(page, "Layer"),
    "alignment": lambda page: _select_other(page, "Sentence vector"),
    "probing": lambda page: (page.get_by_test_id("stButtonGroup").get_by_text("Word in context", exact=True).click(), wait_idle(page, timeout_s=240)),
}


def test_every_page_comes_back_from_its_url(server, browser):
    """Each of the six pages moved off its defaults: its URL, opened in a fresh browser context
    (a colleague's browser), shows the same widget values; a bare URL shows others."""
    url, _ = server

    def opened(address: str):
        ctx = browser.new_context(viewport={"width": 1500, "height": 1000})
        pg = ctx.new_page()
        pg.goto(address)
        wait_idle(pg, timeout_s=240)
        assert_no_exception(pg)
        return ctx, pg

    for path, change in ROUND_TRIPS.items():
        ctx, pg = opened(f"{url}/{path}")
        default = _settled_widgets(pg)
        change(pg)
        assert_no_exception(pg)
        view, shared = _settled_widgets(pg), pg.url
        ctx.close()
        assert view != default, f"{path or 'home'}: the change did not change a widget"
        ctx, pg = opened(shared)
        end, again = time.time() + 90, _widgets(pg)
        while again != view and time.time() < end:  # until the page has drawn them all
            pg.wait_for_timeout(1000)
            again = _widgets(pg)
        ctx.close()
        assert again == view, (path or "home", shared, {k: (view.get(k), again.get(k)) for k in set(view) | set(again)
                                                        if view.get(k) != again.get(k)})


def _loss_lines_go_forward(page) -> bool:
    """Every line of every loss chart goes forward in x (no diagonal back to step 0)."""
    return page.evaluate("""() => Array.from(document.querySelectorAll('.js-plotly-plot')).every(p =>
        (p.data || []).filter(t => (t.xaxis || 'x').startsWith('x') && t.mode && t.mode.includes('lines')).every(t => {
            const x = Array.from(t.x || []);
            return typeof x[0] !== 'number' || x.every((v, i) => i === 0 || v > x[i - 1]);
        }))""")


def test_start_a_tiny_run_and_watch_it_finish(server, page):
    from xlviz import jobs

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
    # cancelled while "starting" (its job has not written config.json yet): a run that can be
    # resumed, not a folder the app cannot read
    starting = not (run_dir / "config.json").exists()
    page.get_by_role("button", name="Cancel").first.click()
    page.get_by_role("button", name="Resume").first.wait_for(timeout=60_000)
    assert_no_exception(page)
    # the picker's label follows the state at once (the browser used to keep "(starting)")
    for _ in range(20):  # drawn in the same run as the Resume button; a moment for the browser
        if "browser-run (cancelled)" in _selected(page, "Run"):
            break
        page.wait_for_timeout(250)
    assert "browser-run (cancelled)" in _selected(page, "Run"), _selected(page, "Run")
    if starting:  # (a job that wrote its config first is the mid-stage cancel below)
        assert json.loads((run_dir / "job.json").read_text()).get("cancelled"), "the cancel is recorded in job.json"
        assert jobs.effective_state(run_dir) == "cancelled" and jobs.can_resume(run_dir)
    page.get_by_role("button", name="Resume").first.click()
    page.get_by_role("button", name="Cancel").first.wait_for(timeout=60_000)
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
        # the run's state as the app reads it: status.json says "cancelled" until the resumed
        # job writes its own state, while the job is already alive ("running")
        state = jobs.effective_state(run_dir)
        if state in ("completed", "failed", "cancelled"):
            break
        time.sleep(2)
    assert state == "completed", (run_dir / "job-output.txt").read_text()[-3000:]
    # the live view (polling fragment) shows it finished without a reload
    assert page.locator("h4", has_text="demo-run").count() == 0
    page.locator('[data-testid="stProgress"]', has_text="completed").first.wait_for(timeout=30_000)
    wait_idle(page)
    assert_no_exception(page)
    # its curves stay shown as it finishes (the panel was open while it trained)
    assert wait_plots(page, 1) >= 1 and _loss_lines_go_forward(page)
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
    # the model view, the heatmap and the share matrices (a pair fed as one input; each alone, two
    # model views and two heatmaps), drawn with Vega-Lite: a new tab loads no plotly.js
    assert wait_plots(page, 3, charts=VEGA) >= 3
    assert page.locator(PLOTLY).count() == 0
    shot(page, "attention-alone")
    page.get_by_text("Typed").click()
    wait_idle(page)
    assert_no_exception(page)
    shot(page, "attention-typed")


def test_the_server_log_has_no_deprecation_notice(server):
    """Last in this module: the server's log of every walk above names no deprecated call."""
    _, root = server
    log = (root.parent / "streamlit.log").read_text(errors="replace")
    notices = [line for line in log.splitlines() if "deprecat" in line.lower()]
    assert not notices, notices[:5]
