"""Faults found walking the app as a researcher: each test fails on the code before its fix.

Same fixtures as tests/test_app_pages.py (tiny runs written by tests/app_fixtures.py); nothing
here trains, downloads or starts a job.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[1] / "app.py")
TIMEOUT = 120


@pytest.fixture(scope="module")
def fake_root(tmp_path_factory) -> Path:
    from tests.app_fixtures import make_run

    root = tmp_path_factory.mktemp("faults") / "checkpoints"
    make_run(root, "demo-run")
    return root


@pytest.fixture()
def app(fake_root, monkeypatch):
    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(fake_root))
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    assert not at.exception, at.exception
    return at


def _page(at: AppTest, name: str) -> AppTest:
    at.switch_page(f"pages/{name}.py").run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def _texts(elements) -> str:
    return "\n".join(str(e.value) for e in elements)


# --- a hub id is checked once, against the local cache ----------------------------------------

def _fake_hub_cache(cache: Path, repo_id: str, architectures: list[str], *, weights: bool = True) -> None:
    """A model in the layout huggingface_hub's cache uses (refs/main -> snapshots/<sha>/)."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    snap = repo / "snapshots" / "0123abcd"
    snap.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123abcd")
    (snap / "config.json").write_text(json.dumps({"model_type": "bert", "architectures": architectures}))
    if weights:
        (snap / "model.safetensors").write_bytes(b"")


@pytest.fixture()
def hub_cache(tmp_path, monkeypatch) -> Path:
    from huggingface_hub import constants

    cache = tmp_path / "hf-cache"
    cache.mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _fake_hub_cache(cache, "org/tiny-mlm", ["BertForMaskedLM"])
    _fake_hub_cache(cache, "org/pickle-only", ["BertForMaskedLM"], weights=False)
    return cache


def test_hub_id_not_in_the_cache_is_refused_once_when_added(hub_cache):
    from xlviz.views.choices import check_typed, folder_choice

    missing = check_typed("org/not-downloaded")
    assert not missing.ok and "not in the local Hugging Face cache" in missing.message
    assert not check_typed("org/pickle-only").ok
    cached = check_typed("org/tiny-mlm")
    assert cached.ok and cached.mlm and not cached.qa and "masked LM head" in cached.message
    assert not folder_choice("org/tiny-mlm").qa, "a hub encoder without a QA head is no QA system"


def test_sidebar_refuses_an_uncached_hub_id_with_one_message(app, hub_cache):
    app.sidebar.text_input(key="xlviz_model_path").set_value("org/not-downloaded")
    app.sidebar.button(key="xlviz_add_model").click().run()
    errors = [e.value for e in app.sidebar.error]
    assert len(errors) == 1 and errors[0].startswith("org/not-downloaded: not in the local Hugging Face cache")
    assert "path:org/not-downloaded" not in app.sidebar.multiselect(key="xlviz_models").options
    _page(app, "xquad")
    assert not [e for e in app.main.error if "not-downloaded" in str(e.value)], "no error box on the pages"
    app.sidebar.text_input(key="xlviz_model_path").set_value("org/tiny-mlm")
    app.sidebar.button(key="xlviz_add_model").click().run()
    assert not app.sidebar.error
    assert "path:org/tiny-mlm" in app.sidebar.multiselect(key="xlviz_models").value


# --- probing offers only models it can probe --------------------------------------------------

def _encoder_only(src: Path, dest: Path) -> Path:
    """A copy of a masked LM whose config says it is a bare encoder (as MiniLM before step 1b)."""
    import shutil

    shutil.copytree(src, dest)
    cfg = json.loads((dest / "config.json").read_text())
    cfg["architectures"] = ["BertModel"]
    (dest / "config.json").write_text(json.dumps(cfg))
    return dest


