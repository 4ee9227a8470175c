"""The Sweeps page under AppTest on a fake finished sweep (tests/sweep_fixtures.py): the sweep
and its cells listed, the table over seeds (EM beside F1), the ratio figure with interval
bands, a paired difference, each cell opening in the other pages as a run; the form starts
``xlviz sweep`` through xlviz.jobs (replaced by a recorder here) and a bad grid row is one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from xlviz.runs import list_runs

from tests.app_fixtures import open_panel

APP = str(Path(__file__).resolve().parents[1] / "app.py")
TIMEOUT = 120


@pytest.fixture(scope="module")
def sweep_root(tmp_path_factory) -> Path:
    from tests.app_fixtures import make_run
    from tests.sweep_fixtures import make_sweep

    root = tmp_path_factory.mktemp("sweeps") / "checkpoints"
    make_sweep(root)
    make_run(root, "plain-run", models=False)
    return root


def _sweeps(root: Path, monkeypatch, query: dict | None = None) -> AppTest:
    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(root))
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    for k, v in (query or {}).items():
        at.query_params[k] = v
    at.run()
    at.switch_page("pages/sweeps.py").run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def _tables(at: AppTest) -> dict:
    """The page's tables by what they show (AppTest gives dataframes no key)."""
    out = {}
    for d in at.dataframe:
        cols = list(d.value.columns)
        name = ("sw_table" if "grid" in cols else "sw_cells" if "cell" in cols else "sw_results" if "EM L2/L1" in cols
                else "sw_paired" if "95% t interval" in cols else None)
        out[name] = d.value
    return out


def test_cells_are_runs_for_every_page(sweep_root):
    names = {r.name for r in list_runs(sweep_root)}
    assert names == {"plain-run", "tiny-sweep/000-languages-sov_seed-0", "tiny-sweep/001-languages-sov_seed-1",
                     "tiny-sweep/002-languages-tr_seed-0", "tiny-sweep/003-languages-tr_seed-1"}
    from xlviz.analysis.reports import run_info
    from xlviz.views.choices import discover_models

    assert run_info(sweep_root / "tiny-sweep" / "000-languages-sov_seed-0").name == "tiny-sweep/000-languages-sov_seed-0"
    keys = {m.key for m in discover_models(sweep_root)}
    assert "run:tiny-sweep/000-languages-sov_seed-0:export:monotrans" in keys


def test_page_lists_the_sweep_table_figure_and_cell_links(sweep_root, monkeypatch):
    at = _sweeps(sweep_root, monkeypatch)
    tables = _tables(at)
    sweeps = tables["sw_table"]
    assert list(sweeps["sweep"]) == ["tiny-sweep"] and list(sweeps["state"]) == ["completed"]
    assert list(sweeps["completed"]) == [4]
    cells = tables["sw_cells"]
    assert list(cells["state"]) == ["completed"] * 4 and "languages=tr, seed=1" in list(cells["setting"])
    res = tables["sw_results"]
    row = res[(res["system"] == "monotrans") & (res["language"] == "tr")].iloc[0]
    # mean over the two seeds of 50*0.4 (seed 0) and 51*0.4+1 (seed 1), with its interval
    assert row["F1"].startswith("20.7 [") and row["EM"].startswith("10.4 [") and row["seeds"] == 2 and row["distance"] == 5
    assert row["F1 L2/L1"].startswith("0.41 [")
    fig = next(c for c in at.get("plotly_chart") if c.key == "sw_ratio_fig")
    spec = json.loads(fig.proto.spec)
    traces = spec["data"]
    assert {t["name"] for t in traces if t.get("showlegend") is not False and t.get("name")} == {"monotrans", "floor"}
    assert sum(1 for t in traces if t.get("fill") == "toself") == 4  # a band per system, F1 and EM
    paired = tables["sw_paired"]
    assert list(paired["language"]) == ["sov", "tr"] and list(paired["monotrans − floor"]) == ["+0.40", "+0.20"]
    buttons = {b.key for b in at.button}
    assert {"sw_xq_000-languages-sov_seed-0", "sw_att_000-languages-sov_seed-0"} <= buttons


