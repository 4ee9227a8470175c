"""Page timings in a real browser: every page cold (a fresh server and a new browser profile,
nothing cached), warm (the same page again in a new tab of that browser: the server's models and
the browser's copy of the app's scripts cached, as for a user opening the next tab) and warm with
an empty browser cache (a new profile on the warm server: the app's scripts fetched and parsed
again) and in the same tab (the page opened, then Home, then the page again from the sidebar:
a user going back and forth between pages, the tab keeping the code it has loaded and run,
plotly.js included), median of ``--repeat`` rounds.

    python bench/bench_pages_browser.py [--checkpoints DIR] [--repeat 3] [--pages alignment,...]

Each round also prints, per visit, when the load event came (the app's shell parsed) and when
the first heading appeared: the part of a page's time spent before its script drew anything.
A page's time runs from ``page.goto`` until its last element is drawn: the moment after which, for
``--quiet-s`` seconds, Streamlit shows no "running" indicator (status widget, spinner), the
number of elements in the main area no longer changes, no element in it is still a placeholder
(``stSkeleton``: Streamlit shows one while the code that draws an element loads; in a new tab
every element of a page with a Plotly chart stays one until plotly.js, 4.7 MB, has loaded and
run) and every Plotly chart has drawn its SVG, and the server has said the page's script
finished (its ``script_finished`` message on the websocket; before that the page counts as busy:
Streamlit 1.67 shows no status widget in this browser, and a page computing behind a progress bar
changes no element count, so a Probing page still scoring its models once passed for done, and
its tab was closed mid-computation). With ``--checkpoints`` the
app reads that folder (e.g. a copy of a finished demo run: real tiny models); without it, a fake
run (tests/app_fixtures.py). Models are "cached" as the issue means it: on disk, not in the
process; the cold column includes loading them, the warm one does not.

Targets: every page ≤ 2 s warm, Alignment ≤ 5 s cold, on a quiet machine. The table prints the
1-minute load average before and after: on a shared machine the numbers are upper bounds.

The baseline, timed the same way in the same rounds: a Streamlit script that draws one heading
and one line of text (``BASELINE``), served and opened like the app. It is what this browser,
this Streamlit and this machine take for a page that does nothing, so each page's time is also
printed as its excess over the baseline (the app's own share) and as a ratio to it.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAGES = ["home", "runs", "xquad", "attention", "alignment", "probing"]
BUSY = '[data-testid="stStatusWidget"], [data-testid="stSpinner"]'
ELEMENTS = "() => document.querySelectorAll('[data-testid=stMain] [data-testid=stElementContainer]').length"
# an element not drawn yet: a placeholder while its code loads, or a chart (Plotly, Vega-Lite) not drawn
DRAWING = ("() => { const m = document.querySelector('[data-testid=stMain]'); if (!m) return true;"
           " if (m.querySelector('[data-testid=stSkeleton]')) return true;"
           " if (Array.from(m.querySelectorAll('[data-testid=stVegaLiteChart]')).some(c => !c.querySelector('canvas, svg'))) return true;"
           " return Array.from(m.querySelectorAll('[data-testid=stPlotlyChart]')).some(c => !c.querySelector('.main-svg')); }")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"]
CONTEXT = {"viewport": {"width": 1500, "height": 1000}}
PHASES: list[tuple[str, float, float]] = []  # (url, load event s, first heading s) of every page timed
# The page that does nothing: a heading and a line, no imports beyond Streamlit.
BASELINE = 'import streamlit as st\n\nst.title("Baseline")\nst.write("A page that draws one heading and one line.")\n'


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


LAUNCHERS = {
    # what `xlviz app` runs: Streamlit's command line after the model stack is imported (xlviz/ui/serve.py)
    "xlviz": [sys.executable, "-m", "xlviz.ui.serve"],
    # plain `streamlit run`: the first page that shows a model imports torch and transformers
    "streamlit": [sys.executable, "-m", "streamlit", "run"],
}
STARTS: list[float] = []  # seconds from starting each server until it accepted a connection


class Server:
    """The app served on a free port as ``xlviz app`` (``launcher="xlviz"``) or ``streamlit run``
    starts it; stopped by its own pid. The time until it accepts connections is kept in STARTS."""

    def __init__(self, root: Path, script: str = "app.py", launcher: str = "xlviz"):
        self.port = _free_port()
        env = dict(os.environ, XLVIZ_CHECKPOINTS=str(root), PYTHONPATH=str(REPO))
        start = time.perf_counter()
        self.proc = subprocess.Popen(
            [*LAUNCHERS[launcher], script, "--server.headless", "true", "--server.port", str(self.port)],
            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        for _ in range(600):
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.5).close()
                STARTS.append(time.perf_counter() - start)
                return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise SystemExit("streamlit did not start")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        os.killpg(self.proc.pid, 15)
        self.proc.wait(timeout=30)


def _script_finished(frame, finished: list[float]) -> None:
    """Note the time of a ``script_finished`` message (not one ended early for a rerun, not a fragment's)."""
    if isinstance(frame, str):
        return
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    try:
        msg = ForwardMsg.FromString(frame)
    except Exception:  # noqa: BLE001 - not a ForwardMsg
        return
    if msg.WhichOneof("type") == "script_finished" and msg.script_finished in (
            ForwardMsg.FINISHED_SUCCESSFULLY, ForwardMsg.FINISHED_WITH_COMPILE_ERROR):
        finished.append(time.perf_counter())


def _until_drawn(page, url: str, start: float, finished: list[float], quiet_s: float, timeout_s: float) -> float:
    """Seconds from ``start`` until the page's last change (see the module's docstring)."""
    last, seen = time.perf_counter(), -1
    while time.perf_counter() - start < timeout_s:
        busy = page.locator(BUSY).count() > 0 or not finished or page.evaluate(DRAWING)
        n = page.evaluate(ELEMENTS)
        now = time.perf_counter()
        if busy or n != seen:
            last, seen = now, n
        elif now - last >= quiet_s:
            break
        page.wait_for_timeout(100)
    if page.locator('[data-testid="stException"]').count():
        print(f"  ! {url}: {page.locator('[data-testid=stException]').first.inner_text()[:200]}", file=sys.stderr)
    return last - start


def time_page(ctx, url: str, quiet_s: float, timeout_s: float = 300) -> float:
    """Seconds from navigation until the page's last change (see the module's docstring), in a
    new tab of the browser context ``ctx`` (its HTTP cache shared with the context's other tabs)."""
    page = ctx.new_page()
    finished: list[float] = []  # when the server said a (non-fragment) run of the page's script ended
    page.on("websocket", lambda ws: ws.on("framereceived", lambda frame: _script_finished(frame, finished)))
    try:
        start = time.perf_counter()
        page.goto(url)  # returns at the load event: the app's shell (HTML and scripts) parsed
        loaded = time.perf_counter() - start
        page.wait_for_selector("h1", timeout=timeout_s * 1000)
        PHASES.append((url, loaded, time.perf_counter() - start))  # load event, first heading
        return _until_drawn(page, url, start, finished, quiet_s, timeout_s)
    finally:
        page.close()


def time_same_tab(ctx, url: str, target: str, away: str, quiet_s: float, timeout_s: float = 300) -> float:
    """Seconds from a click on the sidebar link to ``target`` (a page's path, "" for Home) until
    that page's last change, in a tab that opened the page at ``url`` first and then went to
    ``away`` through the sidebar: a user coming back to a page (the tab has loaded and run the
    page's code, plotly.js included)."""
    page = ctx.new_page()
    finished: list[float] = []
    page.on("websocket", lambda ws: ws.on("framereceived", lambda frame: _script_finished(frame, finished)))

    def link(path: str):
        links = page.locator('[data-testid="stSidebarNavLink"]')
        for i in range(links.count()):
            href = (links.nth(i).get_attribute("href") or "").rstrip("/")
            if (href.rsplit("/", 1)[-1] == path) if path else href.count("/") <= 2:
                return links.nth(i)
        raise SystemExit(f"no sidebar link to /{path}")

    try:
        page.goto(url)
        page.wait_for_selector("h1", timeout=timeout_s * 1000)
        _until_drawn(page, url, time.perf_counter(), finished, quiet_s, timeout_s)
        finished.clear()
        link(away).click()
        _until_drawn(page, away, time.perf_counter(), finished, quiet_s, timeout_s)
        finished.clear()
        start = time.perf_counter()
        link(target).click()
        return _until_drawn(page, target, start, finished, quiet_s, timeout_s)
    finally:
        page.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoints", help="the app's checkpoints folder (default: a fake run in a temporary folder)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--pages", default=",".join(PAGES))
    ap.add_argument("--quiet-s", type=float, default=2.0)
    ap.add_argument("--no-baseline", action="store_true", help="skip the page that does nothing")
    ap.add_argument("--launcher", choices=sorted(LAUNCHERS), default="xlviz",
                    help="xlviz: as `xlviz app` serves (model stack imported before listening); streamlit: plain `streamlit run`")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    pages = ([] if args.no_baseline else ["baseline"]) + [p for p in args.pages.split(",") if p]
    tmp = tempfile.TemporaryDirectory()
    baseline = Path(tmp.name) / "baseline.py"
    baseline.write_text(BASELINE)
    root = Path(args.checkpoints).resolve() if args.checkpoints else Path(tmp.name) / "checkpoints"
    if not args.checkpoints:
        sys.path.insert(0, str(REPO))
        from tests.app_fixtures import make_run

        make_run(root, "bench-run")
    load0 = os.getloadavg()[0]
    times: dict[str, dict[str, list[float]]] = {p: {"cold": [], "warm": [], "fresh": [], "tab": []} for p in pages}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        for r in range(args.repeat):
            for page in pages:
                server = Server(root, str(baseline) if page == "baseline" else "app.py", args.launcher)
                try:
                    url = f"{server.url}/{'' if page in ('home', 'baseline') else page}"
                    # cold: a new browser profile (nothing cached) on a server just started
                    ctx = browser.new_context(**CONTEXT)
                    cold = time_page(ctx, url, args.quiet_s)
                    # warm: a new tab of the same browser (its cached scripts, as a user's next tab)
                    warm = time_page(ctx, url, args.quiet_s)
                    ctx.close()
                    # warm, empty cache: a new profile on the warm server (the app's scripts fetched and parsed again)
                    ctx = browser.new_context(**CONTEXT)
                    fresh = time_page(ctx, url, args.quiet_s)
                    # warm, same tab: from another page's sidebar link (the page that does nothing has none)
                    tab = float("nan")
                    if page != "baseline":  # there and back: the page, Home (Runs for Home), the page again
                        tab = time_same_tab(ctx, url, "" if page == "home" else page, "runs" if page == "home" else "",
                                            args.quiet_s)
                    ctx.close()
                finally:
                    server.stop()
                times[page]["cold"].append(cold)
                times[page]["warm"].append(warm)
                times[page]["fresh"].append(fresh)
                times[page]["tab"].append(tab)
                (_, cl, ch), (_, wl, wh), (_, fl, fh) = PHASES[-3:]
                print(f"round {r + 1} {page:<10} cold {cold:6.2f} s  warm {warm:6.2f} s  warm, empty cache {fresh:6.2f} s"
                      f"  same tab {tab:6.2f} s"
                      f"   (load event / first heading: cold {cl:.2f} / {ch:.2f}, warm {wl:.2f} / {wh:.2f}, "
                      f"empty cache {fl:.2f} / {fh:.2f})", file=sys.stderr, flush=True)
        browser.close()
    tmp.cleanup()
    print(f"\nload average (1 min): {load0:.2f} before, {os.getloadavg()[0]:.2f} after ({os.cpu_count()} CPUs)")
    print(f"checkpoints: {root if args.checkpoints else 'fake run (tests/app_fixtures.py)'}; median of {args.repeat}")
    print(f"launcher: {args.launcher} ({' '.join(LAUNCHERS[args.launcher][1:])}); server start until it accepts "
          f"connections: median {statistics.median(STARTS):.2f} s (min {min(STARTS):.2f}, max {max(STARTS):.2f})\n")
    print(f"{'page':<12}{'cold (s)':>10}{'warm (s)':>10}{'warm, empty cache (s)':>23}{'same tab (s)':>14}   all cold / all warm / all same tab")
    for page in pages:
        c, w, f, t = (times[page][k] for k in ("cold", "warm", "fresh", "tab"))
        print(f"{page:<12}{statistics.median(c):>10.2f}{statistics.median(w):>10.2f}{statistics.median(f):>23.2f}"
              f"{'-' if page == 'baseline' else f'{statistics.median(t):.2f}':>14}   {' '.join(f'{x:.1f}' for x in c)} / {' '.join(f'{x:.1f}' for x in w)}"
              f" / {' '.join(f'{x:.1f}' for x in t)}")
    if "baseline" in times and len(pages) > 1:
        base = {k: statistics.median(v) for k, v in times["baseline"].items()}
        print(f"\nagainst the baseline (a page that does nothing: cold {base['cold']:.2f} s, warm {base['warm']:.2f} s, "
              f"warm, empty cache {base['fresh']:.2f} s): the page's excess in seconds (ratio)")
        for page in pages[1:]:
            m = {k: statistics.median(v) for k, v in times[page].items()}
            print(f"{page:<12}" + "".join(f"{m[k] - base[k]:>+9.2f} ({m[k] / base[k]:.1f}x)" for k in ("cold", "warm", "fresh")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