def test_probing_offers_only_masked_lms_and_says_why(fake_root, tmp_path, monkeypatch):
    from xlviz.views.choices import has_mlm_head, split_probeable

    encoder = _encoder_only(fake_root / "demo-run" / "s1_pretrain", tmp_path / "minilm-encoder")
    assert has_mlm_head(encoder) is False and has_mlm_head(fake_root / "demo-run" / "s1_pretrain") is True
    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(fake_root))
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.session_state["xlviz_typed_models"] = [str(encoder)]
    at.session_state["xlviz_models"] = [f"path:{encoder}"]
    at.run()
    _page(at, "probing")
    rows = next(d.value for d in at.dataframe if "role" in d.value.columns)
    assert "minilm-encoder" not in set(rows["model"]) and len(rows) > 0
    assert "Not offered, no masked-LM head to score minimal pairs with: minilm-encoder." in _texts(at.caption)
    assert not [e for e in at.error if "minilm-encoder" in str(e.value)], "no error box for it"
    # word in context reads the masked LM's hidden states (as `xlviz analyse wic` does): the same
    # capability check refuses the encoder there too, and every floor built from it
    from types import SimpleNamespace as NS

    from xlviz.views.choices import WIC_VIEW

    enc = NS(name="enc", spec=NS(path=str(encoder), floor_seed=None))
    floor = NS(name="floor", spec=NS(path=str(encoder), floor_seed=1))
    s1 = NS(name="s1", spec=NS(path=str(fake_root / "demo-run" / "s1_pretrain"), floor_seed=None))
    assert split_probeable([enc, floor, s1], WIC_VIEW) == ([s1], [enc, floor])
    at.segmented_control(key="pr_probe").set_value("Word in context").run()
    assert not at.exception
    assert "Not offered, no masked-LM head to read the words with: minilm-encoder." in _texts(at.caption)
    assert not [e for e in at.error if "minilm-encoder" in str(e.value)], "no error box for it"


def test_default_rows_keep_references_floors_and_the_first_systems():
    from types import SimpleNamespace as NS

    from xlviz.views.choices import default_rows

    small = [NS(role=r) for r in ("reference", "transferred", "floor")]
    assert default_rows(small) == small
    big = [NS(role="reference")] + [NS(role="transferred") for _ in range(24)] + [NS(role="floor"), NS(role="model")]
    got = default_rows(big, limit=6)
    assert len(got) == 6 and got[0] is big[0] and big[-1] in got and big[-2] in got
    assert got[1:4] == big[1:4], "then the run's first systems, in its order"
    # a system probed in two languages is one choice; references and floors never crowd out every system
    rows = [NS(name=n, role=r, lang=lang) for n, r in [("L1", "reference")] for lang in ("en",)]
    rows += [NS(name=n, role=r, lang=lang) for lang in ("svo", "sov")
             for n, r in [("mono-l2", "reference"), ("mono-l2-sup", "reference"), ("floor", "floor")]
             + [(f"t{i}", "transferred") for i in range(20)]]
    got = default_rows(rows, limit=4, group=lambda m: m.name)
    assert sorted({m.name for m in got}) == ["L1", "floor", "mono-l2", "mono-l2-sup", "t0", "t1"]
    assert {m.lang for m in got if m.name == "t0"} == {"svo", "sov"}
    keys = [f"run:r:s{i}" for i in range(20)] + ["run:r:floor"]  # the Alignment page's system keys
    assert default_rows(keys, always=lambda k: k.endswith(":floor")) == keys[:5] + ["run:r:floor"]


def test_probing_rows_picker_limits_what_is_probed(app):
    at = _page(app, "probing")
    pick = at.multiselect(key="pr_show")
    offered = list(pick.options)
    assert len(offered) >= 2 and list(pick.value) == offered, "a small run shows every row"
    pick.set_value(offered[:1]).run()
    assert not at.exception
    grid = next(d.value for d in at.dataframe if d.value.index.name == "model · language")
    assert list(grid.index) == offered[:1]
    assert any(f"1 of {len(offered)} rows shown" in str(c.value) for c in at.caption)


# --- lines that can be told apart ---------------------------------------------------------------

