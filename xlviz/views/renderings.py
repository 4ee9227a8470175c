"""Words versus order in a notebook: each system's QA exports on the counterfactual renderings
of a run's test questions and the split of the L2's loss (:mod:`xlviz.analysis.counterfactuals`;
read from the run when ``xlviz analyse renderings`` stored it with the same inputs, computed
otherwise, writing nothing).

And one fact at a time, for the Attention page's Renderings tab: a test-set fact of a run's
world (its statement, or a question asked about it) in every rendering, each with its gold word
alignment to English, and which of the picked models reads a rendering.

And one question at a time, for the XQuAD page: its renderings side by side, each with every
model's answer, its EM/F1 against that rendering's gold answer and the rendering's [UNK] share
(:func:`question_renderings`, :func:`answer_rendering`, :func:`rendering_card`: the page's cards
and ``xlviz.views.renderings_of_question``'s are the same HTML).
"""

from __future__ import annotations

import html
import os
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from xlviz.errors import XlvizError


@dataclass
class RenderingsView:
    """``scores``: EM/F1 with 95% paragraph intervals per system and rendering (and the share
    of [UNK] tokens); ``split``: F1 and EM lost against English per cost (the two crossings,
    each one-feature rendering, the total), paired intervals."""

    scores: Any
    split: Any
    unchanged: list = field(default_factory=list)  # one-feature renderings equal to English here (not scored)

    def figure(self):
        """F1 per rendering and system with intervals (plotly)."""
        import plotly.graph_objects as go

        fig = go.Figure()
        for system, g in self.scores.groupby("system", sort=False):
            fig.add_bar(name=system, x=list(g["label"]), y=g["f1"],
                        error_y=dict(type="data", symmetric=False, array=g["f1_high"] - g["f1"], arrayminus=g["f1"] - g["f1_low"]))
        fig.update_layout(barmode="group", yaxis_title="F1 (%) with 95% paragraph interval", height=380)
        return fig

    def _repr_html_(self) -> str:
        s = self.scores.drop(columns=["rendering"])
        d = self.split[self.split["metric"] == "f1"]
        return ("<b>EM / F1 (%) per rendering</b>" + s.to_html(index=False, float_format="%.1f")
                + "<b>F1 lost against English (paired)</b>" + d.to_html(index=False, float_format="%.2f"))


def renderings(run: str | os.PathLike, lang: str, systems: Sequence[str] | None = None, *,
               paragraphs: int | None = None) -> RenderingsView:
    """The run's words-versus-order table on ``lang`` for ``systems`` (default: every system with
    English and ``lang`` QA exports), on the first ``paragraphs`` test paragraphs (default all)."""
    import pandas as pd

    from xlviz.analysis.counterfactuals import SCORE_COLUMNS, SPLIT_COLUMNS, run_renderings

    table = run_renderings(run, lang, list(systems) if systems else None, paragraphs)
    return RenderingsView(pd.DataFrame(table["scores"], columns=list(SCORE_COLUMNS)),
                          pd.DataFrame(table["split"], columns=list(SPLIT_COLUMNS)), list(table.get("unchanged", [])))


# --- one fact in every rendering ------------------------------------------------------------------

STATEMENT = "statement"
ASKED = {"subj": "question (subject)", "obj": "question (object)", "loc": "question (location)"}


@dataclass(frozen=True)
class Fact:
    """A test-set fact of a world: its clause, the questions the test set asks about it, and
    its id (``test-<paragraph:04d>-<fact>``, the prefix of those questions' ids)."""

    id: str
    clause: Any
    questions: tuple = ()
    text: str = ""  # the English statement

    def items(self) -> list[str]:
        """What can be rendered: the statement, then each asked question's target."""
        return [STATEMENT] + [q.target for q in self.questions]


@dataclass(frozen=True)
class FactRendering:
    """One rendering of a fact's statement or question: its words, and the gold word alignment
    ``(English word, this rendering's word)`` (words from the same slot of the clause)."""

    name: str
    label: str
    words_language: str  # whose lexicon: the language of the model that reads it
    order: str
    text: str
    words: list[str]
    alignment: list[tuple[int, int]] = field(default_factory=list)
    english: str = ""
    english_words: list[str] = field(default_factory=list)

    @property
    def same_as_english(self) -> bool:
        return self.text == self.english

    def pair(self):
        """As the Attention page's parallel pair (:class:`xlviz.views.attention.Pair`): English
        as sentence A, this rendering as B, with their words and gold alignment."""
        from xlviz.views.attention import Pair

        return Pair(self.name, "en", self.name, self.english, self.text, list(self.english_words), list(self.words),
                    list(self.alignment))


