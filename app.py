"""xlviz lab bench: ``streamlit run app.py`` (or ``xlviz app``).

The entrypoint draws the shared sidebar (models and languages, kept for the whole session) and
routes to one file per page under ``pages/``. Adding a page is one line in ``PAGES``.
"""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see xlviz/cli.py: training runs share the cores

import streamlit as st

from xlviz.ui.serve import limit_threads

limit_threads()  # once per process: one BLAS thread for the app's small matrices (xlviz/ui/serve.py)

from xlviz.ui import sidebar  # noqa: E402

HERE = Path(__file__).resolve().parent

PAGES = {
    "Bench": [
        st.Page(HERE / "pages/home.py", title="Home", icon=":material/home:", default=True),
        st.Page(HERE / "pages/runs.py", title="Runs", icon=":material/model_training:"),
        st.Page(HERE / "pages/sweeps.py", title="Sweeps", icon=":material/grid_view:"),
    ],
    "Compare": [
        st.Page(HERE / "pages/xquad.py", title="XQuAD", icon=":material/quiz:"),
        st.Page(HERE / "pages/attention.py", title="Attention", icon=":material/grid_on:"),
        st.Page(HERE / "pages/alignment.py", title="Alignment", icon=":material/join_inner:"),
        st.Page(HERE / "pages/probing.py", title="Probing", icon=":material/science:"),
    ],
}

st.set_page_config(page_title="xlviz", page_icon=":material/translate:", layout="wide")
sidebar.render()
page = st.navigation(PAGES)
page.run()
