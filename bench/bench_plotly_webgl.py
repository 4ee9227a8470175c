"""Why the Alignment page's projection is drawn in SVG: ``Plotly.newPlot`` time in Chromium for
the same figure (``xlviz.views.figures.projection_figure``, 150 sentence pairs in three
languages: 750 points and the translation lines) as SVG traces (``scatter``, what the page
draws) and as WebGL traces (``scattergl``, what it drew before), side by side in one run.

    python bench/bench_plotly_webgl.py [--pairs 150] [--repeat 6]

Each draw is a new page of one headless Chromium (``--disable-gpu``, as the browser tests run),
timed from ``newPlot`` until two animation frames later; the median and the ratio are printed.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from pathlib import Path

import plotly
import plotly.utils

from xlviz.views.figures import projection_figure

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_figures_browser import draw_times  # noqa: E402  (the one timed draw of a figure)


def rows(pairs: int, seed: int = 0) -> list[dict]:
    """Points as the Alignment page projects them: each pair's sentence in English and an L2, and
    a third language's sentences without a partner."""
    rng = random.Random(seed)
    out = []
    for i in range(pairs):
        for lang in ("en", "sov"):
            out.append({"x": rng.gauss(0, 1), "y": rng.gauss(0, 1), "pair": i, "language": lang,
                        "text": "the farmer gives the teacher a book"})
    for i in range(3 * pairs):
        out.append({"x": rng.gauss(0, 1), "y": rng.gauss(0, 1), "pair": None, "language": "tr", "text": "a sentence"})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=150)
    ap.add_argument("--repeat", type=int, default=6)
    args = ap.parse_args()
    fig = projection_figure(rows(args.pairs), "projection")
    specs = {"scatter (SVG)": fig.to_json()}
    as_dict = fig.to_plotly_json()
    for trace in as_dict["data"]:
        trace["type"] = "scattergl"
    specs["scattergl (WebGL)"] = json.dumps(as_dict, cls=plotly.utils.PlotlyJSONEncoder)
    times = dict(zip(specs, draw_times(list(specs.values()), args.repeat)))
    points = sum(len(t.x or []) for t in fig.data)
    print(f"{points} x values in {len(fig.data)} traces; median of {args.repeat} draws, ms:")
    med = {k: statistics.median(v) for k, v in times.items()}
    for k, v in times.items():
        print(f"  {k:<20} {med[k]:7.0f}   all: {' '.join(f'{x:.0f}' for x in v)}")
    svg, gl = med["scatter (SVG)"], med["scattergl (WebGL)"]
    print(f"WebGL / SVG: {gl / svg:.2f}x ({gl - svg:+.0f} ms a draw)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
