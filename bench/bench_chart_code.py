"""What a new tab pays before it can draw its first chart: the time to load and run the code of
Streamlit's chart elements, Plotly's beside Vega-Lite's, side by side in one run.

    python bench/bench_chart_code.py [--repeat 5]

Streamlit loads each element's code when a page first shows such an element; until then the
element, and the elements after it, are placeholders. Its Plotly element bundles all of
plotly.js (4.7 MB); this script serves the page that does nothing
(``bench_pages_browser.BASELINE``), opens it in a new tab of one browser profile (the scripts in
its HTTP cache after the first round) and times ``import()`` of the Plotly element's code and of
the Vega-Lite element's (``st.altair_chart`` / ``st.vega_lite_chart``: the chart library
Streamlit draws its own charts with) and, for scale, of the interactive table (``st.dataframe``),
in turn, ``--repeat`` times each. The ratio is Plotly's
median over Vega-Lite's: what the app's first Plotly chart costs a new tab beyond what a
Vega-Lite chart would.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_pages_browser import BASELINE, CHROMIUM_ARGS, CONTEXT, Server  # noqa: E402

IMPORT = "async (us) => { const t0 = performance.now(); await Promise.all(us.map(u => import(u))); return performance.now() - t0; }"


def js_dir() -> Path:
    """Where Streamlit keeps its browser code."""
    import streamlit

    return Path(streamlit.__file__).parent / "static" / "static" / "js"


def chunk(prefix: str) -> str:
    """The file name of one of Streamlit's bundles (its name carries a content hash)."""
    js = js_dir()
    found = sorted(js.glob(f"{prefix}.*.js"))
    if not found:
        raise SystemExit(f"no {prefix}.*.js in {js}: Streamlit's bundle layout changed")
    return found[0].name


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    # Vega-Lite's element loads vega-embed and its expression interpreter on its own when it first draws: all three are timed
    chunks = {"Plotly (st.plotly_chart)": [chunk("PlotlyChart")],
              "Vega-Lite (st.altair_chart)": [chunk("ArrowVegaLiteChart"), chunk("embed"), chunk("vega-interpreter")],
              # for scale: the interactive table most pages show (st.dataframe)
              "table (st.dataframe)": [chunk("DataFrame")]}
    times: dict[str, list[float]] = {name: [] for name in chunks}
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "baseline.py"
        script.write_text(BASELINE)
        server = Server(Path(tmp), str(script))
        try:
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
                ctx = browser.new_context(**CONTEXT)
                for r in range(args.repeat):
                    for name, files in (chunks.items() if r % 2 == 0 else reversed(list(chunks.items()))):  # order alternates
                        page = ctx.new_page()
                        page.goto(server.url)
                        page.wait_for_selector("h1")
                        page.wait_for_timeout(1500)  # the page done: only the import is timed
                        times[name].append(page.evaluate(IMPORT, [f"{server.url}/static/js/{f}" for f in files]) / 1000)
                        page.close()
                        print(f"round {r + 1} {name:<28} {times[name][-1]:.2f} s", file=sys.stderr, flush=True)
                browser.close()
        finally:
            server.stop()
    print(f"\nload average (1 min): {load0:.2f} before, {os.getloadavg()[0]:.2f} after ({os.cpu_count()} CPUs); "
          f"median of {args.repeat}, a new tab each, the scripts in the browser's HTTP cache after round 1\n")
    print(f"{'element code':<30}{'files':<60}{'size (MB)':>10}{'load and run (s)':>18}")
    js = js_dir()
    for name, files in chunks.items():
        size = sum((js / f).stat().st_size for f in files) / 1e6
        print(f"{name:<30}{' + '.join(files):<60}{size:>10.1f}{statistics.median(times[name]):>18.2f}")
    names = list(chunks)
    print(f"\nratio: {statistics.median(times[names[0]]) / statistics.median(times[names[1]]):.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
