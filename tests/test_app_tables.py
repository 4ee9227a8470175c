"""The app's tables read as tables: every number column has a fixed precision and run names are
whole (AppTests on the tiny runs of tests/app_fixtures.py; nothing trains or downloads).

st.dataframe draws on a canvas, so what a cell shows is checked in the column config the page
sends (the Arrow proto's ``columns`` JSON), which is what the grid formats with.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[1] / "app.py")
TIMEOUT = 180
LONG = "a-rather-long-run-name-20261124-123805"


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    from tests.app_fixtures import make_run

    root = tmp_path_factory.mktemp("tables") / "checkpoints"
    make_run(root, LONG, results_shift=5.0)
    time.sleep(1.1)  # folder mtimes order the runs: demo-run is every page's default
    make_run(root, "demo-run")
    return root


def _config(frame_element) -> dict:
    return json.loads(frame_element.proto.columns) if frame_element.proto.columns else {}


def _unformatted(at: AppTest) -> list[str]:
    """'key: column' for every float column of every table that has no fixed format."""
    out = []
    for d in at.dataframe:
        if d.proto.arrow_data.HasField("styler"):  # a pandas Styler formats its own cells
            continue
        cfg = _config(d)
        for col in d.value.columns:
            if pd.api.types.is_float_dtype(d.value[col]) and not cfg.get(str(col), {}).get("type_config", {}).get("format"):
                out.append(f"{d.proto.id or '?'}: {col}")
    return out


def test_number_config_gives_every_float_column_a_format_and_keeps_given_ones():
    import streamlit as st

    from xlviz.ui.tables import ALIGNMENT_RULES, SCORE_RULES, number_config

    frame = pd.DataFrame({"model": ["a"], "n": [3], "F1": [66.66666], "p (McNemar, EM)": [0.012345], "id": ["x"]})
    cfg = number_config(frame, SCORE_RULES, config={"id": st.column_config.TextColumn(width="small")})
    assert set(cfg) == {"F1", "p (McNemar, EM)", "id"}, "only float columns get a number format; ints and text stay"
    assert cfg["F1"]["type_config"]["format"] == "%.1f" and cfg["p (McNemar, EM)"]["type_config"]["format"] == "%.3f"
    assert cfg["id"]["width"] == "small"
    al = number_config(pd.DataFrame({"retrieval_a_to_b": [0.018], "cka": [0.9431645], "word_translation_b_to_a": [0.06]}),
                       ALIGNMENT_RULES)
    assert {c: v["type_config"]["format"] for c, v in al.items()} == {
        "retrieval_a_to_b": "percent", "cka": "%.3f", "word_translation_b_to_a": "percent"}
    assert frame.loc[0, "F1"] == 66.66666, "the frame (and a CSV made from it) keeps full precision"


OPEN_PANELS = {"runs": ("runs_notes_open_demo-run",), "xquad": ("xq_uncertainty", "xq_per_question", "xq_slices")}


def test_every_table_on_every_page_has_a_fixed_precision(root, monkeypatch):
    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(root))
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params["runs_compare_pick"] = json.dumps(["demo-run", LONG])
    at.session_state["xlviz_models"] = ["run:demo-run:export:monotrans", f"run:{LONG}:export:monotrans"]
    at.run()
    seen: dict[str, int] = {}
    for page in ("home", "runs", "xquad", "alignment", "probing"):
        for panel in OPEN_PANELS.get(page, ()):  # the lazy panels, drawn only while open: their tables too
            at.session_state[panel] = True
        at.switch_page(f"pages/{page}.py").run()
        assert not at.exception, [e.message for e in at.exception]
        if page == "alignment":  # its table is in a tab, drawn when open
            at.session_state["al_tab"] = "Table"
            at.run()
        if page == "xquad":  # two models: the paired tests' table too
            assert any("p EM Holm" in d.value.columns for d in at.dataframe), [list(d.value.columns) for d in at.dataframe]
        seen[page] = len(at.dataframe)
        assert not _unformatted(at), (page, _unformatted(at))
    assert all(seen[p] for p in ("home", "runs", "xquad", "alignment", "probing")), seen


def test_compare_table_shows_run_names_whole(root, monkeypatch):
    from xlviz.runs import Run
    from xlviz.ui.tables import compare_column_config
    from xlviz.views import runs as runs_view

    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(root))
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params["runs_compare_pick"] = json.dumps(["demo-run", LONG])
    at.run()
    at.switch_page("pages/runs.py").run()
    assert not at.exception, [e.message for e in at.exception]
    compared = [d for d in at.dataframe if {"run", "system"} <= set(d.value.columns) and "F1 sov" in d.value.columns]
    assert compared
    need = 8 * len(LONG)  # the grid's font: about 7 px a character, plus the cell's padding
    for d in compared:
        run = _config(d).get("run", {})
        assert isinstance(run.get("width"), int) and run["width"] > need and run.get("pinned"), run
        assert LONG in set(d.value["run"]), "the name itself is not shortened either"
    table = runs_view.compare_table(runs_view.results_frame([Run(root / LONG)]))
    assert compare_column_config(table)["run"]["width"] == runs_view.name_width([LONG]) > need
