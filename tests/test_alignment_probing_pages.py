"""The Alignment and Probing pages under Streamlit's AppTest, on fake runs with tiny models.

``demo-run`` and ``other-run`` (tests/analysis_fixtures.py) are completed en + sov runs with an
L1 masked LM (s1_pretrain), a transferred L2 model (s2_transfer-sov) and a small generated world.
Checks: the pages run without exception, the main widgets do what they say, numbers shown are
the package's numbers, and ``?run=NAME&l2=L2`` presets both pages (the Runs page's link).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.analysis_fixtures import L2, make_analysis_run
from tests.app_fixtures import chart_title, chart_x_title, charts

APP = str(Path(__file__).resolve().parents[1] / "app.py")
TIMEOUT = 180


@pytest.fixture(scope="module")
def fake_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("analysis-app") / "checkpoints"
    corpus = make_analysis_run(root, "corpus-run")  # like xlviz transfer-corpus: pairs saved, no generated world
    (corpus / "world" / "world.json").unlink()
    make_analysis_run(root, "other-run")
    make_analysis_run(root, "demo-run")  # newest: the pages' default run
    return root


def _app(root, monkeypatch, query: dict | None = None) -> AppTest:
    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(root))
    monkeypatch.delenv("XLVIZ_SHARED_DATA", raising=False)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.run()
    assert not at.exception, at.exception
    return at


def _page(at: AppTest, name: str, query: dict | None = None) -> AppTest:
    if query:
        at.query_params.update(query)
    at.switch_page(f"pages/{name}.py").run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def _charts(at) -> list[str]:
    return list(charts(at))


def _tab(at, label: str) -> AppTest:
    """Open one of the Alignment page's result tabs (only the open one is drawn)."""
    at.session_state["al_tab"] = label
    return at.run()


def _tabs(at) -> list[str]:
    return [t.label for t in at.tabs]


def _every_tab_charts(at) -> set[str]:
    """The charts of every result tab, each opened in turn; Retrieval is open again after."""
    seen = set()
    for label in _tabs(at):
        seen |= set(_charts(_tab(at, label)))
    _tab(at, "Retrieval")
    return seen | set(_charts(at))


def _frames(at, column: str) -> list:
    """Data frames shown on the page that have ``column`` (AppTest does not keep a dataframe's key)."""
    return [d.value for d in at.dataframe if column in d.value.columns]


def _texts(elements) -> str:
    return "\n".join(str(e.value) for e in elements)


# --- alignment ------------------------------------------------------------------------------------

def test_alignment_page_world_transferred_vs_floor(fake_root, monkeypatch):
    at = _page(_app(fake_root, monkeypatch), "alignment")
    assert at.segmented_control(key="al_source").value == "Run's parallel pairs"
    assert at.selectbox(key="al_run").value == "demo-run" and at.selectbox(key="al_l2").value == L2
    assert at.multiselect(key="al_systems").value == ["run:demo-run:transferred", "run:demo-run:floor"]
    assert _tabs(at) == ["Retrieval", "CKA", "Word translation", "Post-hoc map", "Table"]
    assert {"al_fig_retrieval", "al_fig_proj"} <= set(_charts(at))
    assert not {"al_fig_cka", "al_fig_words", "al_fig_posthoc"} & set(_charts(at)), "only the open tab is drawn"
    assert {"al_fig_retrieval", "al_fig_cka", "al_fig_words", "al_fig_proj", "al_fig_posthoc"} <= _every_tab_charts(at)
    table = _frames(_tab(at, "Table"), "cka")[0]
    assert len(table) == 2 * 3 and set(table["system"]) == {"demo-run · transferred", "demo-run · floor"}
    assert table["retrieval_a_to_b"].between(0, 1).all() and table["word_translation_a_to_b"].between(0, 1).all()
    # the page shows the package's numbers
    from xlviz.analysis.reports import run_alignment

    ref = run_alignment(fake_root / "demo-run", L2, limit=12, floor=True)["rows"]
    for r in ref:
        shown = table[(table["system"] == r["system"]) & (table["layer"] == r["layer"])].iloc[0]
        assert shown["retrieval_a_to_b"] == pytest.approx(r["retrieval_a_to_b"])
        assert shown["cka"] == pytest.approx(r["cka"], abs=1e-6)
        assert shown["word_translation_b_to_a"] == pytest.approx(r["word_translation_b_to_a"])
    assert any(b.proto.label == "Download alignment table (CSV)" for b in at.get("download_button"))


