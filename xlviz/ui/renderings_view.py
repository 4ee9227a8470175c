"""The XQuAD page's "Renderings": the question on the cards in every counterfactual rendering
of a run's generated world (English, the L2's words in English's order, English words in the
L2's order, the L2), side by side, each with every picked model's answer, its EM/F1 against that
rendering's gold answer and the rendering's [UNK] share; token salience on demand.

Why here: the numbers and the cards are :mod:`xlviz.views.renderings`' (the notebook's
``renderings_of_question`` draws the same); this module only caches them per model files and
question and lays them out. Computed only while its expander is open (each rendering is one forward pass
per model; salience ``n_steps`` forward and backward passes more).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from xlviz.views.choices import ModelChoice, QADataset
from xlviz.ui.common import NA, _load_model, few_threads, file_stamp, guard, qa_decoding, same_model_key
from xlviz.ui.tables import SCORE_RULES, number_config
from xlviz.ui.state import write_url
from xlviz.views.text import md_text
from xlviz.views.renderings import (QuestionRendering, RenderingAnswer, answer_rendering, answer_rows, question_renderings, side_by_side,
                                    rendering_card)

__all__ = ["world_of", "world_l2s", "question_renderings_of", "renderings_section"]


@st.cache_resource(show_spinner=False, max_entries=4)
def _world(world_dir: str, stamp: str):
    from xlviz.data.world import load_world

    return load_world(world_dir)


def world_of(dataset: QADataset):
    """The generated world of a run's test set (None for other data, or a run without one)."""
    if not dataset.run:
        return None
    world = Path(dataset.folder).parent
    if not (world / "world.json").is_file():
        return None
    return _world(str(world), file_stamp(world / "world.json"))


def world_l2s(dataset: QADataset) -> list[str]:
    """The world's L2s that the data set has a test file of."""
    world = world_of(dataset)
    return [l for l in world.l2s if l in dataset.languages()] if world is not None else []


@st.cache_data(show_spinner=False, max_entries=256)
def _renderings(world_dir: str, stamp: str, lang: str, qid: str) -> list[QuestionRendering]:
    return question_renderings(_world(world_dir, stamp), lang, qid)


def question_renderings_of(dataset: QADataset, lang: str, qid: str) -> list[QuestionRendering]:
    world = Path(dataset.folder).parent
    return _renderings(str(world), file_stamp(world / "world.json"), lang, qid)


@st.cache_data(show_spinner=False, max_entries=1024)
def _answer(path: str, tokenizer: str | None, mkey: str, world_dir: str, stamp: str, lang: str, qid: str, name: str,
            max_length: int, doc_stride: int, max_answer_length: int) -> RenderingAnswer:
    model, tok = _load_model(path, tokenizer, "qa")
    r = next(x for x in _renderings(world_dir, stamp, lang, qid) if x.name == name)
    with few_threads(model):
        return answer_rendering(model, tok, r, {"max_length": max_length, "doc_stride": doc_stride,
                                                "max_answer_length": max_answer_length})


@st.cache_data(show_spinner=False, max_entries=256)
def _salience(path: str, tokenizer: str | None, mkey: str, question: str, context: str, span: tuple[int, int],
              n_steps: int, max_length: int, doc_stride: int, max_answer_length: int):
    from xlviz.analysis.salience import integrated_gradients

    model, tok = _load_model(path, tokenizer, "qa")
    with few_threads(model):
        return integrated_gradients(model, tok, question, context, answer=span, n_steps=n_steps, max_length=max_length,
                                    doc_stride=doc_stride, max_answer_length=max_answer_length)


def _answers(models: list[ModelChoice], rs: list[QuestionRendering], dataset: QADataset, lang: str,
             qid: str) -> dict[tuple[str, str], tuple[RenderingAnswer | None, str]]:
    """``{(rendering, model name): (answer or None, why none)}``."""
    from dataclasses import replace

    world = Path(dataset.folder).parent
    stamp = file_stamp(world / "world.json")
    out = {}
    for m in models:
        for r in rs:
            ref = m.ref_for(r.reader)
            if ref is None:
                out[(r.name, m.name)] = (None, f"{m.name} has no {r.reader} model")
                continue
            dec = qa_decoding(ref)
            a = _answer(ref.path, ref.tokenizer, same_model_key(ref), str(world), stamp, lang, qid, r.name,
                        dec.max_length, dec.doc_stride, dec.max_answer_length)
            out[(r.name, m.name)] = (replace(a, model=m.name), "")
    return out


