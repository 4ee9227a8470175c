"""A model and its data belong together; only live results are drawn.

Unit tests: the one readability check (single-character pieces, [UNK], vocabulary overlap) on
hand-computed tokenizer outputs, the chance test of a retrieval accuracy, the one live-rows
filter, the default data run of a page, and each chart / export that reads the verdict.

AppTest: two runs like a demo run and a later sweep cell: ``demo`` (world seed 0, its models)
and ``cell`` (newer, world seed 1: another invented vocabulary). With ``demo``'s models picked,
Attention, Alignment and XQuAD open on ``demo``'s data (never the newer other run); given
``cell``'s text, each says in one line that the models' tokenizers cannot read it.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from tests.analysis_fixtures import L2, make_analysis_run
from tests.app_fixtures import open_panel
from tests.tiny_models import make_tokenizer
from xlviz.analysis.readability import at_chance, chance_p_value, judge, readability, shares
from xlviz.runs import Run
from xlviz.training.verdicts import DEGENERATE, dead, live

APP = str(Path(__file__).resolve().parents[1] / "app.py")
TIMEOUT = 180


# --- readability: hand-computed shares ------------------------------------------------------------

def test_readability_of_own_words_spelled_words_and_unknown_script():
    tok = make_tokenizer("bert", ["cat", "dog", "sat"])
    # own words: 2 word pieces, none single; 2 of 2 words in the vocabulary
    assert shares(tok, ["cat dog"]) == (0.0, 0.0, 1.0, 2)
    # "cat xyz": cat, x, ##y, ##z -> 3 of 4 word pieces are one character; 1 of 2 words held
    single, unk, overlap, pieces = shares(tok, ["cat xyz"])
    assert (single, unk, overlap, pieces) == (0.75, 0.0, 0.5, 4)
    r = readability(tok, ["cat xyz"], who="the test tokenizer")
    assert not r.ok and "letter by letter" in r.line and "75% single-character pieces" in r.line
    # another script: the word pieces cannot be built -> [UNK] (1 of 2 pieces)
    single, unk, overlap, pieces = shares(tok, ["cat пени"])
    assert (unk, overlap, pieces) == (0.5, 0.5, 2)
    r = readability(tok, ["cat пени"])
    assert not r.ok and "[UNK]" in r.line and "not meaningful" in r.line
    assert readability(tok, ["cat sat.", "dog"]).ok


def test_readability_thresholds_are_the_documented_ones():
    assert judge(0.30, 0.0, 1.0, 10).ok and not judge(0.31, 0.0, 1.0, 10).ok
    assert judge(0.0, 0.05, 1.0, 10).ok and not judge(0.0, 0.06, 1.0, 10).ok
    assert judge(0.0, 0.0, 0.20, 10).ok and not judge(0.0, 0.0, 0.19, 10).ok
    assert judge(0.9, 0.9, 0.0, 0).ok  # no text: nothing to judge


def test_retrieval_at_chance_is_a_binomial_test_against_one_in_n():
    # P(X >= 1) with X ~ Binomial(2, 1/2) = 3/4; P(X >= 0) = 1
    assert chance_p_value(1, 2) == pytest.approx(0.75)
    assert chance_p_value(0, 7) == pytest.approx(1.0)
    # 500 pairs: chance 0.2%; 1 hit (0.2%) is chance, 10 hits (2%) are not
    assert at_chance(1 / 500, 500) and not at_chance(10 / 500, 500)
    # P(X >= 3) for Binomial(500, 1/500) = 0.0801 > 0.05; P(X >= 4) = 0.019
    assert at_chance(3 / 500, 500) and not at_chance(4 / 500, 500)


# --- the one live-rows filter -----------------------------------------------------------------------

ROWS = [{"run": "r", "system": "monotrans", "language": "en", "exact_match": 40.0, "f1": 50.0, "verdict": None},
        {"run": "r", "system": "monotrans", "language": "sov", "exact_match": 4.2, "f1": 6.0, "verdict": DEGENERATE},
        {"run": "r", "system": "floor", "language": "sov", "exact_match": 5.0, "f1": 9.0, "verdict": "ok"}]


def test_live_and_dead_on_rows_and_frames():
    assert [r["language"] for r in live(ROWS)] == ["en", "sov"] and [r["f1"] for r in dead(ROWS)] == [6.0]
    df = pd.DataFrame(ROWS)
    assert list(live(df)["f1"]) == [50.0, 9.0] and list(dead(df)["f1"]) == [6.0]
    no_verdict = df.drop(columns="verdict")
    assert len(live(no_verdict)) == 3 and dead(no_verdict).empty


def _long() -> pd.DataFrame:
    from xlviz.views.runs import ZERO_SHOT

    return pd.DataFrame([{**r, "setting": ZERO_SHOT, "parallel_pairs": 0, "l1": "en", "l1_f1": None} for r in ROWS])


def test_compare_chart_draws_no_degenerate_bar_and_its_csv_keeps_the_verdict():
    from xlviz.views.export import figure_frame
    from xlviz.views.runs import compare_figure

    fig = compare_figure(_long())
    drawn = [(t.name, x, y) for t in fig.data for x, y in zip(t.x, t.y)]
    assert len(drawn) == 4 and 6.0 not in [y for *_, y in drawn] and 4.2 not in [y for *_, y in drawn]
    frame = figure_frame(fig)
    assert "verdict" in frame.columns
    gone = frame[frame["verdict"] == DEGENERATE]
    assert sorted(gone["metric"]) == ["EM", "F1"] and set(gone["x"]) == {"sov"} and gone["y"].isna().all()
    assert (frame.loc[frame["verdict"] != DEGENERATE, "verdict"] == "ok").all() and len(frame) == 6


def test_compare_table_and_the_html_report_keep_a_verdict_column(tmp_path):
    from xlviz.views.export import run_report_html
    from xlviz.views.runs import compare_table

    table = compare_table(_long())
    assert dict(zip(table["system"], table["verdict"])) == {"monotrans": f"{DEGENERATE}: sov", "floor": "ok"}
    assert table.loc[table["system"] == "monotrans", "F1 sov"].item() == DEGENERATE
    run = Run(tmp_path / "r")
    run.write_config({"name": "r", "languages": ["sov"]})
    run.write_results([{k: v for k, v in r.items() if k != "run"} for r in ROWS])
    html = run_report_html(run)
    assert "<th>verdict</th>" in html and f"{DEGENERATE}: sov" in html
    live_run = Run(tmp_path / "l")
    live_run.write_config({"name": "l", "languages": ["sov"]})
    live_run.write_results([{"system": "monotrans", "language": "en", "exact_match": 40.0, "f1": 50.0},
                            {"system": "monotrans", "language": "sov", "exact_match": 20.0, "f1": 47.0},
                            {"system": "floor", "language": "sov", "exact_match": 5.0, "f1": 9.0}])
    table = run_report_html(live_run).split("<h2>Results (%)</h2>", 1)[1].split("</table>", 1)[0]
    assert "<td>0.94</td>" in table and "<th>F1 sov/L1</th>" in table  # a ratio, as the app writes it (47 / 50)
    assert "None" not in table and "<td>n/a</td>" in table  # the floor has no English row


def test_seed_summary_means_leave_degenerate_rows_out():
    from xlviz.views.runs import seed_summary

    long = pd.concat([_long(), _long().assign(run="r2", f1=lambda d: d["f1"] + 2)])
    out = seed_summary(long, [["r", "r2"]])
    assert ("monotrans", "sov") not in set(zip(out["system"], out["language"]))
    assert out.loc[(out["system"] == "floor"), "F1 mean"].item() == pytest.approx(10.0)


# --- default data run ------------------------------------------------------------------------------

def test_default_data_run_is_the_picked_models_own_run():
    from xlviz.views.choices import ModelChoice, default_data_run, trained_with

    demo, typed = ModelChoice("a", "a", run="demo"), ModelChoice("t", "t")
    assert trained_with([typed, demo, demo]) == ["demo"]
    assert default_data_run(["cell", "demo"], [typed, demo]) == "demo"  # never the newest other run
    assert default_data_run(["cell", "demo"], [typed]) == "cell"  # no run behind the models: the newest
    assert default_data_run(["cell"], [demo]) == "cell"  # the models' run has no such data
    assert default_data_run([], [demo]) is None


# --- AppTest: the three reproductions ---------------------------------------------------------------

@pytest.fixture(scope="module")
def two_worlds(tmp_path_factory) -> Path:
    """``demo`` (world seed 0, exported QA models) and, newer, ``cell`` (world seed 1)."""
    import tests.app_fixtures as af

    root = tmp_path_factory.mktemp("belong") / "checkpoints"
    make_analysis_run(root, "demo", exports=True)
    world = af._world
    with pytest.MonkeyPatch.context() as mp:  # the same fixture on another seed's world: another vocabulary
        mp.setattr(af, "_world", lambda seed=0: world(seed + 1))
        make_analysis_run(root, "cell", exports=True)
    later = time.time() + 60
    for p in (root / "cell").rglob("*"):
        os.utime(p, (later, later))
    os.utime(root / "cell", (later, later))
    return root


def _app(root, monkeypatch, models: list[str], query: dict | None = None) -> AppTest:
    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(root))
    monkeypatch.delenv("XLVIZ_SHARED_DATA", raising=False)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.session_state["xlviz_models"] = models
    at.run()
    assert not at.exception, at.exception
    return at


def _page(at: AppTest, name: str, query: dict | None = None) -> AppTest:
    if query:
        at.query_params.update(query)
    at.switch_page(f"pages/{name}.py").run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def _unreadable(at) -> list[str]:
    return [str(w.value).replace("\\", "") for w in at.warning if "Not readable" in str(w.value)]


def test_runs_are_ordered_as_the_reproduction_needs(two_worlds, monkeypatch):
    from xlviz.runs import list_runs

    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(two_worlds))
    assert [r.name for r in list_runs()][:2] == ["cell", "demo"]  # the other run is the newest


def test_attention_opens_on_the_models_run_and_flags_another_runs_sentence(two_worlds, monkeypatch):
    at = _page(_app(two_worlds, monkeypatch, ["run:demo:export:monotrans"]), "attention")
    assert at.session_state["att_run"] == "demo"
    assert not _unreadable(at) and any("Readable by monotrans's tokenizer" in str(c.value) for c in at.caption)
    at.selectbox(key="att_run").set_value("cell").run()  # the sweep cell's sov sentence, the demo's model
    assert not at.exception
    bad = _unreadable(at)
    assert bad and any(w.startswith(f"B ({L2}): Not readable by monotrans's tokenizer") for w in bad)


def test_alignment_opens_on_the_models_run_and_flags_another_runs_pairs(two_worlds, monkeypatch):
    models = ["run:demo:s1_pretrain", f"run:demo:s2_transfer-{L2}"]
    at = _page(_app(two_worlds, monkeypatch, models), "alignment")
    assert at.session_state["al_run"] == "demo" and not _unreadable(at)
    # the link from the sweep cell, with the demo's models picked in the sidebar (the fresh-session default)
    at = _page(_app(two_worlds, monkeypatch, models), "alignment", {"run": "cell", "l2": L2})
    assert at.session_state["al_run"] == "cell"
    at.multiselect(key="al_systems").set_value(["sidebar-run:demo"]).run()
    assert not at.exception
    bad = _unreadable(at)
    assert bad and f"the {L2} tokenizer of demo" in bad[0]
    # the chance label follows the binomial test on the numbers shown (the Table tab: its rows)
    at.session_state["al_tab"] = "Table"
    at.run()
    table = next(d.value for d in at.dataframe if "retrieval_a_to_b" in d.value.columns)
    best = max(table[["retrieval_a_to_b", "retrieval_b_to_a"]].max())
    labelled = [str(w.value) for w in at.warning if "retrieval at chance" in str(w.value)]
    assert bool(labelled) == at_chance(best, 12) and len(labelled) <= 1


def test_xquad_opens_on_the_models_run_and_flags_another_runs_questions(two_worlds, monkeypatch):
    at = _page(_app(two_worlds, monkeypatch, ["run:demo:export:monotrans"]), "xquad")
    assert at.session_state["xq_source"] == "run:demo" and not _unreadable(at)
    at.selectbox(key="xq_source").set_value("run:cell").run()
    assert not at.exception
    bad = _unreadable(at)
    line = next(w for w in bad if w.startswith(f"{L2} questions: Not readable by monotrans's tokenizer"))
    assert "from run demo, the questions from run cell" in line
    meaningless = [str(w.value).replace("\\", "") for w in at.warning if "Not meaningful:" in str(w.value)]
    assert len(meaningless) == 1 and f"monotrans · {L2}" in meaningless[0]


def test_xquad_all_degenerate_export_has_no_average_interval_or_test(two_worlds, monkeypatch, tmp_path):
    import shutil

    root = tmp_path / "checkpoints"
    shutil.copytree(two_worlds / "demo", root / "demo")
    run = Run(root / "demo")
    run.write_results([{**r, "verdict": DEGENERATE, "degenerate_stages": ["s1_pretrain"]} for r in run.results()])
    at = _page(_app(root, monkeypatch, ["run:demo:export:monotrans"]), "xquad")
    at = open_panel(at, "xq_uncertainty")  # the Uncertainty panel, drawn only while open
    em = next(d.value for d in at.dataframe if "avg" in d.value.columns)
    assert list(em.loc["monotrans", ["en", L2, "avg"]]) == [DEGENERATE] * 3
    assert any("Every picked row is degenerate" in str(i.value) for i in at.info)
    assert not any("EM low" in d.value.columns and len(d.value) for d in at.dataframe)


def test_runs_compare_chart_leaves_degenerate_rows_out(two_worlds, monkeypatch, tmp_path):
    import shutil

    root = tmp_path / "checkpoints"
    for name in ("demo", "cell"):
        shutil.copytree(two_worlds / name, root / name)
    run = Run(root / "cell")
    run.write_results([{**r, "verdict": DEGENERATE} if r["system"] == "monotrans" else r for r in run.results()])
    at = _page(_app(root, monkeypatch, []), "runs")
    at.multiselect(key="runs_compare_pick").set_value(["demo", "cell"]).run()
    assert not at.exception
    assert any("Not drawn: 2 degenerate rows" in str(c.value) for c in at.caption)
    chart = next(e for e in at.get("plotly_chart") if "runs_compare_fig" in str(e.proto.id))
    spec = json.loads(chart.proto.spec)
    bars = {(t["name"], x) for t in spec["data"] for x in t["x"]}
    assert ("monotrans, cell", "en") not in bars and ("monotrans, demo", "en") in bars


# --- the minor items ----------------------------------------------------------------------------------

def test_p_values_below_half_a_thousandth_read_less_than_0_001():
    from xlviz.ui.tables import p_text, with_p_text

    assert [p_text(p) for p in (0.0, 0.0004, 0.0006, 0.25, None, float("nan"))] == ["< 0.001", "< 0.001", "0.001", "0.250",
                                                                                   None, None]
    frame = pd.DataFrame({"F1 A − B": [1.0, 2.0], "p (paired permutation)": [0.0, 0.03], "p (McNemar, EM)": [0.5, 0.0001]})
    shown = with_p_text(frame)
    assert list(shown["p (paired permutation)"]) == ["< 0.001", "0.030"] and list(shown["p (McNemar, EM)"]) == ["0.500", "< 0.001"]
    assert list(shown["F1 A − B"]) == [1.0, 2.0] and frame["p (paired permutation)"].iloc[0] == 0.0  # the data keep numbers


def test_elapsed_time_stops_when_a_run_is_cancelled_before_its_status(tmp_path):
    import datetime as dt

    from xlviz import jobs
    from xlviz.io import atomic_write_json
    from xlviz.views.runs import run_progress

    folder = tmp_path / "r"
    atomic_write_json(folder / jobs.JOB_FILE, {"started": "2026-01-01T10:00:00+00:00", "cancelled": "2026-01-01T10:02:30+00:00"})
    later = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.timezone.utc)
    assert run_progress(Run(folder), "cancelled", now=later).elapsed_s == 150.0
    run = Run(tmp_path / "s")
    run.write_config({"name": "s"})
    run.update_status(state="cancelled", started="2026-01-01T10:00:00+00:00", ended="2026-01-01T10:01:00+00:00")
    assert run_progress(run, "cancelled", now=later).elapsed_s == 60.0
    assert run_progress(run, "running", now=later).elapsed_s == 7200.0  # a live run's clock runs


def test_compare_table_puts_f1_first_with_its_interval_and_ratios_as_ratios():
    from xlviz.views.runs import compare_column_order, compare_table

    long = _long().assign(f1_ci_low=1.0, f1_ci_high=99.0, exact_match_ci_low=1.0, exact_match_ci_high=99.0)
    table = compare_table(long)
    order = compare_column_order(table.drop(columns="setting"))
    assert order == ["run", "system", "F1 en [95% CI]", "F1 sov [95% CI]", "EM en [95% CI]", "EM sov [95% CI]", "F1 sov/L1",
                     "parallel pairs", "verdict"]
    row = table.set_index("system")
    assert row.loc["monotrans", "F1 sov [95% CI]"] == DEGENERATE and pd.isna(row.loc["floor", "F1 sov/L1"])
    assert compare_column_order(compare_table(_long()))[2:4] == ["F1 en", "F1 sov"]  # no intervals: the scores


def test_home_lists_runs_as_the_runs_page_does(tmp_path, monkeypatch):
    from tests.app_fixtures import make_run
    from tests.sweep_fixtures import make_sweep

    root = tmp_path / "checkpoints"
    make_sweep(root)
    make_run(root, "plain-run", models=False)
    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(root))
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.run()
    home = next(d.value for d in at.dataframe if "run" in d.value.columns)
    at.switch_page("pages/runs.py").run()
    runs = next(d.value for d in at.dataframe if "run" in d.value.columns and "state" in d.value.columns)
    assert list(home["run"]) == list(runs["run"])[:5] == ["plain-run"]  # the sweep's cells: on the Sweeps page


def test_all_degenerate_sweep_draws_nothing_and_says_so(tmp_path, monkeypatch):
    from tests.sweep_fixtures import make_sweep
    from xlviz.runs import sweep_cells

    root = tmp_path / "checkpoints"
    folder = make_sweep(root)
    for cell in sweep_cells(folder):
        run = Run(cell)
        run.write_results([{**r, "verdict": DEGENERATE, "degenerate_stages": ["s1_pretrain"]} for r in run.results()])
    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(root))
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.run()
    at.switch_page("pages/sweeps.py").run()
    assert not at.exception, [e.message for e in at.exception]
    infos = [str(i.value).replace("\\", "") for i in at.info]
    assert "Every row of this sweep is degenerate: nothing to chart or pair." in infos
    assert any(v.startswith("Every row of monotrans and floor is degenerate") for v in infos), infos
    assert not any("share no cell" in v for v in infos) and not at.get("plotly_chart")


def test_smoothing_from_a_url_logs_no_session_state_warning(two_worlds, monkeypatch):
    from streamlit.elements.lib import policies

    logged = []
    monkeypatch.setattr(policies, "_shown_default_value_warning", False)  # Streamlit warns once per process
    monkeypatch.setattr(policies._LOGGER, "warning", lambda msg, *a, **k: logged.append(msg % a))
    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(two_worlds))
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"runs_compare_pick": '["demo", "cell"]', "runs_smoothing": "0.5"})
    at.run()
    at.switch_page("pages/runs.py").run()
    assert not at.exception
    assert at.slider(key="runs_smoothing").value == 0.5
    assert not [m for m in logged if "Session State API" in m], logged


def test_streamlit_deploy_button_is_hidden():
    import tomllib

    cfg = tomllib.loads((Path(APP).parent / ".streamlit" / "config.toml").read_text())
    assert cfg["client"]["toolbarMode"] == "minimal"


def test_a_legend_of_eight_systems_gets_rows_of_its_own_below_the_axis_title():
    from xlviz.views.figures import AXIS_PX, LEGEND_ROW_PX, layer_lines, legend_rows

    assert legend_rows(["a"]) == 1 and legend_rows(["x" * 30] * 4, width=560) == 2  # 258 px each: two a row
    names = [f"sweep/00{i}-languages-sov_seed-{i} · transferred" for i in range(8)]
    rows = [{"system": n, "layer": l, "retrieval": 0.5} for n in names for l in range(3)]
    one = layer_lines(rows[:3], "retrieval", "t")
    eight = layer_lines(rows, "retrieval", "t")
    n = legend_rows([t.name for t in eight.data])
    assert n == 8 and eight.layout.margin.b == AXIS_PX + LEGEND_ROW_PX * n + 8
    assert eight.layout.height - one.layout.height == LEGEND_ROW_PX * (n - 1)  # the plot keeps its height
