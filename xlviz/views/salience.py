"""HTML for "why this answer": the question and context with each token shaded by its salience.

Why HTML of our own: the texts come from data files and typed input, so every character is
escaped (never markdown), and the original text is shaded through each token's character span
(not the tokenizer's ``##`` pieces). Positive salience (the token pushes the answer's logit up)
is orange, negative blue (Okabe-Ito, colour-blind friendly); opacity is the magnitude relative
to the largest of the window; the answer the model gave is outlined. No Streamlit here: the
XQuAD page's "Why this answer" and the notebook's :func:`salience` draw the same HTML.
"""

from __future__ import annotations

import html
import os
from typing import Any, Sequence

from xlviz.analysis.salience import CONTEXT, QUESTION, Salience
from xlviz.views.cache import loaded
from xlviz.views.text import HTML

POSITIVE = (213, 94, 0)   # Okabe-Ito vermillion
NEGATIVE = (0, 114, 178)  # Okabe-Ito blue
TARGET_LABELS = {"total": "start + end logit (the span's score)", "start": "start logit", "end": "end logit"}
PAD = "padding:.1em .35em"  # table cells
TARGET_SHORT = {"total": "start + end", "start": "start logit", "end": "end logit"}  # a select's options


def _shade(value: float) -> str:
    r, g, b = POSITIVE if value >= 0 else NEGATIVE
    return f"rgba({r},{g},{b},{min(abs(value), 1.0) * 0.85:.3f})"


def shaded_text(text: str, pieces: Sequence[tuple[int, int, float, str]], answer: tuple[int, int] | None = None,
                window: tuple[int, int] | None = None) -> str:
    """``text`` as escaped HTML with each ``(start, end, normalised value, tooltip)`` piece
    shaded; ``answer``: a character span outlined; text outside ``window`` (characters the
    explained window does not hold) is greyed."""
    n = len(text)
    valid = sorted((p for p in pieces if 0 <= p[0] < p[1] <= n), key=lambda p: p[0])
    out, pos = [], 0

    def plain(a: int, b: int) -> str:
        if a >= b:
            return ""
        chunk = html.escape(text[a:b])
        outside = window is not None and (b <= window[0] or a >= window[1])
        return f'<span style="opacity:.45">{chunk}</span>' if outside else chunk

    for a, b, value, tip in valid:
        if a < pos:  # overlapping offsets (byte-level tokenizers): keep the first
            continue
        out.append(plain(pos, a))
        in_answer = answer is not None and answer[0] <= a and b <= answer[1]
        style = f"background:{_shade(value)};border-radius:2px"  # no padding: sub-word pieces stay joined
        if in_answer:
            style += ";outline:2px solid #444;outline-offset:0"
        out.append(f'<span class="xlviz-sal" data-value="{value:.4f}" style="{style}" '
                   f'title="{html.escape(tip, quote=True)}">{html.escape(text[a:b])}</span>')
        pos = b
    out.append(plain(pos, n))
    return "".join(out)


def _pieces(sal: Salience, segment: str, target: str) -> list[tuple[int, int, float, str]]:
    norm = sal.normalised(target)
    out = []
    for i, (seg, off) in enumerate(zip(sal.segments, sal.offsets)):
        if seg == segment and off is not None and off[1] > off[0]:
            tip = (f"{sal.tokens[i]} · start {sal.start[i]:+.3g} · end {sal.end[i]:+.3g} · "
                   f"start+end {sal.start[i] + sal.end[i]:+.3g}")
            out.append((off[0], off[1], float(norm[i]), tip))
    return out


def salience_legend() -> str:
    """One line: what orange, blue and the outline mean."""
    def chip(rgb, label):
        return (f'<span style="background:rgba({rgb[0]},{rgb[1]},{rgb[2]},.7);padding:0 .5em;border-radius:3px">'
                f"&nbsp;</span> {label}")
    return ('<div style="font-size:.8em;opacity:.85;margin:.2rem 0">'
            + chip(POSITIVE, "raises the answer's logit") + " &nbsp; " + chip(NEGATIVE, "lowers it")
            + ' &nbsp; <span style="outline:2px solid #444;padding:0 .3em">answer</span></div>')