def _look(trace) -> tuple:
    marker = trace.marker.symbol if trace.mode and "markers" in trace.mode else None
    return (trace.line.color, trace.line.dash or "solid", marker, trace.line.width, trace.opacity)


def test_runs_overlay_never_repeats_a_look_and_tells_attempts_apart():
    import pandas as pd

    from xlviz.views.runs import loss_figure, overlay_figure, with_attempts

    rows = [{"stage": f"s{i}", "step": s, "loss": 5.0 - s / 10} for i in range(8) for s in range(0, 30, 10)]
    rows += [{"stage": "s2", "step": s, "loss": 4.0} for s in range(0, 20, 10)]  # s2 resumed: a second attempt
    curves = with_attempts(pd.DataFrame(rows))
    curves.insert(0, "run", "r")
    curves["elapsed"] = 0.0
    for smoothing in (0.0, 0.6):
        shown = [t for t in overlay_figure(curves, smoothing=smoothing).data if t.showlegend is not False]
        assert len(shown) == 9
        looks = [_look(t) for t in shown]
        assert len(set(looks)) == len(looks), "two legend entries look alike"
    names = [t.name for t in overlay_figure(curves).data]
    assert "r · s2 (attempt 1 of 2)" in names and "r · s2 (attempt 2 of 2)" in names
    single = loss_figure(rows)
    s2 = [t for t in single.data if t.legendgroup.startswith("s2")]
    assert len(s2) == 2 and len({t.line.dash for t in s2}) == 2


def test_layer_lines_colour_is_system_dash_is_language_legend_below():
    from xlviz.ui.analysis import layer_lines

    rows = [{"system": "monotrans", "language": lang, "layer": layer, "accuracy": 0.5}
            for lang in ("svo", "sov") for layer in range(3)]
    fig = layer_lines(rows, "accuracy", "t", color="system", dash="language", colours={"monotrans": "#123456"})
    assert len(fig.data) == 2 and {t.line.color for t in fig.data} == {"#123456"}
    assert len({t.line.dash for t in fig.data}) == 2
    # legend outside, below the plot: at the bottom of the figure, the bottom margin holding it and the x axis
    legend = fig.layout.legend
    assert legend.orientation == "h" and legend.yref == "container" and 0 < legend.y < 0.5 and legend.yanchor == "top"
    assert fig.layout.margin.b >= 64 + 24


def test_wic_charts_dash_by_language(app):
    from xlviz.ui.common import FIGURES_KEY

    at = _page(app, "probing")
    at.segmented_control(key="pr_probe").set_value("Word in context").run()
    assert not at.exception
    for title in ("Word-in-context probe accuracy (cross-validated)", "Contextual similarity: Spearman ρ of cosine vs. gold"):
        fig = at.session_state[FIGURES_KEY][title]
        # English only: in sov a homonym's senses are two words, so those rows are left out
        assert {t.name.split(", ")[-1] for t in fig.data if t.name} == {"en"}
        assert fig.layout.legend.yref == "container" and fig.layout.margin.b > 64  # below the plot and its axis title
    # the page's line styles: one system's two languages share a colour and differ in dash
    from xlviz.views.figures import layer_lines

    rows = [{"system": "monotrans", "language": lang, "layer": k, "accuracy": 50.0 + k} for lang in ("en", "sov") for k in range(3)]
    fig = layer_lines(rows, "accuracy", "t", color="system", dash="language")
    by_lang: dict[str, set] = {}
    colour: set = set()
    for t in fig.data:
        by_lang.setdefault(t.name.split(", ")[-1], set()).add(t.line.dash)
        colour.add(t.line.color)
    assert set(by_lang) == {"en", "sov"} and not by_lang["en"] & by_lang["sov"] and len(colour) == 1, (by_lang, colour)


# --- attention: the cap, its warning, the typed text ----------------------------------------------

def _attention_app(monkeypatch, caps: dict) -> AppTest:
    from xlviz.ui import common

    monkeypatch.setattr(common, "max_positions", lambda ref: caps["cap"])  # a 512- or 96-position model
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.session_state["xlviz_models"] = ["run:demo-run:s1_pretrain"]
    at.run()
    return _page(at, "attention")


