"""XQuAD side by side without Streamlit: one question's card and the model × language scores.

Why here: the XQuAD page and the notebook API (:func:`xlviz.views.xquad_comparison`) draw
the same cards, and a card's EM/F1 come from :func:`xlviz.ui.qa.score` with the language's own
articles, the scoring of the page's tables, its CSV and the run's ``results.json`` (one scoring
function: a card never disagrees with its row in the table).
"""

from __future__ import annotations

import html
from typing import Mapping, Sequence

from xlviz.data.squad import QAExample


def question_card(lang: str, ex: QAExample, answers: Sequence[tuple[str, Mapping | None]], colours: Mapping[str, str],
                  articles: Sequence[str] | None = None, mlqa: str | None = None) -> str:
    """HTML of one question in one language: the context with the gold span and each model's
    answer highlighted, the gold answers, and a table of each model's answer with its EM and F1.

    ``answers``: ``(model name, prediction or None)`` in display order (``predict_qa``'s
    ``{"text", "start", "end"}``); ``articles``: the language's own article words (MLQA-style
    scoring, as the tables), None for the official v1.1 normalisation.
    """
    from xlviz.ui.highlight import RTL_LANGUAGES, Span, highlight, qa_card
    from xlviz.ui.qa import gold_span, prediction_span, score

    spans = []
    g = gold_span(ex)
    if g:
        spans.append(Span(g[0], g[1], "gold"))
    table = []
    for name, pred in answers:
        ps = prediction_span(ex, pred)
        if ps:
            spans.append(Span(ps[0], ps[1], name, colours[name]))
        em, f1 = score(pred.get("text") if pred else None, ex.answers, list(articles) if articles else None, mlqa)
        table.append((name, pred.get("text", "") if pred else "", em, f1))
    body = qa_card(lang, ex.question, highlight(ex.context, spans), rtl=lang in RTL_LANGUAGES)
    gold_text = " | ".join(a["text"] for a in ex.answers)
    rows_html = "".join(
        f'<tr><td><span style="box-shadow:inset 0 -4px 0 {colours[name]}">{html.escape(name)}</span></td>'
        f"<td>{html.escape(text) or '<i>(empty)</i>'}</td><td style='text-align:right'>{em:.0f}</td>"
        f"<td style='text-align:right'>{f1:.1f}</td></tr>"
        for name, text, em, f1 in table
    )
    return body + (
        f'<div style="font-size:.85em;margin-top:.4rem"><b>Gold:</b> {html.escape(gold_text)}</div>'
        + (
            '<table class="xlviz-answers" style="font-size:.85em;width:100%;margin-top:.3rem">'
            "<tr><th align=left>model</th><th align=left>answer</th><th>EM</th><th>F1</th></tr>"
            f"{rows_html}</table>"
            if table
            else ""
        )
    )
