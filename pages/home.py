"""Home: what the bench is for, and the most recent runs."""

import streamlit as st

from xlviz.views import runs as runs_view
from xlviz.ui.common import NA, guard
from xlviz.ui.sidebar import page_setup
from xlviz.ui.tables import compare_column_config

page_setup()

st.title("xlviz — cross-lingual transfer bench")
st.markdown(
    "This bench re-runs **MONOTRANS** (Artetxe et al., 2020) at a small scale: pre-train a "
    "masked language model on one language, learn only new word embeddings for a second "
    "language, fine-tune on English QA and test the other language zero-shot. "
    "**Runs** starts such transfer runs and shows them training, **XQuAD** compares models' "
    "answers to the same questions side by side across languages, and **Attention** shows how "
    "a model attends within and across the two sentences of a translation pair. "
    "Pick models and languages once in the sidebar; every page uses them."
)

st.subheader("Recent runs")
with guard("Could not read the runs folder"):
    # the Runs page's "All runs" rule: run folders of the checkpoints root (a sweep's cells are on
    # the Sweeps page), newest first
    runs = runs_view.all_runs()[:5]
    if not runs:
        # as the Runs page says it (a folder holding only sweeps names them), pointing to that page
        st.info(runs_view.no_runs_message().replace("start one above", "start one on the **Runs** page"), icon=":material/info:")
    else:
        table = runs_view.run_table(runs)
        st.caption("Best L2 F1: the best transfer system's, upper bounds (the dictionary oracle) left out. "
                   "A sweep's cells are listed on the Sweeps page.")
        first = ["run", "state", "best L2 F1, zero-shot", "best L2 F1, L2 labels", "systems"]
        st.dataframe(table, hide_index=True, width="stretch", column_order=first + [c for c in table.columns if c not in first],
                     column_config=compare_column_config(table) | {c: st.column_config.NumberColumn(f"{c} (%)", format="%.1f")
                                    for c in ("best L2 F1, zero-shot", "best L2 F1, L2 labels")}, placeholder=NA)
st.page_link("pages/runs.py", label="Start or watch runs", icon=":material/model_training:")
st.page_link("pages/xquad.py", label="Compare answers on XQuAD", icon=":material/quiz:")
st.page_link("pages/attention.py", label="Look at attention", icon=":material/grid_on:")