def test_attention_cap_follows_the_model_both_ways(app, monkeypatch):
    caps = {"cap": 512}
    at = _attention_app(monkeypatch, caps)
    at.number_input(key="att_max_len").set_value(200).run()
    caps["cap"] = 96
    at.run()
    assert at.number_input(key="att_max_len").value == 96
    caps["cap"] = 512
    at.run()
    assert at.number_input(key="att_max_len").value == 200, "back on a 512-position model, the length asked for returns"


def test_attention_truncation_warning_names_the_models_limit(app, monkeypatch):
    caps = {"cap": 16}
    at = _attention_app(monkeypatch, caps)
    at.segmented_control(key="att_source").set_value("Typed").run()
    at.text_area(key="att_text_a").set_value(" ".join(["the cat sits on the mat ."] * 6)).run()
    assert at.number_input(key="att_max_len").value == 16
    warnings = _texts(at.warning)
    assert "16 is the model's own limit" in warnings and "raise “Max tokens”" not in warnings


def test_attention_typed_default_is_in_its_labels_language_with_token_stats(fake_root, monkeypatch):
    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(fake_root))
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.session_state["xlviz_languages"] = ["en", "sov"]  # the run's pair, as the sidebar offers it
    at.run()
    _page(at, "attention")
    at.segmented_control(key="att_source").set_value("Typed").run()
    assert at.text_input(key="att_lang_b").value == "sov"
    text_b = at.text_area(key="att_text_b").value
    assert text_b and "Katze" not in text_b, "an invented language's label gets that language's sentence"
    captions = _texts(at.caption)
    assert "B (sov) under" in captions and "characters per token" in captions and "[UNK]" in captions
    at.text_area(key="att_text_b").set_value("Die Katze sitzt auf der Matte.").run()
    assert any("B (sov) under" in str(w.value) and ("[UNK]" in str(w.value) or "shredded" in str(w.value))
               for w in at.warning), _texts(at.warning) + captions


# --- smaller faults -----------------------------------------------------------------------------

def _oracle_run(root: Path):
    from xlviz.runs import Run

    run = Run(root / "oracle-run")
    run.write_config({"name": "oracle-run", "languages": ["sov"]})
    run.write_results([
        {"system": "monotrans", "language": "en", "exact_match": 40.0, "f1": 50.0},
        {"system": "monotrans", "language": "sov", "exact_match": 20.0, "f1": 30.0},
        {"system": "dictionary-oracle", "language": "sov", "exact_match": 60.0, "f1": 70.0},
    ])
    return run


def test_best_l2_f1_leaves_the_oracle_out(tmp_path):
    from xlviz.views.runs import run_table

    row = run_table([_oracle_run(tmp_path)]).iloc[0]
    assert row["best L2 F1, zero-shot"] == 30.0, "the dictionary oracle is an upper bound, not the best transfer"


def test_single_run_table_has_em_beside_f1(tmp_path):
    from xlviz.views.runs import ZERO_SHOT, results_by_setting, results_frame

    long = results_frame([_oracle_run(tmp_path)])
    wide = dict(results_by_setting(long, ["en", "sov"], ("exact_match", "f1")))[ZERO_SHOT]
    assert list(wide.columns) == ["resources", "parallel pairs", "en · EM", "en · F1", "sov · EM", "sov · F1"]
    assert wide.loc["monotrans", "sov · EM"] == "20.0" and wide.loc["monotrans", "sov · F1"] == "30.0"


def test_bar_chart_csv_keeps_em_and_f1_apart(tmp_path):
    from xlviz.views.export import figure_frame
    from xlviz.views.runs import compare_figure, results_frame

    frame = figure_frame(compare_figure(results_frame([_oracle_run(tmp_path)])))
    sov = frame[(frame["x"] == "sov") & (frame["trace"].str.contains("monotrans"))]
    assert dict(zip(sov["metric"], sov["y"])) == {"EM": 20.0, "F1": 30.0}


