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


def slices_section(rows: pd.DataFrame, dataset, langs: list[str], names: list[str]) -> None:
    """Draw the section (inside an expander); the picked slice's ids go to ``st.session_state``
    (read by :func:`slice_filter`)."""
    with st.expander("Scores by slice — where each model gains and loses (click a slice to see its questions below)"):
        c1, c2, c3 = st.columns(3)
        lang = c1.selectbox("Language", langs, index=len(langs) - 1, key="xq_slice_lang")
        a = c2.selectbox("Difference: A", names, key="xq_slice_a") if len(names) > 1 else None
        b = c3.selectbox("minus B", [n for n in names if n != a], key="xq_slice_b") if a else None
        world_dir = str(Path(dataset.folder).parent) if dataset.run else None
        files = tuple(dataset.files)
        with guard("Could not group the questions by slice"):
            slices, order, source = _slices(files, lang, world_dir,
                                            _stamp([f for _, f in files] + ([world_dir + "/world.json"] if world_dir else [])))
            ids = set(rows.loc[rows["language"] == lang, "id"])
            slices = {k: v for k, v in slices.items() if k in ids}
            table, diffs, groups = slice_frames(rows, lang, names, slices, order, (a, b) if a and b else None)
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
