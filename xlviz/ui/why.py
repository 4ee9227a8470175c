"""The XQuAD page's "Why this answer": per-token salience of a model's answer, computed only
when its expander is opened (integrated gradients cost ``n_steps`` forward and backward passes),
cached per model files, data file, question, answer span and steps.

Under an L2 card of a run's generated test set, the salience is linked across languages with
the world's gold word alignment: the words the same system's L1 model found most salient for
the L1 original, next to the salience of their translations under the L2 model (does the L2
model read the translated evidence?). Real data has no gold alignment; the page says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

import pandas as pd
import streamlit as st

from xlviz.analysis.salience import DEFAULT_STEPS, AlignedText, aligned_salience
from xlviz.data.squad import QAExample
from xlviz.views.choices import ModelChoice, ModelSpec, QADataset
from xlviz.ui.common import NA, _load_model, examples_of, file_stamp, guard, load_examples, model_key, qa_decoding
from xlviz.views.qa import index_by_id, prediction_span
from xlviz.views.salience import TARGET_LABELS, TARGET_SHORT, links_html, salience_html
from xlviz.views.text import md_text

__all__ = ["DEFAULT_STEPS", "TARGET_LABELS", "TARGET_SHORT", "salience", "world_alignment", "alignment_note", "why_this_answer"]


@st.cache_data(show_spinner=False, max_entries=256)
def _salience(path: str, tokenizer: str | None, mkey: str, file: str, fstamp: str, qid: str,
              answer: tuple[int, int] | None, n_steps: int, max_length: int, doc_stride: int, max_answer_length: int):
    from xlviz.analysis.salience import integrated_gradients

    model, tok = _load_model(path, tokenizer, "qa")
    ex = {e.id: e for e in load_examples(file, fstamp)}[qid]
    return integrated_gradients(model, tok, ex.question, ex.context, answer=answer, n_steps=n_steps,
                                max_length=max_length, doc_stride=doc_stride, max_answer_length=max_answer_length)


def salience(ref: ModelSpec, file: str, qid: str, answer: tuple[int, int] | None, n_steps: int):
    """Integrated gradients of one model's answer to question ``qid`` of a data file, in the
    window the model answered from (its decoding settings)."""
    dec = qa_decoding(ref)
    return _salience(ref.path, ref.tokenizer, model_key(ref, "qa"), file, file_stamp(file), qid,
                     tuple(answer) if answer else None, int(n_steps), dec.max_length, dec.doc_stride, dec.max_answer_length)


@st.cache_data(show_spinner=False, max_entries=8)
def _world_links(world_dir: str, stamp: str, langs: tuple[str, ...]) -> dict:
    from xlviz.data.world import load_world

    world = load_world(world_dir)
    return {"l1": world.l1, "links": {l: world.qa_alignment("test", l) for l in langs if l != world.l1 and l in world.languages}}


def world_alignment(dataset: QADataset, langs: list[str]) -> dict | None:
    """``{"l1", "links": {l2: {qid: {"question", "context"}}}}`` for a run's generated test set
    (regenerated from its ``world/world.json``: the world is deterministic); None for other data."""
    if not dataset.key.startswith("run:"):
        return None
    world = Path(dataset.folder).parent
    if not (world / "world.json").is_file():
        return None
    return _world_links(str(world), file_stamp(world / "world.json"), tuple(langs))


def alignment_note(dataset: QADataset, gold: dict | None) -> str:
    """One line (markdown of ours, names escaped) on what "Why this answer" links."""
    if gold is None:
        return ("“Why this answer” shows each model's salience on its own: these questions have no gold word "
                "alignment (only a run's generated world has one), so L1 and L2 salience are not linked.")
    return (f"“Why this answer” under an L2 card also lists the words the same system's {md_text(gold['l1'])} model "
            "found most salient and the salience of their gold translations (the world's word alignment) under the L2 model.")


def _links(m: ModelChoice, lang: str, ex: QAExample, sal, predictions: Mapping, dataset: QADataset, gold: dict,
           n_steps: int, target: str, top: int, key: str) -> None:
    l1 = gold["l1"]
    entry = gold["links"].get(lang, {}).get(ex.id)
    file_l1 = dataset.file(l1)
    if entry is None or file_l1 is None:
        st.caption(md_text(f"No gold word alignment for {ex.id} between {l1} and {lang}."))
        return
    if not m.covers(l1):
        st.caption(md_text(f"{m.name} has no {l1} model: nothing to link the {lang} salience with."))
        return
    ex1 = index_by_id(examples_of(file_l1)).get(ex.id)
    question, context = AlignedText.from_dict(entry["question"]), AlignedText.from_dict(entry["context"])
    if ex1 is None or not (question.fits(ex1.question, ex.question) and context.fits(ex1.context, ex.context)):
        st.caption(md_text(f"The world's gold alignment does not match these {l1}/{lang} files (written by another "
                           "version of the generator?): not linked."))
        return
    pred1 = predictions.get((m.name, l1), {}).get(ex.id)
    sal1 = salience(m.ref_for(l1), file_l1, ex.id, prediction_span(ex1, pred1), n_steps)
    rows = aligned_salience(sal1, sal, question, context, k=top, target=target)
    shared = sum(1 for r in rows if r["b rank"] is not None and r["b rank"] <= top)
    st.caption(md_text(f"Linked to {l1}: the {len(rows)} words the same system's {l1} model found most salient for its "
                       f"answer ({sal1.answer!r}), and their gold translations under the {lang} model") + ":")
    st.html(links_html(rows, l1, lang))
    st.caption(md_text(f"{shared} of these {len(rows)} have their translation among the {top} most salient {lang} words. "
                       "Each value: the word's attribution over the largest of its input (signed; q: a question word); "
                       "#rank by magnitude, question and context together."))


def why_this_answer(m: ModelChoice, lang: str, ex: QAExample, predictions: Mapping, dataset: QADataset, n_steps: int,
                    target: str, top: int, gold: dict | None, *, key: str) -> None:
    """A lazy expander under a card: model ``m``'s answer to ``ex`` explained by integrated
    gradients (shaded text, raw values), linked to the L1 model's through the gold alignment."""
    exp = st.expander(f"Why this answer — {md_text(m.name)}", key=key, on_change="rerun", icon=":material/lightbulb:")
    with exp:
        if not exp.open:
            return
        pred = predictions.get((m.name, lang), {}).get(ex.id)
        span = prediction_span(ex, pred)
        if span is None:
            st.info("The model gave no answer span here: nothing to explain.")
            return
        with guard(f"Salience of {m.name} on {lang}"):
            with st.spinner(f"Integrated gradients ({n_steps} steps) …"):
                sal = salience(m.ref_for(lang), dataset.file(lang), ex.id, span, n_steps)
            st.html(salience_html(sal, target))
            with st.popover("Raw values per token", icon=":material/table:"):
                st.dataframe(pd.DataFrame(sal.rows()), hide_index=True, width="stretch", key=f"{key}_raw", placeholder=NA)
            if gold is not None and lang != gold["l1"]:
                _links(m, lang, ex, sal, predictions, dataset, gold, n_steps, target, top, key)
