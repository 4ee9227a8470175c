"""Every app page under Streamlit's AppTest, on a fake run folder with tiny random models.

The fake runs are written with xlviz.runs.Run (tests/app_fixtures.py): ``demo-run`` has a
generated world and tiny exported QA models, ``second-run`` only records and results. Jobs are
never really started here: ``xlviz.jobs.start_job`` is replaced by a recorder.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from xlviz import jobs
from xlviz.runs import Run
from xlviz.views import runs as runs_view

from tests.app_fixtures import charts as chart_specs, open_panel

APP = str(Path(__file__).resolve().parents[1] / "app.py")
TIMEOUT = 120


@pytest.fixture(scope="module")
def fake_root(tmp_path_factory) -> Path:
    from tests.app_fixtures import make_run

    root = tmp_path_factory.mktemp("app") / "checkpoints"
    make_run(root, "demo-run")
    make_run(root, "second-run", models=False, results_shift=5.0)
    return root


def _new_app(models: list[str] | None = None) -> AppTest:
    """A fresh session; ``models`` preselects the sidebar's model picker.

    (AppTest only reports the sidebar's elements on a session's first run when the app uses
    st.navigation, so tests choose sidebar values through session state up front.)
    """
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    if models is not None:
        at.session_state["xlviz_models"] = models
    at.run()
    assert not at.exception, at.exception
    return at


@pytest.fixture()
def app(fake_root, monkeypatch):
    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(fake_root))
    return _new_app()


def _page(at: AppTest, name: str) -> AppTest:
    at.switch_page(f"pages/{name}.py").run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def _matrices(at: AppTest) -> list:
    """The XQuAD page's score tables (model × language, with an ``avg`` column), EM then F1."""
    return [d.value for d in at.dataframe if "avg" in d.value.columns]


def _texts(elements) -> str:
    return "\n".join(str(e.value) for e in elements)


# --- home and sidebar ---------------------------------------------------------------------------

def test_home_explains_and_lists_recent_runs(app):
    assert "cross-lingual transfer" in app.title[0].value
    table = app.dataframe[0].value
    assert set(table["run"]) == {"demo-run", "second-run"}
    assert set(table["state"]) == {"completed"}


def test_home_empty_state(tmp_path, monkeypatch):
    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(tmp_path / "none"))
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    assert not at.exception
    assert "No runs yet" in _texts(at.info)


def test_sidebar_offers_run_models_per_language_and_exports(app):
    options = app.sidebar.multiselect(key="xlviz_models").options
    labels = " | ".join(options)
    # method or language and kind first (chips stay readable whatever the run's name), run last
    assert "en · encoder (pre-trained) · demo-run" in labels  # s1_pretrain: the L1 model
    assert "sov · encoder (transferred) · demo-run" in labels
    assert "monotrans · QA (en, sov) · demo-run" in labels  # exports, one model per language
    # default: the exported QA system, remembered across pages
    assert app.sidebar.multiselect(key="xlviz_models").value == ["run:demo-run:export:monotrans"]
    assert app.sidebar.multiselect(key="xlviz_languages").value[:2] == ["en", "sov"]
    _page(app, "attention")  # the choice holds on another page
    assert "monotrans · QA (en, sov) · demo-run" in app.selectbox(key="att_model_a").options


def test_sidebar_typed_model_is_checked_once_when_added(app, tmp_path, fake_root, monkeypatch):
    monkeypatch.setenv("XLVIZ_MODELS", str(tmp_path))  # typed paths must lie in the app's roots (xlviz.views.paths)
    missing = str(tmp_path / "no-such-model")
    app.sidebar.text_input(key="xlviz_model_path").set_value(missing)
    app.sidebar.button(key="xlviz_add_model").click().run()
    errors = [e.value for e in app.sidebar.error]
    assert errors == [f"{missing}: model folder not found"]  # one message, not one per language
    assert not any("no-such-model" in o for o in app.sidebar.multiselect(key="xlviz_models").options)
    # a real folder: its heads are named
    app.sidebar.text_input(key="xlviz_model_path").set_value(str(fake_root / "demo-run" / "export" / "monotrans-en"))
    app.sidebar.button(key="xlviz_add_model").click().run()
    assert not app.sidebar.error
    assert "monotrans-en: question answering head" in _texts(app.sidebar.caption)
    app.sidebar.text_input(key="xlviz_model_path").set_value(str(fake_root / "demo-run" / "s1_pretrain"))
    app.sidebar.button(key="xlviz_add_model").click().run()
    assert "s1_pretrain: masked LM head" in _texts(app.sidebar.caption)