def facts_of(world) -> list[Fact]:
    """Every fact of the world's test paragraphs, in order (the facts its QA test sets ask about)."""
    from xlviz.data.world import render

    english = world.lang[world.l1]
    return [Fact(f"test-{p:04d}-{f}", c, tuple(qs), render(english, c).text)
            for p, facts in enumerate(world.qa_facts("test")) for f, (c, qs) in enumerate(facts)]


def fact_renderings(world, l2: str, fact: Fact, item: str = STATEMENT) -> list[FactRendering]:
    """``fact``'s statement (``item`` = ``"statement"``) or its question about ``item``
    (``"subj"``, ``"obj"``, ``"loc"``) in every rendering of ``l2``'s words-versus-order split
    (:func:`xlviz.data.counterfactual.renderings_of`), each aligned with English."""
    from xlviz.data.counterfactual import renderings_of
    from xlviz.data.grammar import word_alignment
    from xlviz.data.world import render

    if item == STATEMENT:
        what = fact.clause
    else:
        what = next((q for q in fact.questions if q.target == item), None)
        if what is None:
            raise XlvizError(f"the test set asks no question about {item!r} of {fact.id}; it asks about "
                             f"{[q.target for q in fact.questions]}", field="item")
    kinds = renderings_of(world, l2)
    en = render(kinds["en"].language, what)
    out = []
    for name, kind in kinds.items():
        r = render(kind.language, what)
        label = kind.label.replace("L2", l2)
        out.append(FactRendering(name, label, kind.words, kind.order, r.text, [w for w, _ in r.words],
                                 word_alignment(en.words, r.words), en.text, [w for w, _ in en.words]))
    return out


def default_reader(models: Sequence, language: str, readable: dict[str, bool] | None = None) -> str | None:
    """The key of the picked model that reads a rendering in ``language``'s words: the first
    whose tokenizer reads it (``readable``: model key -> verdict) among those made for that
    language, then those for every language, then the rest; None without models."""
    if not models:
        return None

    def rank(m) -> tuple[int, int]:
        langs = m.languages()
        fit = 0 if langs is not None and language in langs else 1 if langs is None else 2
        return (0 if (readable or {}).get(m.key, True) else 1, fit)

    return min(models, key=rank).key


def reader_ref(model, language: str):
    """The model a picked model reads ``language``'s words with (its own for that language,
    else its only one)."""
    return model.ref_for(language) or model.ref_for(None)


# --------------------------------------------------------------------------- one question
@dataclass(frozen=True)
class QuestionRendering:
    """One question of the world in one rendering: ``words``' lexicon under ``order``'s grammar,
    read by the system's ``reader`` export; ``data``: SQuAD JSON holding that question and its
    paragraph (the rendering's own articles for scoring)."""

    name: str
    words: str
    order: str
    reader: str
    data: dict = field(repr=False)
    label: str = ""

    @property
    def paragraph(self) -> dict:
        return self.data["data"][0]["paragraphs"][0]

    @property
    def qid(self) -> str:
        return self.paragraph["qas"][0]["id"]

    @property
    def question(self) -> str:
        return self.paragraph["qas"][0]["question"]

    @property
    def context(self) -> str:
        return self.paragraph["context"]

    @property
    def answers(self) -> list[dict]:
        return self.paragraph["qas"][0]["answers"]


def question_renderings(world, lang: str, qid: str) -> list[QuestionRendering]:
    """Question ``qid`` of the world's test set in every rendering the counterfactual module
    offers for the L2 ``lang`` (English, the L2's words in English's order, English words in the
    L2's order, the L2, then English with one of the L2's features), in its order."""
    from xlviz.data.counterfactual import render_question, renderings_of

    if lang not in world.l2s:
        raise XlvizError(f"the world has no L2 {lang!r}; it has {world.l2s}", field="language")
    return [QuestionRendering(name, k.words, k.order, k.reader, render_question(world, k.language, qid),
                              k.label.replace("L2", lang))
            for name, k in renderings_of(world, lang).items()]


@dataclass(frozen=True)
class RenderingAnswer:
    """One model's answer to one rendering: ``prediction`` as ``predict_qa`` gives it, EM/F1
    (percent) against the rendering's gold answer, scored as the words-versus-order table scores
    (:func:`xlviz.analysis.counterfactuals.score_predictions`), and the share of the
    rendering's tokens (its question and context) that the model's tokenizer reads as [UNK]."""

    rendering: str
    model: str
    prediction: dict | None
    exact_match: float
    f1: float
    unk_rate: float

    @property
    def scorable(self) -> bool:
        """False when too many words are missing from the model's vocabulary for a score to mean
        anything (the table's limit, :data:`xlviz.analysis.counterfactuals.UNK_LIMIT`)."""
        from xlviz.analysis.counterfactuals import UNK_LIMIT

        return self.unk_rate <= UNK_LIMIT

    @property
    def text(self) -> str:
        return (self.prediction or {}).get("text") or ""

    @property
    def note(self) -> str:
        """One line in place of the scores of a rendering that cannot be scored; "" otherwise."""
        return "" if self.scorable else not_scored(self.unk_rate)


