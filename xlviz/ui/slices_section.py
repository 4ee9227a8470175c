"""The XQuAD page's "Scores by slice" section: the picked models' EM/F1 per group of questions
with paragraph intervals, A − B per slice, and a slice picker that keeps only that slice's
questions on the cards below.

Why a helper: the page stays a list of sections; the numbers are :mod:`xlviz.views.slices`'s.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from xlviz.ui.common import guard
from xlviz.ui.tables import SCORE_RULES, number_config, with_p_text
from xlviz.views.slices import dataset_slices, pivot, slice_frames, slice_label

NONE = "every question"
KEY = "xq_slice"


@st.cache_data(show_spinner=False, max_entries=16)
def _slices(files: tuple, lang: str, world_dir: str | None, stamp: tuple) -> tuple[dict, dict, str]:
    return dataset_slices(dict(files), lang, world_dir)


def _stamp(paths: list[str]) -> tuple:
    out = []
    for p in paths:
        try:
            st_ = Path(p).stat()
            out.append((p, st_.st_mtime_ns, st_.st_size))
        except OSError:
            out.append((p, None, None))
    return tuple(out)


ROW_KEY = ["id", "language", "model", "paragraph", "exact_match", "f1"]  # what the slice numbers read of the rows


def _rows_digest(rows: pd.DataFrame, lang: str) -> str:
    """A digest of ``lang``'s rows as the slice numbers read them (one hash over them, not
    Streamlit's argument hashing of the whole frame)."""
    import hashlib

    part = rows.loc[rows["language"] == lang, ROW_KEY]
    return hashlib.sha1(pd.util.hash_pandas_object(part, index=False).to_numpy().tobytes()).hexdigest() + f"|{len(part)}"


@st.cache_data(show_spinner=False, max_entries=32)
def _frames(rows_digest: str, slices_key: str, lang: str, names: tuple, pair: tuple | None, _rows: pd.DataFrame,
            _slices: dict, _order: dict) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """:func:`slice_frames` of the rows with that digest and the slices of that state of the
    files (``slices_key``), computed once: its bootstrap and permutation tests took a second a
    render, most of the XQuAD page's warm time, behind a closed expander."""
    ids = set(_rows.loc[_rows["language"] == lang, "id"])
    slices = {k: v for k, v in _slices.items() if k in ids}
    return slice_frames(_rows, lang, list(names), slices, _order, pair)


def slices_section(rows: pd.DataFrame, dataset, langs: list[str], names: list[str]) -> None:
    """Draw the section (inside an expander); the picked slice's ids go to ``st.session_state``
    (read by :func:`slice_filter`)."""
    box = st.expander("Scores by slice — where each model gains and loses (click a slice to see its questions below)", key="xq_slices", on_change="rerun")
    with box:
        if box.open:
            c1, c2, c3 = st.columns(3)
            lang = c1.selectbox("Language", langs, index=len(langs) - 1, key="xq_slice_lang")
            a = c2.selectbox("Difference: A", names, key="xq_slice_a") if len(names) > 1 else None
            b = c3.selectbox("minus B", [n for n in names if n != a], key="xq_slice_b") if a else None
            world_dir = str(Path(dataset.folder).parent) if dataset.run else None
            files = tuple(dataset.files)
            with guard("Could not group the questions by slice"):
                stamp = _stamp([f for _, f in files] + ([world_dir + "/world.json"] if world_dir else []))
                slices, order, source = _slices(files, lang, world_dir, stamp)
                table, diffs, groups = _frames(_rows_digest(rows, lang), repr((files, world_dir, stamp)), lang, tuple(names),
                                               (a, b) if a and b else None, rows, slices, order)
                st.caption(("Slices from the world generator (what each question asks about and where its answer lies)"
                            if source == "world" else "Slices from the text (question word from the English question, answer "
                            "length and position, share of the question's words in the context)")
                           + ". EM / F1 (%) [F1 95% interval resampling whole paragraphs within the slice]; one model is one "
                           "seed, so the spread over training seeds is not in them.")
                wide = pivot(table)
                st.dataframe(wide, width="stretch", key="xq_slice_table", column_config=number_config(wide, SCORE_RULES))
                if not diffs.empty:
                    d = diffs[diffs["metric"] == "f1"].assign(slice=[slice_label(x, y) for x, y in
                                                                      zip(diffs.loc[diffs["metric"] == "f1", "dimension"],
                                                                          diffs.loc[diffs["metric"] == "f1", "value"])])
                    st.caption(f"F1 of {a} − {b} on the same questions: paired paragraph bootstrap and sign-flip permutation p-value.")
                    shown = with_p_text(d[["slice", "difference", "low", "high", "p_value", "n_questions", "n_paragraphs"]]
                                        .rename(columns={"difference": "F1 A − B", "p_value": "p"}))  # p < 0.0005: "< 0.001"
                    st.dataframe(shown, hide_index=True, width="stretch", key="xq_slice_diffs",
                                 column_config=number_config(shown, SCORE_RULES))
                options = [NONE] + [slice_label(d, v) for d, v in groups]
                labels = {slice_label(d, v): ids_ for (d, v), ids_ in groups.items()}
                if st.session_state.get(KEY) not in options:
                    st.session_state[KEY] = NONE
                st.selectbox("Show on the cards below only the questions of", options, key=KEY,
                             format_func=lambda o: o if o == NONE else f"{o} ({len(labels[o])} questions)")
                st.session_state["_xq_slice_ids"] = None if st.session_state[KEY] == NONE else labels[st.session_state[KEY]]


def slice_filter(ids: list[str]) -> list[str]:
    """``ids`` kept to the picked slice's questions (all of them when no slice is picked)."""
    keep = st.session_state.pop("_xq_slice_ids", None)  # set by this run's section only: no stale filter
    return ids if keep is None else [i for i in ids if i in set(keep)]