# --- runs ---------------------------------------------------------------------------------------

def test_runs_form_starts_the_transfer_cli(app, monkeypatch, fake_root):
    calls = []
    monkeypatch.setattr(jobs, "start_job", lambda argv, run_dir: calls.append((list(argv), Path(run_dir))) or 4242)
    at = _page(app, "runs")
    assert not [ni for ni in at.number_input if ni.label == "Seed"], "a closed form sends none of its widgets"
    at = open_panel(at, "runs_start")
    form_inputs = {ni.label: ni for ni in at.number_input}
    form_inputs["Pre-training steps (L1 MLM)"].set_value(7)
    form_inputs["Transfer steps (L2 embeddings)"].set_value(5)
    form_inputs["Fine-tuning steps (L1 QA)"].set_value(3)
    form_inputs["Seed"].set_value(11)
    form_inputs["MLM batch (blocks)"].set_value(48)
    next(s for s in at.selectbox if s.label == "Model size").set_value("small")
    next(m for m in at.multiselect if m.label == "Target languages").set_value(["svo", "sov"])
    systems = next(m for m in at.multiselect if m.label == "Systems (methods)")
    from xlviz.methods import all_systems

    assert set(all_systems()) <= {o.split(" — ")[0] for o in systems.options}, "the form offers every system of the registry"
    systems.set_value(["monotrans", "jointpair-disjoint"])
    next(t for t in at.text_input if t.label == "Run name (optional)").set_value("my-run")
    next(b for b in at.button if b.label == "Start run").click().run()
    assert not at.exception
    assert len(calls) == 1, _texts(at.error)
    argv, run_dir = calls[0]
    assert run_dir == fake_root.resolve() / "my-run"
    assert argv[0] == "transfer"
    opts = dict(zip(argv[1::2], argv[2::2]))
    assert opts["--run-dir"] == str(run_dir)
    assert opts["--pretrain-steps"] == "7" and opts["--transfer-steps"] == "5" and opts["--finetune-steps"] == "3"
    assert opts["--seed"] == "11" and opts["--model-size"] == "small" and opts["--mlm-batch-size"] == "48"
    assert opts["--languages"] == "svo,sov" and opts["--methods"] == "monotrans,jointpair-disjoint"
    assert "Started **my-run**" in _texts(at.success)


def test_runs_form_rejects_bad_input_with_a_message(app, monkeypatch):
    calls = []
    monkeypatch.setattr(jobs, "start_job", lambda argv, run_dir: calls.append(argv) or 1)
    at = open_panel(_page(app, "runs"), "runs_start")
    next(m for m in at.multiselect if m.label == "Target languages").set_value([])
    next(b for b in at.button if b.label == "Start run").click().run()
    assert not at.exception and not calls
    assert "pick at least one target language" in _texts(at.error)
    next(m for m in at.multiselect if m.label == "Target languages").set_value(["sov"])
    next(t for t in at.text_input if t.label == "Run name (optional)").set_value("../escape")
    next(b for b in at.button if b.label == "Start run").click().run()
    assert not calls and "letters, digits" in _texts(at.error)


def test_runs_live_view_and_compare_two_runs(app):
    at = _page(app, "runs")
    live = at.selectbox(key="runs_live_select")
    assert set(live.options) >= {"demo-run (completed)", "second-run (completed)"}
    # a completed run opens on its results: its loss curves are one click away, drawn once opened
    shown = live.value.split(" (")[0]
    assert not any(str(getattr(e, "key", "")).startswith("loss_") for e in at.get("plotly_chart"))
    at = open_panel(at, f"runs_loss_open_{shown}")
    assert any(getattr(e, "key", None) == f"loss_{shown}" for e in at.get("plotly_chart"))
    assert "Pick two or more runs" in _texts(at.info)
    links = [e.proto for e in at.get("page_link")]
    assert any(l.label == "Analyse this run · sov" and "l2=sov" in l.query_string and "run=" in l.query_string for l in links), links
    at.multiselect(key="runs_compare_pick").set_value(["demo-run", "second-run"]).run()
    assert not at.exception
    compare = next(d.value for d in at.dataframe if "EM en" in d.value.columns)
    assert set(compare["run"]) == {"demo-run", "second-run"}
    assert {"EM en", "F1 en", "EM sov", "F1 sov"} <= set(compare.columns)
    row = compare[(compare["run"] == "second-run") & (compare["system"] == "monotrans")].iloc[0]
    assert row["F1 en"] == pytest.approx(55.0)
    assert any(getattr(e, "key", None) == "runs_compare_fig" for e in at.get("plotly_chart"))
    assert row["F1 sov/L1"] == pytest.approx(round(35.0 / 55.0, 2))
    assert "runs_curves_fig" in [e.key for e in at.get("plotly_chart")]