def test_html_report_draws_the_loss_chart_once(tmp_path):
    from xlviz.views.export import run_report_html
    from xlviz.views.runs import loss_figure

    run = _oracle_run(tmp_path)
    for step in range(3):
        run.log_metric(stage="s1", step=step, loss=1.0)
    live = loss_figure(run.metrics(all_attempts=True))  # what the live view drew, kept for the report
    page = run_report_html(run, {f"loss_{run.name}": live})
    assert page.count('class="plotly-graph-div"') == 1


def test_attention_head_view_is_an_st_iframe(app, monkeypatch):
    import streamlit.components.v1 as components

    legacy = []
    monkeypatch.setattr(components, "html", lambda *a, **k: legacy.append(a))  # deprecated in the pinned Streamlit
    at = _page(app, "attention")
    assert at.get("iframe"), "the head view is drawn"
    assert not legacy, "st.components.v1.html is deprecated (66 notices in the server log): st.iframe replaces it"


# --- shared links restore the view --------------------------------------------------------------

def test_attention_view_round_trips_through_the_url(fake_root, monkeypatch):
    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(fake_root))
    s1, s2 = "run:demo-run:s1_pretrain", "run:demo-run:s2_transfer-sov"
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.session_state["xlviz_models"] = [s1, s2]
    at.session_state["xlviz_languages"] = ["en", "sov"]
    at.run()
    _page(at, "attention")
    at.selectbox(key="att_model_a").set_value(s2).run()  # both sentences through the transferred model
    at.selectbox(key="att_model_b").set_value(s2).run()
    at.radio(key="att_mode").set_value("each alone").run()
    assert not at.exception
    view = {k: at.session_state[k] for k in ("att_model_a", "att_model_b", "att_mode", "att_l2", "att_source")}
    params = dict(at.query_params)
    assert {"att_model_a", "att_model_b", "att_mode", "att_l2", "xlviz_models"} <= set(params), params

    fresh = AppTest.from_file(APP, default_timeout=TIMEOUT)
    for k, v in params.items():
        fresh.query_params[k] = v
    fresh.run()
    _page(fresh, "attention")
    assert {k: fresh.session_state[k] for k in view} == view
    assert fresh.radio(key="att_mode").value == "each alone"


def test_a_typed_model_comes_back_from_the_url(fake_root, monkeypatch):
    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(fake_root))
    typed = str(fake_root / "demo-run" / "s1_pretrain")
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params["xlviz_models"] = json.dumps([f"path:{typed}"])
    at.run()
    assert not at.exception
    assert at.sidebar.multiselect(key="xlviz_models").value == [f"path:{typed}"]
    assert json.loads(at.query_params["xlviz_models"]) == [f"path:{typed}"], "the typed model stays in the URL"


def test_alignment_view_round_trips_through_the_url(fake_root, monkeypatch):
    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(fake_root))
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    _page(at, "alignment")
    systems = at.multiselect(key="al_systems")
    assert len(systems.value) >= 2, systems.value
    systems.set_value(systems.value[-1:]).run()  # one system, not the defaults
    at.selectbox(key="al_pooling").set_value("cls").run()
    at.toggle(key="al_center").set_value(True).run()
    at.number_input(key="al_max_len").set_value(64).run()
    at.slider(key="al_proj_layer").set_value(0).run()
    assert not at.exception, [e.message for e in at.exception]
    keys = ("al_source", "al_run", "al_l2", "al_systems", "al_pooling", "al_center", "al_max_len", "al_proj_layer")
    view = {k: at.session_state[k] for k in keys}
    params = dict(at.query_params)

    fresh = AppTest.from_file(APP, default_timeout=TIMEOUT)
    for k, v in params.items():
        fresh.query_params[k] = v
    fresh.run()
    _page(fresh, "alignment")
    assert {k: fresh.session_state[k] for k in keys} == view
