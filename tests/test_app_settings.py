"""The app keeps numbers honest: missing cells read n/a, zero-shot and translate-train results
are never mixed, Probing's view lives in the URL, and a system has one colour on every
Alignment chart (issue 17's open points).

One checkpoints root: ``an-run`` (tiny MLMs for Alignment/Probing), ``tt-run`` (results with a
translate-train system, ``mono-l2-supervised``, and a zero-shot system that used parallel
pairs, with exported QA models) and ``second-run`` (records and results only).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.app_fixtures import L2, PARALLEL, PARALLEL_PAIRS, SUPERVISED, chart_colours, charts, make_run, null_cells_not_na

APP = str(Path(__file__).resolve().parents[1] / "app.py")
TIMEOUT = 180


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    from tests.analysis_fixtures import make_analysis_run

    root = tmp_path_factory.mktemp("settings") / "checkpoints"
    make_analysis_run(root, "an-run")
    make_run(root, "second-run", models=False, results_shift=5.0)
    make_run(root, "tt-run", translate_train=True)
    return root


def _app(root: Path, monkeypatch, models: list[str] | None = None, query: dict | None = None) -> AppTest:
    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(root))
    monkeypatch.delenv("XLVIZ_SHARED_DATA", raising=False)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    if models is not None:
        at.session_state["xlviz_models"] = models
    if query:
        at.query_params.update(query)
    at.run()
    assert not at.exception, at.exception
    return at


def _page(at: AppTest, name: str) -> AppTest:
    at.switch_page(f"pages/{name}.py").run()
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def _texts(elements) -> str:
    return "\n".join(str(e.value) for e in elements)


# --- zero-shot and translate-train apart ------------------------------------------------------------

def test_runs_page_never_mixes_zero_shot_and_translate_train(root, monkeypatch):
    at = _page(_app(root, monkeypatch), "runs")
    at.selectbox(key="runs_live_select").set_value("tt-run").run()
    # the finished run's panel: one F1 table per setting, with the parallel pairs each system used
    panels = [d.value for d in at.dataframe if "parallel pairs" in d.value.columns and "run" not in d.value.columns]
    assert len(panels) == 2
    zero, translate = panels
    assert SUPERVISED not in zero.index and {"monotrans", "floor", PARALLEL} <= set(zero.index)
    assert list(translate.index) == [SUPERVISED]
    assert zero.loc[PARALLEL, "parallel pairs"] == PARALLEL_PAIRS and zero.loc["monotrans", "parallel pairs"] == 0
    captions = _texts(at.caption)
    assert "**zero-shot**" in captions and "**translate-train (L2 labels)**" in captions
    # the runs table: best L2 F1 per setting (the supervised 80 is not the run's zero-shot best)
    table = next(d.value for d in at.dataframe if "state" in d.value.columns).set_index("run")
    assert table.loc["tt-run", "best L2 F1, zero-shot"] == pytest.approx(35.0)
    assert table.loc["tt-run", "best L2 F1, L2 labels"] == pytest.approx(80.0)
    # compare: a table per setting; no row of the zero-shot table is a translate-train system
    at.multiselect(key="runs_compare_pick").set_value(["tt-run", "second-run"]).run()
    tables = [d.value for d in at.dataframe if "EM sov" in d.value.columns]
    assert len(tables) == 2
    assert SUPERVISED not in set(tables[0]["system"]) and set(tables[1]["system"]) == {SUPERVISED}
    assert set(tables[0]["run"]) == {"tt-run", "second-run"}
    row = tables[0][(tables[0]["run"] == "tt-run") & (tables[0]["system"] == PARALLEL)].iloc[0]
    assert row["parallel pairs"] == PARALLEL_PAIRS and row["F1 sov"] == pytest.approx(35.0)
    seeds = next(d.value for d in at.dataframe if "F1 sd" in d.value.columns)
    assert set(seeds["setting"]) <= {"zero-shot", "translate-train (L2 labels)"}


def test_xquad_matrices_keep_translate_train_apart(root, monkeypatch):
    at = _page(_app(root, monkeypatch, models=["run:tt-run:export:monotrans", f"run:tt-run:export:{SUPERVISED}"]), "xquad")
    assert at.selectbox(key="xq_source").value == "run:tt-run"
    f1 = [d.value for d in at.dataframe if "avg" in d.value.columns]
    assert len(f1) == 4  # EM and F1 for each setting
    assert [list(m.index) for m in f1] == [["monotrans"], ["monotrans"], [SUPERVISED], [SUPERVISED]]
    text = _texts(at.markdown)
    assert "**zero-shot**" in text and "**translate-train (L2 labels)**" in text


def test_xquad_names_the_setting_of_a_single_zero_shot_table(root, monkeypatch):
    """A headline number says its setting: with only zero-shot models picked, the one table
    still reads "zero-shot"."""
    at = _page(_app(root, monkeypatch, models=["run:tt-run:export:monotrans"]), "xquad")
    f1 = [d.value for d in at.dataframe if "avg" in d.value.columns]
    assert len(f1) == 2 and [list(m.index) for m in f1] == [["monotrans"], ["monotrans"]]
    assert "**zero-shot** — " in _texts(at.markdown)


# --- n/a, never None ---------------------------------------------------------------------------------

def test_missing_numbers_read_na_in_every_table(root, monkeypatch):
    at = _page(_app(root, monkeypatch), "runs")
    at.multiselect(key="runs_compare_pick").set_value(["tt-run", "second-run"]).run()
    seen, problems = null_cells_not_na(at)
    assert seen > 0  # the floor has no English row, so no L2/L1 ratio either
    assert not problems, problems
    for page, models in (("xquad", ["run:tt-run:export:monotrans", f"run:tt-run:export:{SUPERVISED}"]), ("probing", None),
                         ("alignment", None)):
        at = _page(_app(root, monkeypatch, models=models), page)
        assert not null_cells_not_na(at)[1], (page, null_cells_not_na(at)[1])


# --- Probing in the URL -----------------------------------------------------------------------------

def test_probing_view_lives_in_the_url(root, monkeypatch):
    at = _app(root, monkeypatch, query={"run": "an-run", "pr_run": "an-run", "pr_l2s": json.dumps([L2]), "pr_floor": "false",
                                        "pr_probe": "Word in context", "pr_wic_n": "20", "pr_wic_folds": "2",
                                        "pr_wic_layer": "1", "pr_wic_filter": "wrong"})
    _page(at, "probing")  # a bookmarked or shared view opens as it was
    assert at.segmented_control(key="pr_probe").value == "Word in context"
    assert at.selectbox(key="pr_run").value == "an-run" and at.multiselect(key="pr_l2s").value == [L2]
    assert at.toggle(key="pr_floor").value is False
    assert at.number_input(key="pr_wic_n").value == 20 and at.number_input(key="pr_wic_folds").value == 2
    assert at.slider(key="pr_wic_layer").value == 1 and at.radio(key="pr_wic_filter").value == "wrong"
    assert not any("floor" in o for o in at.selectbox(key="pr_wic_drill").options)
    # the rows picked go into the URL and come back in a fresh session
    rows = list(at.multiselect(key="pr_show").options)
    at.multiselect(key="pr_show").set_value(rows[:1]).run()
    shared = json.loads(at.query_params["pr_show"][0] if isinstance(at.query_params["pr_show"], list) else at.query_params["pr_show"])
    assert shared == rows[:1]
    at3 = _app(root, monkeypatch, query={"pr_run": "an-run", "pr_l2s": json.dumps([L2]), "pr_floor": "false",
                                         "pr_probe": "Word in context", "pr_show": json.dumps(rows[:1])})
    _page(at3, "probing")
    assert at3.multiselect(key="pr_show").value == rows[:1]
    at.multiselect(key="pr_show").set_value(rows).run()
    # a change goes back into the URL
    at.slider(key="pr_wic_layer").set_value(0).run()
    at.segmented_control(key="pr_probe").set_value("Agreement").run()
    at.number_input(key="pr_agr_max").set_value(3).run()
    assert at.query_params["pr_probe"] in ("Agreement", ["Agreement"])
    assert at.query_params["pr_agr_max"] in ("3", ["3"])
    assert at.query_params["pr_floor"] in ("false", ["false"])
    # a value the page cannot show (an old link) falls back instead of failing
    at2 = _app(root, monkeypatch, query={"pr_probe": "nonsense", "pr_agr_max": "-4", "pr_agr_unit": "bytes"})
    _page(at2, "probing")
    assert at2.segmented_control(key="pr_probe").value == "Agreement" and at2.number_input(key="pr_agr_max").value == 100


# --- Alignment: one colour per system --------------------------------------------------------------

def test_alignment_charts_use_the_app_wide_system_colours(root, monkeypatch):
    from xlviz.views.colours import system_colours

    at = _app(root, monkeypatch, query={"run": "an-run", "l2": L2})
    _page(at, "alignment")
    at.number_input(key="al_limit_world").set_value(8).run()
    app_wide = system_colours(root)
    seen: dict[str, set[str]] = {}
    drawn: dict[str, dict] = {}
    for tab in ("Retrieval", "CKA", "Word translation", "Post-hoc map"):  # only the open tab is drawn
        at.session_state["al_tab"] = tab
        at.run()
        drawn |= {k: v for k, v in charts(at).items() if k in ("al_fig_retrieval", "al_fig_cka", "al_fig_words", "al_fig_posthoc")}
    assert set(drawn) == {"al_fig_retrieval", "al_fig_cka", "al_fig_words", "al_fig_posthoc"}
    for chart in drawn.values():
        for series, colour in chart_colours(chart).items():
            seen.setdefault(series.split(",")[0].strip(), set()).add(colour)
    assert set(seen) == {"an-run · transferred", "an-run · floor"}
    assert all(len(c) == 1 for c in seen.values()), seen  # one colour per system on every chart
    assert seen["an-run · floor"] == {app_wide["floor"]}  # the Runs page's floor colour
    assert seen["an-run · transferred"] != seen["an-run · floor"]


def test_compare_table_rows_by_setting_and_own_l1_ratio(tmp_path):
    """Logic under the Runs page: a translate-train row never shares a row with zero-shot
    numbers, rows written before ``l2_labels`` existed are zero-shot, and a pair model's L2/L1
    ratio divides by its own L1 F1 (``l1_f1``)."""
    from xlviz.runs import Run
    from xlviz.views.runs import TRANSLATE_TRAIN, ZERO_SHOT, compare_table, results_frame

    run = Run(tmp_path / "r")
    run.write_config({"name": "r", "languages": ["sov"]})
    run.write_results([
        {"system": "monotrans", "language": "en", "exact_match": 40.0, "f1": 50.0},  # an old row: no l2_labels
        {"system": "monotrans", "language": "sov", "exact_match": 20.0, "f1": 25.0},
        {"system": "pair", "language": "en", "exact_match": 30.0, "f1": 40.0, "l2_labels": False, "parallel_pairs": 7},
        {"system": "pair", "language": "sov", "exact_match": 10.0, "f1": 20.0, "l1_f1": 80.0, "l2_labels": False,
         "parallel_pairs": 7},
        {"system": "sup", "language": "sov", "exact_match": 60.0, "f1": 70.0, "l2_labels": True, "parallel_pairs": 0},
    ])
    long = results_frame([run])
    assert dict(zip(long["system"], long["setting"])) == {"monotrans": ZERO_SHOT, "pair": ZERO_SHOT, "sup": TRANSLATE_TRAIN}
    table = compare_table(long).set_index("system")
    assert list(table["setting"]) == [ZERO_SHOT, ZERO_SHOT, TRANSLATE_TRAIN]  # zero-shot first
    assert table.loc["pair", "parallel pairs"] == 7
    assert table.loc["monotrans", "F1 sov/L1"] == pytest.approx(0.50)
    assert table.loc["pair", "F1 sov/L1"] == pytest.approx(0.25)  # 20 / its own 80, not / 40
    assert table.loc["sup", "F1 sov"] == pytest.approx(70.0)