def salience_html(sal: Salience, target: str = "total", label: str | None = None) -> str:
    """The question and the context shaded by salience, with the completeness check in one line."""
    window = None
    ctx = [o for s, o in zip(sal.segments, sal.offsets) if s == CONTEXT and o is not None]
    if ctx and (ctx[0][0] > 0 or ctx[-1][1] < len(sal.context.rstrip())):
        window = (ctx[0][0], ctx[-1][1])
    values = sal.values(target)
    if target == "total":
        diff = (sal.start_logit - sal.start_baseline) + (sal.end_logit - sal.end_baseline)
        delta = sal.start_delta + sal.end_delta
    else:
        diff = getattr(sal, f"{target}_logit") - getattr(sal, f"{target}_baseline")
        delta = getattr(sal, f"{target}_delta")
    check = (f"Σ attributions {float(values.sum()):+.3f} = logit(input) − logit(baseline) {diff:+.3f} "
             f"(convergence δ {delta:+.1e}, {sal.n_steps} steps)")
    head = f'<div style="font-size:.8em;opacity:.7">{html.escape(label)}</div>' if label else ""
    where = (f" · window {sal.window + 1} of {sal.n_windows} (greyed text is outside it)"
             if window is not None or sal.n_windows > 1 else "")
    return (
        '<div class="xlviz-salience" style="border:1px solid rgba(128,128,128,.3);border-radius:.4rem;'
        'padding:.4rem .6rem;font-size:.9em">'
        + head
        + f'<div style="font-size:.75em;opacity:.7">salience of the {html.escape(TARGET_LABELS.get(target, target))}'
        f"{html.escape(where)}</div>"
        + f'<div style="font-weight:600;margin:.2rem 0 .4rem 0">{shaded_text(sal.question, _pieces(sal, QUESTION, target))}</div>'
        + f'<div style="line-height:1.8">{shaded_text(sal.context, _pieces(sal, CONTEXT, target), sal.answer_span, window)}</div>'
        + f'<div style="font-size:.75em;opacity:.7;margin-top:.3rem">{html.escape(check)}</div>'
        + salience_legend()
        + "</div>"
    )


def links_html(rows: list[dict], lang_a: str, lang_b: str) -> str:
    """:func:`xlviz.analysis.salience.aligned_salience`'s rows as a compact table (fits a card's
    column): each A word with its share and rank, its gold translation with the B model's; the
    shares shaded as the text above. ``q`` marks a question word, otherwise a context word."""
    def cell(word, share, rank, where=None):
        if word is None:
            return f'<td colspan="2" style="opacity:.6;{PAD}">(no translation)</td>'
        tag = ' <span style="opacity:.55;font-size:.85em">q</span>' if where == QUESTION else ""
        value = "n/a" if share is None else f"{share:+.2f}"
        shade = "transparent" if share is None else _shade(share)
        rank_text = "" if rank is None else f" #{rank}"
        return (f"<td style='{PAD}'>{html.escape(word)}{tag}</td><td style='text-align:right;white-space:nowrap;{PAD}'>"
                f"<span style='background:{shade};border-radius:3px;padding:0 2px'>{value}</span>"
                f"<span style='opacity:.6'>{rank_text}</span></td>")

    body = "".join(f"<tr>{cell(r['a word'], r['a share'], r['a rank'], r['where'])}"
                   f"{cell(r['b word'], r['b share'], r['b rank'])}</tr>" for r in rows)
    a, b = html.escape(lang_a), html.escape(lang_b)
    return ('<table class="xlviz-links" style="font-size:.82em;width:100%;border-collapse:collapse">'
            f"<tr><th align=left style='{PAD}'>{a} word</th><th align=right style='{PAD}'>{a} model</th>"
            f"<th align=left style='{PAD}'>{b} translation</th><th align=right style='{PAD}'>{b} model</th></tr>{body}</table>")


def salience(model: Any, question: str, context: str, *, answer: tuple[int, int] | None = None, target: str = "total",
             tokenizer: str | os.PathLike | None = None, n_steps: int = 32, max_length: int | None = None,
             doc_stride: int | None = None, max_answer_length: int | None = None) -> HTML:
    """The XQuAD page's "Why this answer": integrated gradients of the answer's start and end
    logits over the word embeddings ([PAD] baseline, special tokens kept), the question and
    context shaded per token. HTML; its ``.salience`` holds the raw per-token values
    (:class:`xlviz.analysis.salience.Salience`: ``tokens``, ``start``, ``end``, deltas).

    ``model``: a QA model folder (a run's export is decoded with its run's settings) or a
    ``(model, tokenizer)`` pair; ``answer``: the character span to explain in ``context``
    (None: the model's own answer); ``target``: ``"total"`` (start + end), ``"start"`` or ``"end"``.
    """
    from xlviz.analysis.salience import integrated_gradients
    from xlviz.views.qa import Decoding, run_decoding

    m, tok = loaded(model, tokenizer, "qa")
    max_pos = int(getattr(getattr(m, "config", None), "max_position_embeddings", 512) or 512)
    if isinstance(model, tuple):  # no folder, so no run: SQuAD's settings capped by the model's positions
        length = min(384, max_pos)
        dec = Decoding(length, max(16, min(128, length // 3)), 30, "SQuAD defaults")
    else:
        dec = run_decoding(str(model), max_pos)
    sal = integrated_gradients(m, tok, question, context, answer=answer, n_steps=n_steps,
                               max_length=max_length or dec.max_length, doc_stride=doc_stride or dec.doc_stride,
                               max_answer_length=max_answer_length or dec.max_answer_length)
    out = HTML(salience_html(sal, target))
    out.salience = sal
    return out