def test_runs_compare_keeps_its_runs_when_a_new_run_appears(app, fake_root):
    at = _page(app, "runs")
    at.multiselect(key="runs_compare_pick").set_value(["demo-run", "second-run"]).run()
    assert "The runs' configs are the same" in _texts(at.caption)
    seeds = next(d.value for d in at.dataframe if "F1 sd" in d.value.columns)  # same config: seed-only group
    assert set(seeds["n"]) == {2}
    newer = Run(fake_root / "newer-run")  # newest: first row of the table
    newer.write_config({"name": "newer-run", "seed": 3})
    newer.write_results([{"system": "monotrans", "language": "en", "exact_match": 1.0, "f1": 2.0}])
    try:
        at.run()
        assert not at.exception
        compare = next(d.value for d in at.dataframe if "EM en" in d.value.columns)
        assert set(compare["run"]) == {"demo-run", "second-run"}
        assert at.multiselect(key="runs_compare_pick").value == ["demo-run", "second-run"]
        at.multiselect(key="runs_compare_pick").set_value(["newer-run", "demo-run"]).run()
        diff = next(d.value for d in at.dataframe if "key" in d.value.columns)  # only what differs
        assert "name" not in set(diff["key"]) and "seed" in set(diff["key"]) and "model_size" in set(diff["key"])
    finally:
        import shutil

        shutil.rmtree(newer.path)


def test_runs_cancel_and_resume_buttons(app, fake_root, monkeypatch):
    run = Run(fake_root / "live-run")
    run.write_config({"name": "live-run", "world": {"languages": [{"code": "sov"}]}})
    run.update_status(state="running", stage="s1_pretrain", stage_index=1, n_stages=5,
                      progress={"stage": "s1_pretrain", "step": 5, "total": 10}, started="2026-01-01T00:00:00+00:00")
    run.log_metric(stage="s1_pretrain", step=5, loss=3.0, elapsed=1.0)
    alive = {"live-run": True}
    monkeypatch.setattr(jobs, "is_alive", lambda d: alive.get(Path(d).name, False))
    cancelled = []

    def fake_cancel(path):
        cancelled.append(Path(path).name)
        alive["live-run"] = False
        st = run.status()
        st["state"] = "cancelled"
        from xlviz.io import atomic_write_json

        atomic_write_json(run.status_path, st)
        return True

    monkeypatch.setattr(jobs, "cancel", fake_cancel)
    resumed = []
    monkeypatch.setattr(jobs, "resume", lambda path: resumed.append(Path(path).name) or 1)
    try:
        at = _page(app, "runs")
        at.selectbox(key="runs_live_select").set_value("live-run").run()
        assert "running · stage s1_pretrain · 30%" in _texts(at.get("progress")) or any(
            "30%" in str(p.proto.text) for p in at.get("progress"))
        at.button(key="cancel_live-run").click().run()
        assert cancelled == ["live-run"]
        at.run()
        assert not at.exception
        at.button(key="resume_live-run").click().run()
        assert resumed == ["live-run"]
    finally:
        import shutil

        shutil.rmtree(run.path)


def test_runs_empty_state(tmp_path, monkeypatch):
    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(tmp_path / "empty"))
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    _page(at, "runs")
    assert "No runs yet — start one above." in _texts(at.info)


# --- XQuAD --------------------------------------------------------------------------------------

