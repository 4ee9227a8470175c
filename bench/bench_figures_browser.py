"""What each page's Plotly figures cost the browser: every figure a page draws on its first view
(read with Streamlit's AppTest from the app as it runs on ``--checkpoints``) drawn alone by
``Plotly.newPlot`` in headless Chromium, beside a baseline figure of one point drawn the same way
in the same run; median of ``--repeat`` draws, each in a new page.

    python bench/bench_figures_browser.py --checkpoints DIR [--pages attention,alignment,runs,probing] [--repeat 3]

Why: on a 2-core machine a page's warm time is mostly the browser's, and each figure has a floor
(the baseline) however small its data; this says which figures are worth drawing lazily.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TIMED = """async (spec) => { const f = JSON.parse(spec); const t0 = performance.now();
  await Plotly.newPlot('g', f.data, f.layout);
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  return performance.now() - t0; }"""


def draw_times(specs: list[str], repeat: int) -> list[list[float]]:
    """Milliseconds of ``Plotly.newPlot`` for each plotly JSON of ``specs``, ``repeat`` times, each
    draw in a new page of one headless Chromium (``--disable-gpu``, as the browser tests run),
    round-robin so that a busy moment hits every figure alike."""
    import plotly
    from playwright.sync_api import sync_playwright

    js = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    times: list[list[float]] = [[] for _ in specs]
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as pw:
        html = Path(tmp) / "page.html"
        html.write_text(f"<html><body><div id=g style='width:1200px'></div><script src='{js.as_uri()}'></script></body></html>")
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
        for _ in range(repeat):
            for i, spec in enumerate(specs):
                page = browser.new_page()
                page.goto(html.as_uri())
                times[i].append(page.evaluate(TIMED, spec))
                page.close()
        browser.close()
    return times


def page_figures(page: str) -> list[tuple[str, str]]:
    """(chart key, plotly JSON) of every figure ``page`` draws on its first view."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=300)
    at.run()
    at.switch_page(f"pages/{page}.py").run()
    return [(c.proto.id.rsplit("-", 1)[-1] if "-" in c.proto.id else c.proto.id, c.proto.spec) for c in at.get("plotly_chart")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoints", required=True, help="the app's checkpoints folder (e.g. a copy of a demo run)")
    ap.add_argument("--pages", default="attention,alignment,runs,probing")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    os.environ["XLVIZ_CHECKPOINTS"] = str(Path(args.checkpoints).resolve())
    sys.path.insert(0, str(REPO))
    import plotly.graph_objects as go

    figures = [("baseline", "one point", go.Figure(go.Scatter(x=[0], y=[0])).to_json())]
    for page in [p for p in args.pages.split(",") if p]:
        figures += [(page, key, spec) for key, spec in page_figures(page)]
    times = draw_times([spec for _, _, spec in figures], args.repeat)
    base = statistics.median(times[0])
    print(f"median of {args.repeat} draws, ms (baseline: a one-point figure, {base:.0f} ms)")
    per_page: dict[str, float] = {}
    for i, (page, key, spec) in enumerate(figures):
        med = statistics.median(times[i])
        if page != "baseline":
            per_page[page] = per_page.get(page, 0.0) + med
        print(f"  {page:<10} {key[:40]:<40} {med:6.0f}  ({med / base:.1f}x baseline, {len(spec):,} bytes)")
    for page, total in per_page.items():
        print(f"  {page:<10} all figures of its first view: {total / 1000:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