def _salience_of(m: ModelChoice, r: QuestionRendering, a: RenderingAnswer, n_steps: int):
    from xlviz.views.qa import prediction_span
    from xlviz.views.renderings import _example

    span = prediction_span(_example(r), a.prediction)
    if span is None:
        return None
    ref = m.ref_for(r.reader)
    dec = qa_decoding(ref)
    return _salience(ref.path, ref.tokenizer, same_model_key(ref), r.question, r.context, span, int(n_steps),
                     dec.max_length, dec.doc_stride, dec.max_answer_length)


@st.fragment  # opening it, a toggle or a pick inside reruns this section only, not the whole page
def renderings_section(models: list[ModelChoice], dataset: QADataset, lang: str, qid: str, colours: dict[str, str],
                       n_steps: int, target: str, *, key: str = "xq_rend") -> None:
    """A lazy expander: question ``qid`` in every rendering for the L2 ``lang``, one card per
    rendering side by side, each picked model's answer and scores (or why there is none), the
    numbers as a table, and integrated-gradients salience for one picked model on demand."""
    exp = st.expander("Renderings — this question in English, in the L2, and with one of the two swapped (words or order)",
                      key=key, on_change="rerun", icon=":material/swap_horiz:")
    write_url((key,))  # open or closed, in the page's URL (pages/xquad.py restores it)
    with exp:
        if not exp.open:
            return
        rs, answers = [], {}
        with guard("Could not render this question"):
            rs = question_renderings_of(dataset, lang, qid)
            st.caption(md_text(
                f"The generator renders the facts of {qid} with either language's words under either grammar: "
                f"{'; '.join(r.label for r in rs)}. Each system answers with its QA model for the words' language (its "
                "English model reads English words, its L2 model the L2's), decoded as the run decodes; EM/F1 against that "
                "rendering's gold answer, the articles of its words' language stripped. A rendering whose tokens the model "
                "reads as [UNK] more than 5% of the time is not scored: its words are not in the model's vocabulary. One "
                "question; the words-versus-order split over the test set, with intervals: xlviz analyse renderings."))
            with st.spinner("Answering every rendering …"):
                answers = _answers(models, rs, dataset, lang, qid)
            st.html(side_by_side([rendering_card(r, [(m.name, *answers[(r.name, m.name)]) for m in models], colours)
                                  for r in rs]))
            table = pd.DataFrame(answer_rows([a for a, _ in answers.values() if a is not None], rs))
            if not table.empty:
                st.dataframe(table, hide_index=True, width="stretch", key=f"{key}_table", placeholder=NA,
                             column_config=number_config(table, SCORE_RULES))
        if rs and answers:
            _salience_part(models, rs, answers, n_steps, target, key)


def _salience_part(models, rs, answers, n_steps: int, target: str, key: str) -> None:
    from xlviz.views.salience import salience_html

    c1, c2 = st.columns([2, 3], vertical_alignment="bottom")
    names = [m.name for m in models]
    pick = c1.selectbox("Token salience of", names, key=f"{key}_sal_model")
    show = c2.toggle(f"Show integrated gradients for every rendering ({n_steps} steps each; computed on demand)",
                     key=f"{key}_sal")
    if not show:
        return
    m = next(x for x in models if x.name == pick)
    per_row = 4  # a salience strip needs about a quarter of the page's width
    cols = [c for i in range(0, len(rs), per_row) for c in st.columns(per_row)][:len(rs)]
    for col, r in zip(cols, rs):
        a, why = answers.get((r.name, m.name), (None, ""))
        with col, guard(f"Salience of {m.name} on {r.label}"):
            if a is None:
                st.caption(md_text(why))
                continue
            with st.spinner(f"Integrated gradients on {r.label} …"):
                sal = _salience_of(m, r, a, n_steps)
            if sal is None:
                st.caption("No answer span here: nothing to explain.")
            else:
                st.html(salience_html(sal, target, label=f"{r.label} · {m.name}"))