def test_xquad_side_by_side_with_scores_and_highlights(app):
    at = _page(app, "xquad")
    assert not at.error, _texts(at.error)
    em, f1 = _matrices(at)[:2]  # EM matrix, F1 matrix
    # scores only: what each model read is one table above them (as columns they pushed the
    # last language off a 1,400 px screen)
    assert "resources" not in em.columns and "parallel pairs" not in f1.columns
    read = [d.value for d in at.dataframe if "resources" in d.value.columns]
    assert list(read[0].columns) == ["model", "resources", "parallel pairs"] and list(read[0]["model"]) == ["monotrans"]
    assert read[0]["resources"].iloc[0] == runs_view.export_resources("demo-run", "monotrans")
    assert list(em.index) == ["monotrans"]  # short alias: all picks come from one run
    assert {"en", "sov", "avg"} <= set(em.columns) and {"en", "sov"} <= set(f1.columns)
    html = "\n".join(h.proto.body for h in at.get("html"))
    assert html.count('class="xlviz-qa"') == 2 and 'data-lang="sov"' in html
    assert "background:#c8f0c8" in html  # gold span
    first = at.selectbox(key="xq_pick").value
    at.button(key="xq_next").click().run()
    assert at.selectbox(key="xq_pick").value != first
    at.button(key="xq_prev").click().run()
    assert at.selectbox(key="xq_pick").value == first
    assert any(b.proto.label.startswith("Download predictions") for b in at.get("download_button"))


def test_xquad_generated_world_shows_english_and_the_runs_own_numbers(app):
    at = open_panel(_page(app, "xquad"), "xq_how")  # the panel that says how each cell was computed
    assert not at.error, _texts(at.error)
    em = _matrices(at)[0]
    assert "en" in em.columns  # train.en.json no longer hides test.en.json
    # the run's saved English predictions (all gold in the fixture) are its numbers; the tiny
    # random model would score near 0
    # each cell: the score with its 95% paragraph-bootstrap interval
    assert em.loc["monotrans", "en"] == "100.0 [100.0, 100.0]"
    assert "the run's saved predictions" in "\n".join(m.value for m in at.markdown)


def test_xquad_decodes_like_the_run_and_runs_one_model_once(app, fake_root, tmp_path, monkeypatch):
    import shutil

    import streamlit as st

    from tests.app_fixtures import make_qa_folder
    from xlviz.evaluation import qa_predict

    monkeypatch.setenv("XLVIZ_MODELS", str(tmp_path))  # the typed folder lies in one of the app's roots
    copy = fake_root / "demo-run" / "export" / "samefiles-en"
    shutil.copytree(fake_root / "demo-run" / "export" / "monotrans-en", copy)
    calls = []
    real = qa_predict.predict_qa

    def spy(model, tok, examples, **kw):
        calls.append(kw)
        return real(model, tok, examples, **kw)

    monkeypatch.setattr(qa_predict, "predict_qa", spy)
    st.cache_data.clear()
    try:
        at = AppTest.from_file(APP, default_timeout=TIMEOUT)
        at.session_state["xlviz_models"] = ["run:demo-run:export:monotrans", "run:demo-run:export:samefiles"]
        at.session_state["xq_source"] = "folder"
        at.session_state["xq_folder"] = str(make_qa_folder(tmp_path))
        at.run()
        _page(at, "xquad")
        assert not at.exception and not at.error, _texts(at.error)
        assert calls and all(c["max_answer_length"] == 6 and c["max_length"] == 48 and c["doc_stride"] == 24 for c in calls)
        assert len(calls) == 2  # en once for both systems (same files), sov once
        # another world's L2 is mostly unknown words to this run's sov vocabulary: said once, with the rate
        warnings = [w.value.replace("\\", "") for w in at.warning]  # names are escaped markdown (xlviz.views.text)
        # (its English is another world's too: spelled out letter by letter, said as well)
        warnings = [w for w in warnings if "Not readable" in w]
        assert any(w.startswith("sov questions: Not readable by monotrans's tokenizer") for w in warnings), warnings
        assert any(w.startswith("en questions: Not readable") and "letter by letter" in w for w in warnings), warnings
        assert all("run demo-run" in w for w in warnings)
        em = _matrices(at)[0]
        assert em.loc["monotrans", "en"] == em.loc["samefiles", "en"]
    finally:
        shutil.rmtree(copy)