def test_alignment_widgets(fake_root, monkeypatch):
    at = _page(_app(fake_root, monkeypatch), "alignment")
    at.number_input(key="al_limit_world").set_value(8).run()
    assert "8 pairs" in _texts(at.caption)
    at.multiselect(key="al_systems").set_value(["run:demo-run:floor"]).run()
    assert set(_frames(_tab(at, "Table"), "cka")[0]["system"]) == {"demo-run · floor"}
    at.toggle(key="al_center").set_value(True).run()
    at.selectbox(key="al_pooling").set_value("cls").run()
    assert not at.exception
    # projection: words joined by gold alignment, at a chosen layer
    at.radio(key="al_proj_level").set_value("words").run()
    at.slider(key="al_proj_layer").set_value(1).run()
    fig = charts(at)["al_fig_proj"]
    assert "layer 1 · PCA of words" in chart_title(fig)
    assert "% of variance" in chart_x_title(fig)  # explained variance on the axes
    _tab(at, "Post-hoc map").slider(key="al_train_frac").set_value(0.75).run()
    assert "Map fitted on 6 pairs, retrieval on the other 2" in _texts(at.caption)
    _tab(_tab(at, "CKA"), "Post-hoc map")  # the share is kept while another tab is open
    assert at.slider(key="al_train_frac").value == 0.75 and "Map fitted on 6 pairs" in _texts(at.caption)
    at.toggle(key="al_words").set_value(False).run()
    assert "Word translation" not in _tabs(at) and "al_fig_words" not in _every_tab_charts(at)
    at.multiselect(key="al_systems").set_value([]).run()
    assert "Pick at least one system" in _texts(at.info)


def test_alignment_projection_choice_survives_removing_every_system(fake_root, monkeypatch):
    at = _page(_app(fake_root, monkeypatch), "alignment")
    at.number_input(key="al_limit_world").set_value(8).run()
    at.radio(key="al_proj_level").set_value("words").run()
    at.slider(key="al_proj_layer").set_value(1).run()
    systems = at.multiselect(key="al_systems").value
    at.multiselect(key="al_systems").set_value([]).run()  # the projection's widgets are not drawn
    assert "Pick at least one system" in _texts(at.info)
    at.multiselect(key="al_systems").set_value(systems).run()
    assert at.radio(key="al_proj_level").value == "words" and at.slider(key="al_proj_layer").value == 1
    assert "layer 1 · PCA of words" in chart_title(charts(at)["al_fig_proj"])


def test_alignment_preset_from_link(fake_root, monkeypatch):
    at = _page(_app(fake_root, monkeypatch), "alignment", {"run": "other-run", "l2": L2})
    assert at.selectbox(key="al_run").value == "other-run"
    assert at.multiselect(key="al_systems").value == ["run:other-run:transferred", "run:other-run:floor"]
    # a later choice is kept (the preset is applied once) and goes into the URL
    at.selectbox(key="al_run").set_value("demo-run").run()
    assert at.selectbox(key="al_run").value == "demo-run"
    assert at.query_params.get("run") in ("demo-run", ["demo-run"])


def test_alignment_corpus_run(fake_root, monkeypatch):
    at = _page(_app(fake_root, monkeypatch), "alignment", {"run": "corpus-run", "l2": L2})
    assert at.multiselect(key="al_systems").value == ["run:corpus-run:transferred", "run:corpus-run:floor"]
    assert "corpus-run parallel pairs (en-sov): 12 pairs" in _texts(at.caption)
    assert "al_fig_retrieval" in _charts(at) and "Word translation" not in _tabs(at)  # no dictionary
    assert at.toggle(key="al_words").proto.disabled


