"""The Attention page's Renderings tab under AppTest, on the fake run of tests/app_fixtures.py:
a fact in every rendering, the attention shown equals the package's for that rendering's words,
and a rendering the picked model cannot read says so."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from tests.app_fixtures import charts, heat_values, layer_rows

APP = str(Path(__file__).resolve().parents[1] / "app.py")
RUN = "demo-run"
MONOTRANS = f"run:{RUN}:export:monotrans"
SOV_ENCODER = f"run:{RUN}:s2_transfer-sov"


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    from tests.app_fixtures import make_run

    root = tmp_path_factory.mktemp("app-renderings") / "checkpoints"
    make_run(root, RUN)
    return root


def _tab(root: Path, monkeypatch, models: list[str], **state) -> AppTest:
    """The Attention page opened on its Renderings tab with ``models`` picked and ``state`` set."""
    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(root))
    at = AppTest.from_file(APP, default_timeout=120)
    at.session_state["xlviz_models"] = models
    at.run()
    at.session_state["att_tab"] = "Renderings"
    for key, value in state.items():
        at.session_state[key] = value
    at.switch_page("pages/attention.py").run()
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def _world(root: Path):
    from xlviz.data.world import load_world

    return load_world(root / RUN / "world")


def test_the_tab_lists_a_fact_in_every_rendering(root, monkeypatch):
    from xlviz.views.renderings import fact_renderings, facts_of

    at = _tab(root, monkeypatch, [MONOTRANS])
    world = _world(root)
    facts = facts_of(world)
    assert at.selectbox(key="att_r_fact").options[0].startswith(facts[0].id)
    assert len(at.selectbox(key="att_r_fact").options) == len(facts)
    expected = fact_renderings(world, "sov", facts[0])
    table = next(d.value for d in at.dataframe if "rendering" in d.value.columns)
    assert list(table["sentence"]) == [r.text for r in expected]
    labels = list(table["rendering"])
    assert labels[:4] == ["English", "sov words, English order", "English words, sov order", "sov"]
    assert "English, only word_order = sov" in labels and "English, only adposition = post" in labels
    # MONOTRANS reads English words with its English export and sov words with its sov export
    assert set(table["read by"]) == {"monotrans"}
    # a question about the fact instead of its statement
    target = facts[0].questions[0].target
    at.selectbox(key="att_r_item").set_value(target).run()
    table = next(d.value for d in at.dataframe if "rendering" in d.value.columns)
    assert list(table["sentence"]) == [r.text for r in fact_renderings(world, "sov", facts[0], target)]
    assert table["sentence"][0].endswith("?")
    assert at.query_params["att_r_item"] == target and at.query_params["att_tab"] == "Renderings"
    # the tab's choices outlive a visit to the Pair tab (its widgets are not drawn meanwhile)
    at.selectbox(key="att_r_rendering").set_value("adposition").run()
    at.session_state["att_tab"] = "Pair"
    at.run()
    assert "att_r_rendering" not in [s.key for s in at.selectbox] and at.query_params["att_r_rendering"] == "adposition"
    at.session_state["att_tab"] = "Renderings"
    at.run()
    assert at.selectbox(key="att_r_rendering").value == "adposition" and at.selectbox(key="att_r_item").value == target


def test_the_attention_shown_is_the_packages_for_that_rendering(root, monkeypatch):
    from xlviz.analysis.attention import attention_maps, attention_slice
    from xlviz.analysis.reports import ModelSpec, load_spec
    from xlviz.views.renderings import fact_renderings, facts_of

    at = _tab(root, monkeypatch, [MONOTRANS], att_r_rendering="word_order", att_r_head=1)
    assert at.selectbox(key="att_r_model").value == MONOTRANS
    world = _world(root)
    r = next(x for x in fact_renderings(world, "sov", facts_of(world)[0]) if x.name == "word_order")
    model, tok = load_spec(ModelSpec(str(root / RUN / "export" / "monotrans-en")), "base", attn_implementation="eager")
    res = attention_maps(model, tok, r.words, None, max_length=64)  # the tiny model's positions
    want = attention_slice(res, layers=[res.n_layers - 1], heads=[1], hide_special=True).attentions[0, 0]
    np.testing.assert_allclose(heat_values(charts(at)["att_r_heat"]), want, rtol=1e-4, atol=1e-5)  # as drawn: 5 decimals
    # the gold alignment English <-> this rendering is drawn, one line per aligned word
    svg = next(f.proto.srcdoc for f in at.get("iframe") if "English</text>" in f.proto.srcdoc)
    assert svg.count("<line") == len(r.alignment) and r.alignment
    # fed with English as one pair, the alignment's cells are outlined on the map
    at.radio(key="att_r_mode").set_value("with English as one pair").run()
    assert not at.exception and not at.error
    outlines = layer_rows(charts(at)["att_r_heat"], "rect", stroke="#009E73")
    assert len(outlines) >= 2 * len(r.alignment)
    assert "Share of attention an aligned word gives its partner" in "\n".join(c.value for c in at.caption)


def test_a_rendering_the_model_cannot_read_shows_the_readability_line(root, monkeypatch):
    at = _tab(root, monkeypatch, [SOV_ENCODER], att_r_rendering="word_order")
    warnings = "\n".join(w.value for w in at.warning)
    assert "English, only word_order = sov: Not readable by sov encoder's tokenizer" in warnings
    table = next(d.value for d in at.dataframe if "rendering" in d.value.columns)
    read_by = dict(zip(table["rendering"], table["read by"]))
    assert read_by["sov"] == "sov encoder" and read_by["English"] == "none of the picked models"
    # its own language reads: a caption, no warning
    at.selectbox(key="att_r_rendering").set_value("l2").run()
    assert not at.warning and "sov: Readable by sov encoder's tokenizer" in "\n".join(c.value for c in at.caption)
    # English beside it would go through the same tokenizer, which cannot read English: not offered
    assert at.radio(key="att_r_mode").options == ["the rendering alone"]