def test_xquad_state_lives_in_the_url(fake_root, monkeypatch):
    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(fake_root))
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"xlviz_models": '["run:demo-run:s3_finetune", "run:demo-run:export:monotrans"]',
                            "xq_filter": "languages disagree (for some model)", "xq_search": "?"})
    at.run()
    _page(at, "xquad")  # a bookmarked view: the page opens as it was
    assert at.selectbox(key="xq_filter").value == "languages disagree (for some model)"
    assert at.text_input(key="xq_search").value == "?"
    assert at.sidebar.multiselect(key="xlviz_models").value == ["run:demo-run:export:monotrans"]  # unknown keys dropped
    at.selectbox(key="xq_filter").set_value("all questions").run()
    assert at.query_params["xq_filter"] in ("all questions", ["all questions"])


def test_xquad_filters_reset_when_the_data_set_changes(app, tmp_path):
    from tests.app_fixtures import make_qa_folder

    at = _page(app, "xquad")
    at.selectbox(key="xq_source").set_value("run:demo-run").run()
    at.text_input(key="xq_search").set_value("no question has this").run()
    assert "No question matches" in _texts(at.info)
    at.selectbox(key="xq_source").set_value("run:second-run").run()
    assert at.text_input(key="xq_search").value == ""
    assert "No question matches" not in _texts(at.info)


def test_xquad_search_and_disagreement_filter(app):
    at = _page(app, "xquad")
    ids = at.selectbox(key="xq_pick").options
    target = ids[3].split(" — ")[0]
    at.text_input(key="xq_search").set_value(target).run()
    assert [o.split(" — ")[0] for o in at.selectbox(key="xq_pick").options] == [target]
    at.text_input(key="xq_search").set_value("").run()
    at.selectbox(key="xq_filter").set_value("languages disagree (for some model)").run()
    assert not at.exception


def test_xquad_folder_of_squad_files(app, tmp_path, monkeypatch):
    from tests.app_fixtures import make_qa_folder

    monkeypatch.setenv("XLVIZ_MODELS", str(tmp_path))  # the typed folder lies in one of the app's roots
    folder = make_qa_folder(tmp_path)
    at = _page(app, "xquad")
    at.selectbox(key="xq_source").set_value("folder").run()
    at.text_input(key="xq_folder").set_value(str(folder)).run()
    assert not at.exception and not at.error, _texts(at.error)
    assert "xlviz-qa" in "\n".join(h.proto.body for h in at.get("html"))
    at.text_input(key="xq_folder").set_value(str(tmp_path / "nope")).run()
    assert "Folder not found" in _texts(at.error)


def test_xquad_without_models_shows_gold_only(app):
    at = _page(_new_app(models=[]), "xquad")
    assert "Pick one or more QA models" in _texts(at.info)
    assert "xlviz-qa" in "\n".join(h.proto.body for h in at.get("html"))


# --- attention ----------------------------------------------------------------------------------

def _share_panels(at) -> list[str]:
    """The panels of the Attention page's share figure (its subplot titles, or its one title)."""
    spec = chart_specs(at)["att_shares"]  # drawn with Vega-Lite: one panel per matrix, or one titled chart
    return [p["title"]["text"] for p in spec.get("hconcat", [])] or [spec["title"]["text"]]


def test_attention_each_alone_for_monotrans_exports(app):
    at = _page(app, "attention")
    assert not at.error, _texts(at.error)
    charts = list(chart_specs(at))
    assert "att_heat_A (en)" in charts and "att_heat_B (sov)" in charts
    assert any(k.startswith("att_ov_") for k in charts)
    assert "Feed the pair as one input" in _texts(at.info)


def test_attention_pair_with_gold_alignment_and_truncation(app):
    at = _page(_new_app(models=["run:demo-run:s1_pretrain"]), "attention")
    assert at.radio(key="att_mode").value == "as one pair"
    assert _share_panels(at) == ["share of attention to the other sentence", "share of attention to the aligned word"], _texts(at.error)
    assert any(b.proto.label.startswith("Download layer × head shares") for b in at.get("download_button"))
    at.number_input(key="att_max_len").set_value(8).run()
    assert "only the first 8 are shown" in _texts(at.warning)
    at.toggle(key="att_hide").set_value(False).run()
    at.selectbox(key="att_head").set_value(1).run()
    assert not at.exception and not at.error