def test_alignment_preset_unknown_run(fake_root, monkeypatch):
    at = _page(_app(fake_root, monkeypatch), "alignment", {"run": "nope", "l2": L2})
    assert "“nope” from the link was not found" in _texts(at.warning)
    assert at.selectbox(key="al_run").value == "demo-run"


def test_alignment_without_runs(tmp_path, monkeypatch):
    at = _page(_app(tmp_path / "none", monkeypatch), "alignment")
    source = at.segmented_control(key="al_source")
    assert "Run's parallel pairs" not in source.options and source.value in ("PUD", "Upload")  # PUD when ../shared/data exists
    # no run and no model in the sidebar: the page says what to do
    assert "Pick at least one system" in _texts(at.info) or "Upload two line-aligned" in _texts(at.info)


# --- probing -------------------------------------------------------------------------------------

def test_probing_agreement_grid_and_drill_down(fake_root, monkeypatch):
    at = _page(_app(fake_root, monkeypatch), "probing")
    assert at.selectbox(key="pr_run").value == "demo-run" and at.multiselect(key="pr_l2s").value == [L2]
    at.number_input(key="pr_agr_max").set_value(5).run()
    grid = _frames(at, "simple")[0]
    assert list(grid.columns) == ["all", "simple", "across_pp", "object_attractor"]
    assert list(grid.index) == ["demo-run · L1 model · en", f"demo-run · transferred · {L2}", f"demo-run · floor · {L2}"]
    assert grid.map(lambda v: 0 <= v <= 100).all().all()
    # the grid is the package's numbers
    from xlviz.analysis.probing import agreement_accuracy
    from xlviz.analysis.reports import agreement_data, run_probe_models
    from xlviz.models.reference import load_spec

    m = run_probe_models(fake_root / "demo-run", [L2])[1]
    _, pairs = agreement_data(f"world:{L2}", fake_root / "demo-run", 5)
    ref = agreement_accuracy(*load_spec(m.spec, "mlm"), pairs)
    row = next(r for r in grid.index if "transferred" in r)
    assert grid.loc[row, "all"] == pytest.approx(100 * ref["accuracy"])
    assert "pr_fig_agr_Generated world" in _charts(at)
    # drill down: one model's wrong pairs of one category
    drill = at.selectbox(key="pr_agr_drill")
    drill.set_value(next(o for o in drill.options if "transferred" in o)).run()
    at.selectbox(key="pr_agr_cat").set_value("simple").run()
    at.radio(key="pr_agr_filter").set_value("wrong").run()
    items = _frames(at, "masked")[0]
    expected = [it for it in ref["items"] if it["category"] == "simple" and not it["correct"]]
    assert len(items) == len(expected) and (~items["correct"].astype(bool)).all()
    assert all("[MASK]" in s for s in items["masked"])
    labels = [b.proto.label for b in at.get("download_button")]
    assert "Download agreement grid (CSV)" in labels and "Download these pairs (CSV)" in labels


def test_probing_floor_toggle_and_languages(fake_root, monkeypatch):
    at = _page(_app(fake_root, monkeypatch), "probing")
    at.number_input(key="pr_agr_max").set_value(3).run()
    at.toggle(key="pr_floor").set_value(False).run()
    rows = list(_frames(at, "simple")[0].index)
    assert len(rows) == 2 and not any("floor" in r for r in rows)
    at.multiselect(key="pr_l2s").set_value([]).run()
    rows = list(_frames(at, "simple")[0].index)
    assert rows == ["demo-run · L1 model · en"]