def test_a_cell_link_opens_it_as_a_run(sweep_root, monkeypatch):
    at = _sweeps(sweep_root, monkeypatch)
    links = [l for l in at.get("page_link")]
    targets = [(l.proto.page, l.proto.query_string) for l in links]
    assert any("alignment" in p and "run=tiny-sweep%2F000-languages-sov_seed-0" in q and "l2=sov" in q for p, q in targets), targets
    # the link as the Alignment page reads it: the cell is its run
    at2 = _page_with_query(sweep_root, monkeypatch, "alignment", {"run": "tiny-sweep/000-languages-sov_seed-0", "l2": "sov"})
    assert at2.session_state["al_run"] == "tiny-sweep/000-languages-sov_seed-0"
    # XQuAD: the cell's exported systems in the sidebar and its questions
    at.button(key="sw_xq_000-languages-sov_seed-0").click().run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.session_state["xlviz_models"] == ["run:tiny-sweep/000-languages-sov_seed-0:export:monotrans"]
    assert at.session_state["xq_source"] == "run:tiny-sweep/000-languages-sov_seed-0"
    assert at.title[0].value.startswith("XQuAD")


def _page_with_query(root: Path, monkeypatch, page: str, query: dict) -> AppTest:
    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(root))
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.run()
    for k, v in query.items():
        at.query_params[k] = v
    at.switch_page(f"pages/{page}.py").run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def test_chosen_sweep_and_systems_round_trip_through_the_url(sweep_root, monkeypatch):
    at = _sweeps(sweep_root, monkeypatch)
    at.multiselect(key="sw_systems").set_value(["monotrans"]).run()
    assert at.query_params["sw_systems"] == [json.dumps(["monotrans"])] or at.query_params["sw_systems"] == json.dumps(["monotrans"])
    assert "tiny-sweep" in str(at.query_params["sw_sweep"])
    again = _sweeps(sweep_root, monkeypatch, {"sw_systems": json.dumps(["monotrans"]), "sw_sweep": "tiny-sweep"})
    assert set(_tables(again)["sw_results"]["system"]) == {"monotrans"}


def test_the_form_starts_xlviz_sweep(sweep_root, monkeypatch):
    from xlviz import jobs

    started = []
    monkeypatch.setattr(jobs, "start_job", lambda argv, run_dir, **kw: started.append((list(argv), Path(run_dir))) or 4242)
    at = open_panel(_sweeps(sweep_root, monkeypatch), "sw_start")
    at.text_area[0].set_value("world.languages=svo,tr\nseed=0,1")
    next(t for t in at.text_input if t.label.startswith("Sweep name")).set_value("my-sweep")
    next(b for b in at.button if "Start sweep" in b.label).click().run()
    assert not at.exception, [e.message for e in at.exception]
    assert len(started) == 1, [e.value for e in at.error]
    argv, run_dir = started[0]
    folder = sweep_root.resolve() / "my-sweep"
    assert run_dir == folder / "sweep"  # job.json beside the sweep's record, not a run folder
    assert argv[:3] == ["sweep", "--out", str(folder)]
    assert argv[3:7] == ["--grid", "world.languages=svo,tr", "--grid", "seed=0,1"]
    assert argv[argv.index("--methods") + 1] == "monotrans,floor"
    assert "--seed" not in argv and argv[argv.index("--model-size") + 1] == "tiny"
    assert any("4 cells" in str(s.value) for s in at.success)
    from xlviz.cli import build_parser

    args = build_parser().parse_args(argv)  # the CLI takes it as is
    assert args.grid == ["world.languages=svo,tr", "seed=0,1"] and args.out == str(folder)