def test_attention_mixed_pair_through_the_transferred_body(app):
    at = _page(_new_app(models=["run:demo-run:s1_pretrain", f"run:demo-run:s2_transfer-sov"]), "attention")
    assert not at.exception and not at.error, _texts(at.error)
    assert at.radio(key="att_mode").options[0] == "as one pair (each language's embeddings)"
    at.radio(key="att_mode").set_value("as one pair (each language's embeddings)").run()
    assert not at.exception and not at.error, _texts(at.error)
    assert "att_heat_A + B" in chart_specs(at)
    assert len(_share_panels(at)) == 2


def test_attention_caps_max_tokens_at_the_models_positions(app):
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.session_state["xlviz_models"] = ["run:demo-run:s1_pretrain"]
    at.session_state["att_max_len"] = 512  # e.g. kept from a bigger model
    at.run()
    _page(at, "attention")
    assert not at.exception and not at.error, _texts(at.error)
    assert at.number_input(key="att_max_len").value == 64  # the tiny model's max_position_embeddings
    assert "at most 64 positions" in _texts(at.caption)


@pytest.fixture(scope="module")
def veco_root(tmp_path_factory) -> Path:
    """A fake run whose exports are a model with a cross-attention module (VECO's registered
    type), one folder per language sharing one body: the s1 body and the transferred L2 body
    of the fake run, each with the same cross-attention plugged in."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from tests.app_fixtures import L2, make_run
    from xlviz.models.veco import CROSS, plug_in

    root = tmp_path_factory.mktemp("app-veco") / "checkpoints"
    path = make_run(root, "veco-run")
    cross = None
    for lang, stage in (("en", "s1_pretrain"), (L2, f"s2_transfer-{L2}")):
        model = plug_in(AutoModelForMaskedLM.from_pretrained(path / stage), seed=3)
        if cross is None:
            cross = {k: v for k, v in model.state_dict().items() if CROSS in k}
        model.load_state_dict(cross, strict=False)  # one cross-attention module for both languages
        model.save_pretrained(path / "export" / f"crossmodel-{lang}")
        AutoTokenizer.from_pretrained(path / stage).save_pretrained(path / "export" / f"crossmodel-{lang}")
    return root


def test_attention_shows_a_models_own_cross_attention(veco_root, monkeypatch):
    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(veco_root))
    at = _page(_new_app(models=["run:veco-run:export:crossmodel"]), "attention")
    assert not at.exception and not at.error, _texts(at.error)
    charts = list(chart_specs(at))
    assert "att_cross_heat" in charts and "att_cross_ov" in charts, charts
    assert any(s.value.startswith("The model's own cross-attention") for s in at.subheader)
    assert _share_panels(at)[0] == "share of attention to the other sentence"  # the self-attention shares beside it
    at.selectbox(key="att_head").set_value(1).run()
    at.toggle(key="att_hide").set_value(False).run()
    assert not at.exception and not at.error, _texts(at.error)
    assert "att_cross_heat" in chart_specs(at)


def test_attention_without_cross_attention_shows_no_cross_maps(app):
    at = _page(_new_app(models=["run:demo-run:s1_pretrain"]), "attention")
    assert "att_cross_heat" not in chart_specs(at)


def test_attention_typed_pair(app):
    at = _page(_new_app(models=["run:demo-run:s1_pretrain"]), "attention")
    at.segmented_control(key="att_source").set_value("Typed").run()
    at.text_area(key="att_text_a").set_value("the cat sat on the mat.").run()
    assert not at.exception and not at.error, _texts(at.error)
    assert "att_heat_A + B" in chart_specs(at)
    assert "needs a gold word alignment" in "\n".join(c.value for c in at.caption)


# --- every page ---------------------------------------------------------------------------------

def test_every_page_is_in_the_navigation_and_opens(app):
    """Each file under pages/ is listed in app.py's navigation and opens without an exception
    (a page added to the folder but not to ``PAGES`` would be unreachable)."""
    app_py = Path(APP).read_text()
    pages = sorted(p.stem for p in (Path(APP).parent / "pages").glob("*.py"))
    assert "sweeps" in pages
    for name in pages:
        assert f'"pages/{name}.py"' in app_py, name
        _page(app, name)
        assert app.title, name