def test_probing_word_in_context(fake_root, monkeypatch):
    at = _app(fake_root, monkeypatch)
    at.session_state["pr_probe"] = "Word in context"
    at.session_state["pr_wic_n"] = 20  # as if typed before: the first run computes only 20 pairs
    _page(at, "probing")
    at.number_input(key="pr_wic_folds").set_value(2).run()
    assert {"pr_fig_wic", "pr_fig_sim"} <= set(_charts(at))
    grid = _frames(at, "layer 0")[0]
    # only the English model: in sov a homonym's senses are two words (same sense = same word),
    # so the sov rows would test word identity, and the page says it leaves them out
    assert list(grid.columns) == ["layer 0", "layer 1", "layer 2"] and list(grid.index) == ["demo-run · L1 model · en"]
    assert "Not probed (same sense = same word in sov" in _texts(at.caption)
    assert "binary" in _texts(at.caption)
    at.slider(key="pr_wic_layer").set_value(0).run()
    items = _frames(at, "cosine")[0]
    assert len(items) == 20 and "20 pairs at layer 0" in _texts(at.caption)
    at.radio(key="pr_wic_filter").set_value("wrong").run()
    assert (~_frames(at, "cosine")[0]["correct"].astype(bool)).all()


def test_probing_corpus_run_has_no_world_probes(fake_root, monkeypatch):
    at = _page(_app(fake_root, monkeypatch), "probing", {"run": "corpus-run", "l2": L2})
    data = [m for m in at.multiselect if m.key == "pr_agr_data"]
    if data:  # Marvin & Linzen from ../shared/data is there; the world's pairs must not be
        assert "Generated world" not in data[0].options
    else:  # no ../shared/data: nothing to probe agreement with, and the page says so
        assert "No agreement data" in _texts(at.info)
    at.segmented_control(key="pr_probe").set_value("Word in context").run()
    assert "a run on real corpora has none" in _texts(at.info)


def test_probing_preset_from_link(fake_root, monkeypatch):
    at = _page(_app(fake_root, monkeypatch), "probing", {"run": "other-run", "l2": L2})
    assert at.selectbox(key="pr_run").value == "other-run" and at.multiselect(key="pr_l2s").value == [L2]


def test_probing_marvin_linzen_coverage(fake_root, monkeypatch, shared_data):
    monkeypatch.setenv("XLVIZ_SHARED_DATA", str(shared_data))
    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(fake_root))
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    _page(at, "probing")
    at.number_input(key="pr_agr_max").set_value(4).run()
    at.multiselect(key="pr_agr_data").set_value(["Marvin & Linzen (English)"]).run()
    assert not at.exception
    grid = _frames(at, "simple_agrmt")[0]
    assert list(grid.index) == ["demo-run · L1 model · en"]  # English only: the run's L1 model
    cov = _frames(at, "simple_agrmt")[1]
    assert cov.map(lambda v: 0 <= v <= 100).all().all()
    assert "Coverage (pairs scored)" in _texts(at.caption)


def test_alignment_real_data_with_a_custom_system(fake_root, monkeypatch, shared_data):
    at = _page(_app(fake_root, monkeypatch), "alignment")
    at.segmented_control(key="al_source").set_value("PUD").run()
    at.number_input(key="al_limit_pud").set_value(6).run()
    assert "PUD (en-de): 6 pairs" in _texts(at.caption)
    # no sidebar model reads both en and de: add one (the run's L1 model reads both sides)
    box = at.selectbox(key="al_custom_a")
    i = next(k for k, o in enumerate(box.options) if o == "en · encoder (pre-trained) · demo-run")
    box.set_value(i)
    at.selectbox(key="al_custom_b").set_value(i)
    at.button(key="al_custom_add").click().run()
    assert not at.exception, [e.message for e in at.exception]
    assert len(at.multiselect(key="al_systems").value) == 1
    table = _frames(_tab(at, "Table"), "cka")[0]
    assert len(table) == 3 and set(table["lang_b"]) == {"de"}
    _tab(at, "Retrieval")
    assert "al_fig_retrieval" in _charts(at) and "Word translation" not in _tabs(at)  # no gold dictionary for PUD