def not_scored(unk_rate: float) -> str:
    """The line shown instead of EM/F1 when a rendering's [UNK] share is above the limit."""
    from xlviz.analysis.counterfactuals import UNK_LIMIT

    return (f"not scored: {100 * unk_rate:.0f}% of its tokens are [UNK] (above {100 * UNK_LIMIT:.0f}%: "
            "words missing from the model's vocabulary)")


def answer_rendering(model, tok, r: QuestionRendering, decoding: Mapping[str, int], name: str = "") -> RenderingAnswer:
    """``model`` (its tokenizer ``tok``, eval mode) answering rendering ``r``, decoded with the
    run's ``decoding`` (``max_length``, ``doc_stride``, ``max_answer_length``)."""
    from xlviz.analysis.counterfactuals import predict_rendering, score_predictions, unk_rate

    pred = predict_rendering(model, tok, r.data, dict(decoding)).get(r.qid)
    scored = score_predictions(r.data, {r.qid: pred["text"]} if pred else {})[0]
    return RenderingAnswer(r.name, name, pred, float(scored["exact_match"]), float(scored["f1"]), float(unk_rate(tok, r.data)))


def answer_rows(answers: Sequence[RenderingAnswer], renderings: Sequence[QuestionRendering]) -> list[dict]:
    """One row per (rendering, model): the answer, EM and F1 (None when not scorable), the
    [UNK] share in percent, and the line saying why a rendering was not scored."""
    label = {r.name: r.label for r in renderings}
    reader = {r.name: r.reader for r in renderings}
    return [{"rendering": label.get(a.rendering, a.rendering), "model": a.model, "read by": f"{reader.get(a.rendering, '')} model",
             "answer": a.text, "EM": a.exact_match if a.scorable else None, "F1": a.f1 if a.scorable else None,
             "[UNK] %": round(100 * a.unk_rate, 1), "note": a.note} for a in answers]


def rendering_card(r: QuestionRendering, answers: Sequence[tuple[str, RenderingAnswer | None, str]],
                   colours: Mapping[str, str]) -> str:
    """HTML of one rendering of a question: its label, which export reads it, the question and
    the context with the gold span and each model's answer highlighted, and per model its answer,
    EM, F1 and [UNK] share, or a short line in place of the scores (not scorable: "not scored:
    8% [UNK]", the whole reason in its tooltip; no model for this rendering: ``(name, None,
    why)``). Every text escaped (never markdown)."""
    from xlviz.views.highlight import Span, highlight, qa_card
    from xlviz.views.qa import prediction_span

    ex = _example(r)
    spans = []
    gold = r.answers[0] if r.answers else None
    if gold and gold["text"]:
        spans.append(Span(int(gold["answer_start"]), int(gold["answer_start"]) + len(gold["text"]), "gold"))
    rows = []
    for name, a, why in answers:
        colour = colours.get(name, "#888")
        cell = f'<td><span style="box-shadow:inset 0 -4px 0 {colour}">{html.escape(name)}</span></td>'
        if a is None:
            rows.append(f'<tr class="xlviz-rendering-missing">{cell}<td colspan="4"><i>{html.escape(why)}</i></td></tr>')
            continue
        ps = prediction_span(ex, a.prediction)
        if ps:
            spans.append(Span(ps[0], ps[1], name, colour))
        answer = html.escape(a.text) or "<i>(empty)</i>"
        unk = f"<td style='text-align:right'>{100 * a.unk_rate:.1f}%</td>"
        if a.scorable:
            scores = f'<td style="text-align:right">{a.exact_match:.0f}</td><td style="text-align:right">{a.f1:.1f}</td>'
            rows.append(f'<tr class="xlviz-rendering-scored">{cell}<td>{answer}</td>{scores}{unk}</tr>')
        else:
            note = (f'<td colspan="2" title="{html.escape(a.note)}"><i>not scored: {100 * a.unk_rate:.0f}% [UNK]</i></td>')
            rows.append(f'<tr class="xlviz-rendering-unscored">{cell}<td>{answer}</td>{note}{unk}</tr>')
    head = f'<div style="font-weight:600;margin-bottom:.2rem">{html.escape(r.label)}</div>'
    body = qa_card(f"{r.words} words · {r.order} order · read by each system's {r.reader} model", r.question,
                   highlight(r.context, spans))
    gold_text = " | ".join(a["text"] for a in r.answers)
    table = ('<table class="xlviz-renderings" style="font-size:.85em;width:100%;margin-top:.3rem">'
             "<tr><th align=left>model</th><th align=left>answer</th><th>EM</th><th>F1</th><th>[UNK]</th></tr>"
             + "".join(rows) + "</table>") if rows else ""
    return (f'<div class="xlviz-rendering" data-rendering="{html.escape(r.name, quote=True)}">' + head + body
            + f'<div style="font-size:.85em;margin-top:.4rem"><b>Gold:</b> {html.escape(gold_text)}</div>' + table + "</div>")


