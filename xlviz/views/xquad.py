"""XQuAD side by side without Streamlit: one question's card and the model × language scores
(the notebook's :func:`xquad_comparison`: a run's systems on its generated test set).

Why here: the XQuAD page and the notebook API (:func:`xlviz.views.xquad_comparison`) draw
the same cards, and a card's EM/F1 come from :func:`xlviz.views.qa.score` with the language's own
articles, the scoring of the page's tables, its CSV and the run's ``results.json`` (one scoring
function: a card never disagrees with its row in the table).
"""

from __future__ import annotations

import html
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from xlviz.data.squad import QAExample
from xlviz.views.cache import loaded
from xlviz.views.colours import chart_colours
from xlviz.views.text import HTML


def question_card(lang: str, ex: QAExample, answers: Sequence[tuple[str, Mapping | None]], colours: Mapping[str, str],
                  articles: Sequence[str] | None = None, mlqa: str | None = None) -> str:
    """HTML of one question in one language: the context with the gold span and each model's
    answer highlighted, the gold answers, and a table of each model's answer with its EM and F1.

    ``answers``: ``(model name, prediction or None)`` in display order (``predict_qa``'s
    ``{"text", "start", "end"}``); ``articles``: the language's own article words (MLQA-style
    scoring, as the tables), None for the official v1.1 normalisation.
    """
    from xlviz.views.highlight import RTL_LANGUAGES, Span, highlight, qa_card
    from xlviz.views.qa import gold_span, prediction_span, score

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


# --------------------------------------------------------------------------- a run's systems side by side
@dataclass
class XQuADComparison:
    """A run's systems answering its generated test questions in L1 and ``lang``.

    ``rows``: one row per (question, language, system) with EM/F1 (the XQuAD page's CSV);
    ``exact_match`` / ``f1``: system × language means (its tables); ``card(qid)``: one question
    side by side (its cards). Renders in a notebook as the two tables.
    """

    rows: Any
    exact_match: Any
    f1: Any
    languages: list[str]
    examples: dict = field(repr=False, default_factory=dict)
    predictions: dict = field(repr=False, default_factory=dict)
    articles: dict = field(repr=False, default_factory=dict)
    colours: dict = field(repr=False, default_factory=dict)

    @property
    def ids(self) -> list[str]:
        """The question ids every language has, in file order."""
        from xlviz.views.qa import shared_ids

        return shared_ids(self.examples)

    def card(self, qid: str, lang: str | None = None) -> HTML:
        """The question ``qid`` as the page's cards: one per language (or only ``lang``)."""
        from xlviz.views.qa import index_by_id

        out = []
        for lg in [lang] if lang else self.languages:
            ex = index_by_id(self.examples[lg]).get(qid)
            if ex is None:
                continue
            names = [m for (m, l) in self.predictions if l == lg]
            answers = [(m, self.predictions[(m, lg)].get(qid)) for m in names]
            out.append(question_card(lg, ex, answers, self.colours, self.articles.get(lg)))
        return HTML('<div style="display:flex;gap:1rem;flex-wrap:wrap">' + "".join(
            f'<div style="flex:1;min-width:18rem">{c}</div>' for c in out) + "</div>")

    def _repr_html_(self) -> str:
        return ("<b>Exact match (%)</b>" + self.exact_match.to_html(float_format="%.1f", na_rep="n/a")
                + "<b>F1 (%)</b>" + self.f1.to_html(float_format="%.1f", na_rep="n/a"))


def xquad_comparison(run: str | os.PathLike, lang: str, systems: Sequence[str] | None = None,
                     limit: int | None = None) -> XQuADComparison:
    """The XQuAD page for a run: its systems' QA exports answering the run's generated test set
    in L1 and ``lang``, scored as ``results.json`` (the language's own articles stripped). The
    run's saved predictions are used where it saved them; otherwise each export answers with the
    run's decoding settings."""
    from xlviz.data.squad import language_articles, load_squad, read_squad_json
    from xlviz.errors import XlvizError
    from xlviz.runs import Run, artefact, exports, world_path
    from xlviz.views.choices import run_languages
    from xlviz.views.qa import read_saved_predictions, run_decoding, saved_predictions_file, prediction_rows, score_matrix, shared_ids

    r = Run(Path(run).expanduser())
    langs = run_languages(r)
    if lang not in langs:
        raise XlvizError(f"the run has no language {lang!r}; it has {langs}", path=r.path, field="lang")
    languages = list(dict.fromkeys([langs[0], lang]))
    found = sorted({str(a.system) for a in exports(r)})
    chosen = list(systems) if systems is not None else found
    if not chosen or any(s not in found for s in chosen):
        raise XlvizError(f"no QA export for {[s for s in chosen if s not in found] or 'any system'}; the run exported {found}",
                         path=r.path / "export", field="systems")
    examples, articles, predictions = {}, {}, {}
    for lg in languages:
        file = world_path(r, "qa", split="test", language=lg)
        examples[lg] = load_squad(file)
        articles[lg] = language_articles(read_squad_json(file), file)
    ids = shared_ids(examples)[: limit or None]
    for system in chosen:
        for lg in languages:
            exported = artefact(r, "export", system=system, language=lg)
            if exported is None or not exported.folder.is_dir():
                continue
            folder = exported.folder
            file = world_path(r, "qa", split="test", language=lg)
            saved = saved_predictions_file(folder, file)
            if saved is not None:
                predictions[(system, lg)] = read_saved_predictions(saved, ids)
            else:
                from xlviz.evaluation.qa_predict import predict_qa

                m, tok = loaded(folder, None, "qa")
                dec = run_decoding(folder, int(getattr(m.config, "max_position_embeddings", 512) or 512))
                keep = set(ids)
                predictions[(system, lg)] = predict_qa(m, tok, [e for e in examples[lg] if e.id in keep],
                                                       max_length=dec.max_length, doc_stride=dec.doc_stride,
                                                       max_answer_length=dec.max_answer_length)
    rows = prediction_rows(examples, predictions, ids, articles=articles)
    return XQuADComparison(rows, score_matrix(rows, "exact_match", chosen, languages), score_matrix(rows, "f1", chosen, languages),
                           languages, examples, predictions, articles, chart_colours(chosen))
