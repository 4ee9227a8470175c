"""The XQuAD page's "Why the L2 answer differs" under streamlit's AppTest, on the app fixture's
run (a generated world, tiny exported QA models): the question on the cards in every rendering,
with the answers and scores :mod:`xlviz.views.renderings` computes for it and a line in place
of the scores of a rendering the model cannot read; the patching heatmap and curve drawn from
the run's table (computed on the page's small limit, then read from the table the CLI stored)."""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[1] / "app.py")


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    from tests.app_fixtures import make_run

    root = tmp_path_factory.mktemp("why-l2") / "checkpoints"
    make_run(root, "demo-run")
    return root


def _xquad(root: Path, monkeypatch, state: dict) -> AppTest:
    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(root))
    at = AppTest.from_file(APP, default_timeout=180)
    at.run()
    at.switch_page("pages/xquad.py").run()
    for k, v in state.items():
        at.session_state[k] = v
    at.run()
    assert not at.exception and not at.error, ([e.message for e in at.exception], [e.value for e in at.error])
    return at


def _html(at: AppTest) -> str:
    return "\n".join(h.proto.body for h in at.get("html"))


def test_renderings_show_the_views_answers_and_say_which_cannot_be_scored(root, monkeypatch):
    from xlviz.views import renderings_of_question

    run = root / "demo-run"
    # a question one of whose renderings holds words the sov model's vocabulary lacks
    ids = [q["id"] for a in json.loads((run / "world" / "qa" / "test.sov.json").read_text())["data"]
           for p in a["paragraphs"] for q in p["qas"]]
    qid, view = next((q, v) for q in ids[:6] for v in [renderings_of_question(run, "sov", q)] if (v.rows["note"] != "").any())
    at = _xquad(root, monkeypatch, {"xq_pick": qid})
    assert any(e.label.startswith("Renderings") for e in at.get("expander"))
    assert 'class="xlviz-rendering"' not in _html(at)  # closed: nothing computed
    at.session_state["xq_rend"] = True
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    page = _html(at)
    assert page.count('class="xlviz-rendering"') == len(view.renderings)  # the crossings, then one feature at a time
    shown = next(d.value for d in at.dataframe if "rendering" in d.value.columns)
    got = {(r["rendering"], r["model"]): r for _, r in shown.iterrows()}
    want = {(r["rendering"], r["model"]): r for _, r in view.rows.iterrows()}
    assert set(got) == set(want) and len(want) == len(view.renderings)  # one system: a row per rendering
    for k, w in want.items():
        g = got[k]
        assert g["answer"] == w["answer"] and g["note"] == w["note"] and g["[UNK] %"] == pytest.approx(w["[UNK] %"])
        if w["note"]:  # not scorable: no number, the line instead (in the card too)
            assert g["F1"] != g["F1"] and g["EM"] != g["EM"]
            assert html.escape(w["note"]) in page and f"<i>not scored: {w['[UNK] %']:.0f}% [UNK]</i>" in page
        else:
            assert g["F1"] == pytest.approx(w["F1"]) and g["EM"] == pytest.approx(w["EM"])
    assert page.count('class="xlviz-rendering-unscored"') == sum(1 for w in want.values() if w["note"])
    assert page.count('class="xlviz-rendering-scored"') == sum(1 for w in want.values() if not w["note"])


def _figures(at: AppTest) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def _values(x) -> list:
    """A figure's array as drawn: plotly writes numpy arrays as typed arrays (base64 bytes);
    NaN becomes None."""
    import base64

    import numpy as np

    if isinstance(x, dict) and "bdata" in x:
        a = np.frombuffer(base64.b64decode(x["bdata"]), dtype=np.dtype(x["dtype"]))
        if "shape" in x:
            a = a.reshape([int(n) for n in str(x["shape"]).split(",")])
        x = a.tolist()
    return [_values(v) for v in x] if isinstance(x, list) and x and isinstance(x[0], list) else \
        [None if v is None or v != v else v for v in x]


def _matrix(rows: list[dict], system: str) -> list[list]:
    from xlviz.analysis.patching import GROUPS

    by = {(r["layer"], r["group"]): r["restored"] for r in rows if r["system"] == system}
    return [[by.get((layer, g)) for g in GROUPS] for layer in sorted({l for l, _ in by})]


def test_patching_draws_the_runs_table_computed_then_stored(root, monkeypatch):
    from xlviz.analysis.patching_report import compute
    from xlviz.cli import main as cli
    from xlviz.ui.patching_view import PAGE_LIMIT

    run = root / "demo-run"
    at = _xquad(root, monkeypatch, {"xq_patch": True})
    captions = "\n".join(c.value for c in at.caption)
    assert f"Computed here on the first {PAGE_LIMIT} test questions" in captions
    heat, curve = _figures(at)
    want = compute(run, "sov", ["monotrans"], PAGE_LIMIT)["rows"]
    assert heat["data"][0]["type"] == "heatmap" and _values(heat["data"][0]["z"]) == _matrix(want, "monotrans")
    assert _values(curve["data"][0]["y"]) == [r["restored"] for r in want if r["group"] == "all"]
    # the CLI stores a table: the page reads it (its numbers, not the page's)
    assert cli(["analyse", "patching", str(run), "--language", "sov", "--limit", "4", "--quiet"]) == 0
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert "Read from the run's stored table analyses/patching-" in "\n".join(c.value for c in at.caption)
    stored = next(json.loads(p.read_text()) for p in (run / "analyses").glob("patching-*.json"))
    heat, curve = _figures(at)
    assert _values(heat["data"][0]["z"]) == _matrix(stored["rows"], "monotrans") != _matrix(want, "monotrans")
    assert [d["name"] for d in curve["data"]] == ["monotrans"]
    assert _values(curve["data"][0]["error_y"]["array"]) == pytest.approx(
        [r["high"] - r["restored"] for r in stored["rows"] if r["group"] == "all"])


def test_a_shared_url_opens_the_why_views_as_they_were(root, monkeypatch):
    """The L2 and the open view are in the URL: a bookmark or a shared link reopens them."""
    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(root))
    at = AppTest.from_file(APP, default_timeout=180)
    at.run()
    at.switch_page("pages/xquad.py")
    at.query_params["xq_why_l2"] = "sov"
    at.query_params["xq_rend"] = "true"
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.session_state["xq_why_l2"] == "sov" and at.session_state["xq_rend"] is True
    assert 'class="xlviz-rendering"' in _html(at)  # opened: computed and drawn
    assert at.query_params["xq_rend"] == ["true"] or at.query_params["xq_rend"] == "true"
    # closing it writes the URL back
    at.session_state["xq_rend"] = False
    at.run()
    assert 'class="xlviz-rendering"' not in _html(at)
    assert at.query_params["xq_rend"] in ("false", ["false"])