def side_by_side(cards: Sequence[str], min_width_rem: int = 18) -> str:
    """Cards side by side, as many to a row as fit at ``min_width_rem`` each, the rest wrapping
    to the next row: a question has up to nine renderings, too many for one row of columns
    (each card's table of answers and scores needs about 18rem)."""
    return ('<div class="xlviz-rendering-cards" style="display:flex;gap:1rem;flex-wrap:wrap">'
            + "".join(f'<div style="flex:1;min-width:{min_width_rem}rem">{c}</div>' for c in cards) + "</div>")


def _example(r: QuestionRendering):
    from xlviz.data.squad import QAExample

    return QAExample(r.qid, "", r.context, r.question, list(r.answers))


@dataclass
class QuestionRenderingsView:
    """One question's renderings (``renderings``) and each system's answers (``rows``: one per
    rendering and system; ``answers``: the raw :class:`RenderingAnswer` objects). Renders in a
    notebook as the XQuAD page's cards, side by side."""

    renderings: list
    answers: list
    rows: Any
    colours: dict = field(default_factory=dict, repr=False)

    def cards(self) -> str:
        systems = list(dict.fromkeys(a.model for a in self.answers))
        by = {(a.rendering, a.model): a for a in self.answers}
        cards = [rendering_card(r, [(s, by.get((r.name, s)), f"{s} has no {r.reader} model") for s in systems], self.colours)
                 for r in self.renderings]
        return side_by_side(cards)

    def _repr_html_(self) -> str:
        return self.cards()


def run_decoding_of(folder: str | os.PathLike, model) -> dict[str, int]:
    """The run's decoding of one of its QA exports (SQuAD's defaults, capped by the model's
    positions, for a folder outside a run), as the XQuAD page decodes it."""
    from xlviz.views.qa import capped, run_decoding

    max_pos = int(getattr(getattr(model, "config", None), "max_position_embeddings", 512) or 512)
    dec = capped(run_decoding(folder, max_pos), max_pos)
    return {"max_length": dec.max_length, "doc_stride": dec.doc_stride, "max_answer_length": dec.max_answer_length}


def renderings_of_question(run: str | os.PathLike, lang: str, qid: str, systems: Sequence[str] | None = None) -> QuestionRenderingsView:
    """Question ``qid`` of a run's generated test set in every rendering for the L2 ``lang``,
    answered by each system's QA exports (its English export reads English words, its ``lang``
    export the L2's), decoded with the run's settings: the XQuAD page's "Renderings"."""
    import pandas as pd
    from pathlib import Path

    from xlviz.analysis.patching_report import _exports
    from xlviz.data.world import load_world
    from xlviz.runs import world_folder
    from xlviz.views.cache import loaded
    from xlviz.views.colours import chart_colours

    run = Path(run).expanduser()
    world = load_world(world_folder(run))
    rs = question_renderings(world, lang, qid)
    chosen = _exports(run, lang, list(systems) if systems else None)
    answers = []
    for system, (en_dir, l2_dir) in chosen.items():
        folders = {world.l1: en_dir, lang: l2_dir}
        for r in rs:
            model, tok = loaded(folders[r.reader], None, "qa")
            answers.append(answer_rendering(model, tok, r, run_decoding_of(folders[r.reader], model), system))
    return QuestionRenderingsView(rs, answers, pd.DataFrame(answer_rows(answers, rs)), chart_colours(list(chosen)))


__all__ = ["RenderingsView", "renderings", "Fact", "FactRendering", "facts_of", "fact_renderings", "default_reader",
           "reader_ref", "STATEMENT", "ASKED", "QuestionRendering", "question_renderings", "RenderingAnswer",
           "answer_rendering", "answer_rows", "not_scored", "rendering_card", "QuestionRenderingsView",
           "run_decoding_of", "renderings_of_question"]
