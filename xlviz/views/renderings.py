"""Words versus order in a notebook: each system's QA exports on the counterfactual renderings
of a run's test questions and the split of the L2's loss (:mod:`xlviz.analysis.counterfactuals`;
read from the run when ``xlviz analyse renderings`` stored it with the same inputs, computed
otherwise, writing nothing).

And one fact at a time, for the Attention page's Renderings tab: a test-set fact of a run's
world (its statement, or a question asked about it) in every rendering, each with its gold word
alignment to English, and which of the picked models reads a rendering.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Sequence

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
        """As the Attention page's parallel pair (:class:`xlviz.ui.attention_view.Pair`): English
        as sentence A, this rendering as B, with their words and gold alignment."""
        from xlviz.ui.attention_view import Pair

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


__all__ = ["RenderingsView", "renderings", "Fact", "FactRendering", "facts_of", "fact_renderings", "default_reader",
           "reader_ref", "STATEMENT", "ASKED"]
