"""HTML for answer spans: the gold span shaded, each model's span underlined in its own colour.

Spans overlap (a model often finds part of the gold answer), so the text is cut at every span
boundary and each piece carries the styles of all spans covering it. All text is escaped: the
contexts come from data files and typed input.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

# Colour-blind-friendly qualitative palette (Okabe-Ito), one per model.
MODEL_COLOURS = ("#E69F00", "#0072B2", "#CC79A7", "#D55E00", "#009E73", "#56B4E9", "#F0E442", "#000000")
GOLD_BACKGROUND = "#c8f0c8"


def model_colour(i: int) -> str:
    return MODEL_COLOURS[i % len(MODEL_COLOURS)]


@dataclass(frozen=True)
class Span:
    start: int
    end: int  # exclusive
    label: str
    colour: str | None = None  # None: the gold span (background shade)


def highlight(text: str, spans: list[Span]) -> str:
    """``text`` as escaped HTML with ``spans`` marked; invalid spans are ignored."""
    n = len(text)
    valid = [s for s in spans if 0 <= s.start < s.end <= n]
    cuts = sorted({0, n, *(s.start for s in valid), *(s.end for s in valid)})
    parts = []
    for a, b in zip(cuts, cuts[1:]):
        piece = html.escape(text[a:b])
        active = [s for s in valid if s.start <= a and b <= s.end]
        if not active:
            parts.append(piece)
            continue
        gold = any(s.colour is None for s in active)
        lines = [s.colour for s in active if s.colour is not None]
        style = []
        if gold:
            style.append(f"background:{GOLD_BACKGROUND}")
        if lines:
            shadows = ", ".join(f"inset 0 -{3 * (i + 1)}px 0 {c}" for i, c in enumerate(lines))
            style.append(f"box-shadow:{shadows}")
            style.append(f"padding-bottom:{3 * len(lines)}px")
        title = html.escape(", ".join(s.label for s in active), quote=True)
        parts.append(f'<span class="xlviz-span" style="{";".join(style)}" title="{title}">{piece}</span>')
    return "".join(parts)


def legend(labels: list[tuple[str, str | None]]) -> str:
    """A one-line legend: ``[(label, colour or None for gold)]``."""
    items = []
    for label, colour in labels:
        if colour is None:
            sw = f'<span style="background:{GOLD_BACKGROUND};padding:0 .5em">&nbsp;</span>'
        else:
            sw = f'<span style="box-shadow:inset 0 -4px 0 {colour};padding:0 .5em">&nbsp;</span>'
        items.append(f'<span style="margin-right:1.2em;white-space:nowrap">{sw} {html.escape(label)}</span>')
    return '<div class="xlviz-legend" style="font-size:0.85em;margin:.2em 0 .6em 0">' + "".join(items) + "</div>"


def qa_card(lang: str, question: str, context_html: str, *, rtl: bool = False) -> str:
    """One language's question and highlighted context as a bordered card."""
    direction = ' dir="rtl"' if rtl else ""
    return (
        f'<div class="xlviz-qa" data-lang="{html.escape(lang, quote=True)}"{direction} '
        'style="border:1px solid rgba(128,128,128,.35);border-radius:.5rem;padding:.6rem .8rem;">'
        f'<div style="font-size:.8em;opacity:.7">{html.escape(lang)}</div>'
        f'<div style="font-weight:600;margin:.2rem 0 .5rem 0">{html.escape(question)}</div>'
        f'<div style="line-height:1.75;max-height:22rem;overflow-y:auto">{context_html}</div>'
        "</div>"
    )


RTL_LANGUAGES = {"ar", "he", "fa", "ur"}
