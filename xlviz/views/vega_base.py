"""What the Vega-Lite spec writers share (:mod:`xlviz.views.vega` for lines, points and bars,
:mod:`xlviz.views.vega_heatmap` for heatmaps): Plotly's dashes, text markup and numbers read
the way Vega-Lite needs them."""

from __future__ import annotations

import html
import re
from typing import Any

# Plotly's dash names as SVG dash arrays (plotly draws "dot" as 3,3 px at width 2, and so on)
DASHES = {"solid": [1, 0], "dot": [2, 3], "dash": [8, 4], "longdash": [14, 5], "dashdot": [8, 3, 2, 3],
          "longdashdot": [14, 4, 2, 4]}

# the tags of Plotly's text markup; anything else in a text (a sentence's "a < b > c") is the text's own
MARKUP = re.compile(r"<br\s*/?>|</?(?:b|i|em|strong|sup|sub|span|a)(?:\s[^<>]*)?>", re.IGNORECASE)


def plain(text: Any) -> str:
    """Plotly's text markup as plain text (Vega-Lite draws text as it is, never as HTML)."""
    out = MARKUP.sub(lambda m: " " if m.group(0).lower().startswith("<br") else "", str(text or ""))
    return re.sub(r"\s+", " ", html.unescape(out)).strip()


def num(v: Any) -> float | None:
    """A finite-or-infinite float, or None for anything else (None, NaN, text)."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if f == f else None
