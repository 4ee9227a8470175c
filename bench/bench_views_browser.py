"""Timings of the "why the L2 answer differs" views in a real browser, on a finished run: the
XQuAD page's Renderings and Patching expanders and the Attention page's Renderings view.

    python bench/bench_views_browser.py --checkpoints DIR --run NAME [--l2 sov] [--repeat 2] [--shots DIR]

A view's time runs from the click that opens it (or moves it to the next question) until its
last element drawn, as ``bench_pages_browser.py`` decides that moment: ``--quiet-s`` seconds
with no "running" indicator, no change in the number of elements in the main area, no element
still a placeholder and every Plotly chart drawn. Each
round starts a fresh server (``xlviz app``'s launcher) and a new browser profile, then:

- **cold**: the view opened for the first time on that server (its models read from disk);
- **warm**: the same view on the next question (Renderings: the Next button with the expander
  open; Patching: the other system picked; Attention: the next fact), models in the server's
  caches, as a user stepping through questions.

The page load before the click is timed too (``page``), beside a page that does nothing
(``bench_pages_browser.BASELINE``) on the same server launcher. Targets: every view ≤ 3 s warm
and ≤ 10 s cold on 2 cores, on a quiet machine (the 1-minute load average is printed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_pages_browser import BASELINE, BUSY, CHROMIUM_ARGS, CONTEXT, DRAWING, ELEMENTS, Server  # noqa: E402


STALE = '[data-stale="true"]'  # elements Streamlit greys out while a rerun has not redrawn them


def settle(page, start: float, quiet_s: float, timeout_s: float = 300, started_s: float = 10) -> float:
    """Seconds from ``start`` until the page stopped changing (no running indicator, no element
    greyed out as stale or still a placeholder, every Plotly chart drawn, the same number of
    elements for ``quiet_s`` seconds). After a click the
    rerun it starts may take a moment to show: the quiet period counts only once it has shown
    (or after ``started_s``)."""
    last, seen, shown = time.perf_counter(), -1, False
    while time.perf_counter() - start < timeout_s:
        busy = page.locator(BUSY).count() > 0 or page.locator(STALE).count() > 0 or page.evaluate(DRAWING)
        shown = shown or busy or (seen >= 0 and page.evaluate(ELEMENTS) != seen)
        if not shown and time.perf_counter() - start < started_s:
            seen = page.evaluate(ELEMENTS)
            last = time.perf_counter()
            page.wait_for_timeout(50)
            continue
        n = page.evaluate(ELEMENTS)
        now = time.perf_counter()
        if busy or n != seen:
            last, seen = now, n
        elif now - last >= quiet_s:
            break
        page.wait_for_timeout(100)
    if page.locator('[data-testid="stException"]').count():
        print(f"  ! exception: {page.locator('[data-testid=stException]').first.inner_text()[:300]}", file=sys.stderr)
    return last - start


def shot(page, expander: str, path: Path) -> None:
    """A screenshot of the expander labelled ``expander`` (the whole of it, scrolled into view)."""
    size = page.viewport_size
    page.set_viewport_size({"width": size["width"], "height": 3000})  # the whole expander painted
    el = page.locator('[data-testid="stExpander"]').filter(has_text=expander).first
    el.scroll_into_view_if_needed()
    page.wait_for_timeout(500)
    el.screenshot(path=str(path))
    page.set_viewport_size(size)


def tall(page, path: Path, height: int = 2600) -> None:
    """A screenshot of the page in a tall window (Streamlit's main area scrolls inside the page)."""
    size = page.viewport_size
    page.set_viewport_size({"width": size["width"], "height": height})
    page.wait_for_timeout(500)
    page.screenshot(path=str(path))
    page.set_viewport_size(size)


def open_page(ctx, url: str, quiet_s: float):
    page = ctx.new_page()
    start = time.perf_counter()
    page.goto(url)
    page.wait_for_selector("h1", timeout=300_000)
    return page, settle(page, start, quiet_s, started_s=0)  # loaded: already shown


def click(page, locator, quiet_s: float) -> float:
    locator.scroll_into_view_if_needed()
    start = time.perf_counter()
    locator.click()
    return settle(page, start, quiet_s)


def query(**kw) -> str:
    return urllib.parse.urlencode({k: v if isinstance(v, str) else json.dumps(v) for k, v in kw.items()})


def xquad(ctx, base: str, models: list[str], run: str, l2: str, quiet_s: float, shots: Path | None) -> dict[str, float]:
    """The XQuAD page with the run's questions and models, then Renderings opened (cold), the
    next question (warm); Patching opened (cold) and the second system picked (warm)."""
    out = {}
    page, out["xquad page"] = open_page(ctx, f"{base}/xquad?{query(xlviz_models=models, xq_source=f'run:{run}', xq_why_l2=l2)}", quiet_s)
    out["renderings cold"] = click(page, page.get_by_text("Renderings — this question", exact=False).first, quiet_s)
    if shots:
        shot(page, "Renderings — this question", shots / "xquad-renderings.png")
    out["renderings warm (next question)"] = click(page, page.get_by_role("button", name="Next ▶"), quiet_s)
    if shots:
        shot(page, "Renderings — this question", shots / "xquad-renderings-next.png")
    page.get_by_text("Renderings — this question", exact=False).first.click()  # closed again
    settle(page, time.perf_counter(), quiet_s)
    out["patching cold"] = click(page, page.get_by_text("Patching — where in the model", exact=False).first, quiet_s)
    if shots:
        shot(page, "Patching — where in the model", shots / "xquad-patching.png")
    box = page.locator('[data-testid="stSelectbox"]').filter(has_text="System").first
    box.scroll_into_view_if_needed()
    box.click()
    options = page.get_by_role("option")
    start = time.perf_counter()
    options.nth(1 if options.count() > 1 else 0).click()
    out["patching warm (other system)"] = settle(page, start, quiet_s)
    page.close()
    return out


def attention(ctx, base: str, models: list[str], run: str, l2: str, quiet_s: float, shots: Path | None) -> dict[str, float]:
    """The Attention page, then its Renderings view (cold) and the next test fact (warm)."""
    out = {}
    page, out["attention page"] = open_page(ctx, f"{base}/attention?{query(xlviz_models=models[:1], att_r_l2=l2)}", quiet_s)
    seg = page.locator('[data-testid="stSidebar"]').get_by_role("radio", name="Renderings")
    out["attention renderings cold"] = click(page, seg, quiet_s)
    if shots:
        tall(page, shots / "attention-renderings.png")
    box = page.locator('[data-testid="stSelectbox"]').filter(has_text="Fact of the test set").first
    box.scroll_into_view_if_needed()
    box.click()
    start = time.perf_counter()
    page.get_by_role("option").nth(1).click()
    out["attention renderings warm (next fact)"] = settle(page, start, quiet_s)
    if shots:
        tall(page, shots / "attention-renderings-next.png")
    page.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoints", required=True, help="the app's checkpoints folder, holding --run")
    ap.add_argument("--run", required=True, help="a finished world run with exported QA models (e.g. the demo)")
    ap.add_argument("--systems", default="monotrans,floor,dictionary-oracle,jointpair-disjoint")
    ap.add_argument("--l2", default="sov")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--quiet-s", type=float, default=2.0)
    ap.add_argument("--shots", help="write screenshots of each view here")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    root = Path(args.checkpoints).resolve()
    models = [f"run:{args.run}:export:{s}" for s in args.systems.split(",")]
    shots = Path(args.shots) if args.shots else None
    if shots:
        shots.mkdir(parents=True, exist_ok=True)
    tmp = tempfile.TemporaryDirectory()
    baseline = Path(tmp.name) / "baseline.py"
    baseline.write_text(BASELINE)
    load0 = os.getloadavg()[0]
    times: dict[str, list[float]] = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        for r in range(args.repeat):
            server = Server(root, str(baseline))
            try:
                ctx = browser.new_context(**CONTEXT)
                page, t = open_page(ctx, server.url, args.quiet_s)
                page.close()
                ctx.close()
                times.setdefault("baseline page (does nothing)", []).append(t)
            finally:
                server.stop()
            for view in (xquad, attention):
                server = Server(root)
                try:
                    ctx = browser.new_context(**CONTEXT)
                    got = view(ctx, server.url, models, args.run, args.l2, args.quiet_s, shots if r == 0 else None)
                    ctx.close()
                finally:
                    server.stop()
                for k, v in got.items():
                    times.setdefault(k, []).append(v)
                    print(f"round {r + 1} {k:<40} {v:6.2f} s", file=sys.stderr, flush=True)
        browser.close()
    tmp.cleanup()
    print(f"\nload average (1 min): {load0:.2f} before, {os.getloadavg()[0]:.2f} after ({os.cpu_count()} CPUs)")
    print(f"run: {args.run} (L2 {args.l2}); models: {', '.join(models)}; median of {args.repeat}\n")
    print(f"{'view':<42}{'median (s)':>12}   all")
    for k, v in times.items():
        print(f"{k:<42}{statistics.median(v):>12.2f}   {' '.join(f'{x:.1f}' for x in v)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