@pytest.mark.parametrize("grid,message", [
    ("seed", "is not KEY=V1,V2"),
    ("world.languages=svo,xx:nonsense", "unknown word order / grammar preset 'nonsense'"),
    ("no_such_setting=1,2", "no_such_setting"),
])
def test_a_bad_grid_is_one_line(sweep_root, monkeypatch, grid, message):
    from xlviz import jobs

    started = []
    monkeypatch.setattr(jobs, "start_job", lambda argv, run_dir, **kw: started.append(argv) or 1)
    at = open_panel(_sweeps(sweep_root, monkeypatch), "sw_start")
    before = sorted(sweep_root.iterdir())
    at.text_area[0].set_value(grid)
    next(b for b in at.button if "Start sweep" in b.label).click().run()
    assert not at.exception and not started
    errors = [str(e.value) for e in at.error]
    assert len(errors) == 1 and message in errors[0] and "\n" not in errors[0] and "Traceback" not in errors[0], errors
    assert sorted(sweep_root.iterdir()) == before  # nothing created


def test_sweep_states_for_the_app(sweep_root, tmp_path):
    """A sweep the app started is listed before it records its grid; a job that ended before
    that is failed (or cancelled); a cell whose process is gone is failed (killed), and so is the sweep."""
    import shutil

    from xlviz.io import atomic_write_json
    from xlviz.runs import Run
    from xlviz.views import sweeps as sweeps_view

    root = tmp_path / "checkpoints"
    early = root / "early"
    atomic_write_json(early / "sweep" / "job.json", {"pid": 999999999, "start_ticks": 1, "argv": ["x"], "started": "now"})
    assert sweeps_view.all_sweeps(root) == [early]
    assert sweeps_view.state(sweeps_view.sweep_summary(early)) == "failed"
    atomic_write_json(early / "sweep" / "job.json", {"pid": 999999999, "start_ticks": 1, "argv": ["x"], "cancelled": "now"})
    assert sweeps_view.state(sweeps_view.sweep_summary(early)) == "cancelled"

    folder = root / "killed"
    shutil.copytree(sweep_root / "tiny-sweep", folder)
    cell = Run(folder / "001-languages-sov_seed-1")
    cell.update_status(state="running")
    cell.lock_path.write_text("999999999 1\n")  # its writer died
    summary = sweeps_view.sweep_summary(folder)
    assert [c.state for c in summary.cells] == ["completed", "failed", "completed", "completed"]
    assert "killed?" in summary.cells[1].problem  # why: status.json says running, its writer is gone
    assert sweeps_view.state(summary) == "failed"
    assert set(sweeps_view.all_sweeps(root)) == {early, folder}


def test_runs_page_points_to_the_sweeps_when_only_sweeps_exist(tmp_path, monkeypatch):
    """A folder with a sweep and no other run: the Runs page does not say "No runs yet" as if
    the folder were empty; it says where the sweep's cells are."""
    from tests.sweep_fixtures import make_sweep

    root = tmp_path / "checkpoints"
    make_sweep(root)
    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(root))
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.run()
    at.switch_page("pages/runs.py").run()
    assert not at.exception, [e.message for e in at.exception]
    infos = [i.value for i in at.info]
    assert any("The 4 cells of this folder's sweeps are on the Sweeps page" in v for v in infos), infos
    assert not any(v == "No runs yet — start one above." for v in infos)


def test_a_degenerate_row_is_left_out_and_named(tmp_path, monkeypatch):
    """A cell's row that depends on a degenerate stage is in no mean on the page: the table's
    seeds count drops and a warning names the cell, the system and the stage."""
    from tests.sweep_fixtures import make_sweep
    from xlviz.io import atomic_write_json

    root = tmp_path / "checkpoints"
    make_sweep(root)
    f = root / "tiny-sweep" / "001-languages-sov_seed-1" / "results.json"
    rows = json.loads(f.read_text())
    for r in rows:
        if r["system"] == "monotrans" and r["language"] == "sov":
            r.update(verdict="degenerate", degenerate_stages=["s2_transfer-sov"])
    atomic_write_json(f, rows)
    at = _sweeps(root, monkeypatch)
    res = _tables(at)["sw_results"]
    row = res[(res["system"] == "monotrans") & (res["language"] == "sov")].iloc[0]
    assert row["seeds"] == 1
    warnings = [w.value for w in at.warning]
    assert any("001-languages-sov_seed-1: monotrans sov (degenerate stage s2_transfer-sov)" in w for w in warnings), warnings
