"""The embeddings projector: shared PCA, cosine neighbours, literal search, widths, the notebook API.

Toy values are computed by hand in the comments; the notebook API runs on a tiny analysis run
(no training) and is checked against the package's own sentence vectors.
"""

from __future__ import annotations

import numpy as np
import pytest

from xlviz.analysis.projection import cosine_neighbours, same_width, search_mask, shared_projection
from xlviz.errors import XlvizError
from xlviz.views import embeddings as vp


# --- shared PCA ---------------------------------------------------------------------------------------------
def test_shared_pca_is_fitted_on_the_union_of_the_blocks():
    # A spreads along x (±1), B along y (±2), all at z = 5. The union's mean is (0, 0, 5); its
    # largest variance is along y (8 vs 2), so PC 1 = y and PC 2 = x (signs: largest loading
    # positive). Hence A -> (0, ±1) and B -> (±2, 0).
    A = np.array([[1.0, 0, 5], [-1, 0, 5]])
    B = np.array([[0.0, 2, 5], [0, -2, 5]])
    pa, pb = shared_projection([A, B], ["A", "B"])
    assert pa.shape == (2, 2) and pb.shape == (2, 2)
    np.testing.assert_allclose(pa, [[0, 1], [0, -1]], atol=1e-6)
    np.testing.assert_allclose(pb, [[2, 0], [-2, 0]], atol=1e-6)
    # fitted on A alone, A's own first axis would be x: the shared space is not per block
    (alone,) = shared_projection([A])
    np.testing.assert_allclose(alone, [[1, 0], [-1, 0]], atol=1e-6)
    # the axes' shares of the variance: sums of squares 8 (y) and 2 (x) of 10
    proj = vp.build([vp.Block("A", "en", "a", ["a", "b"], A), vp.Block("B", "en", "a", ["a", "b"], B)])
    assert proj.axes == ("PC 1 (80.0% of variance)", "PC 2 (20.0%)")
    assert [(r["x"], r["y"]) for r in proj.rows] == [(0, 1), (0, -1), (2, 0), (-2, 0)]


def test_a_block_of_another_width_gets_one_clear_message():
    with pytest.raises(XlvizError, match=r"one width: A has 3, B has 2; compare systems of the same hidden size"):
        shared_projection([np.ones((2, 3)), np.ones((2, 2))], ["A", "B"])
    assert same_width({"x": 3, "y": 2, "z": 3}) == (3, ["x", "z"], ["y"])
    with pytest.raises(XlvizError, match="no vectors"):
        same_width({})


def test_build_leaves_out_a_system_of_another_width_and_names_it():
    blocks = [vp.Block("s1", "en", "a", ["a", "b", "c"], np.eye(3)),
              vp.Block("s1", "sov", "b", ["x", "y", "z"], np.eye(3)[::-1]),
              vp.Block("wide", "en", "a", ["a", "b", "c"], np.ones((3, 5)))]
    proj = vp.build(blocks)
    assert proj.left_out == ["wide · en"]
    assert len(proj.rows) == 6 and {r["system"] for r in proj.rows} == {"s1"}
    assert proj.vectors.shape == (6, 3)


# --- nearest neighbours ------------------------------------------------------------------------------------
TOY = np.array([[1.0, 0], [1, 1], [0, 1], [-1, 0], [2, 0], [3, 0], [0, 0]])


def test_cosine_neighbours_ranking_on_a_toy():
    # cosines with point 0 = (1, 0): 1 -> 1/sqrt(2), 2 -> 0, 3 -> -1, 4 -> 1, 5 -> 1, 6 (zero) -> 0
    idx, sims = cosine_neighbours(TOY, 0)
    assert idx.tolist() == [4, 5, 1, 2, 6, 3]  # ties (4, 5) and (2, 6) in index order; 0 is not its own neighbour
    np.testing.assert_allclose(sims, [1, 1, 1 / np.sqrt(2), 0, 0, -1], atol=1e-12)
    idx, _ = cosine_neighbours(TOY, 0, k=2)
    assert idx.tolist() == [4, 5]
    idx, sims = cosine_neighbours(TOY, 2, k=3, among=[0, 1, 3])  # (0, 1): 0 -> 0, 1 -> 1/sqrt(2), 3 -> 0
    assert idx.tolist() == [1, 0, 3]
    mask = np.array([False, True, True, False, False, False, False])
    assert cosine_neighbours(TOY, 0, among=mask)[0].tolist() == [1, 2]
    with pytest.raises(XlvizError, match="no point 9"):
        cosine_neighbours(TOY, 9)


def test_neighbours_use_the_original_vectors_not_the_picture():
    # the third coordinate carries little variance (PCA drops it) but decides the cosine:
    # in 2-D, sentence 1 of side b sits right on sentence 0 of side a; in 3-D it is far
    a = np.array([[10.0, 0, 1], [0, 10, 1], [-10, 0, 1]])
    b = np.array([[10.0, 0, -1], [10, 0, 1.2], [-10, 0, -1]])
    proj = vp.build([vp.Block("s", "en", "a", ["a0", "a1", "a2"], a), vp.Block("s", "sov", "b", ["b0", "b1", "b2"], b)])
    rows = vp.neighbours(proj, 0, k=2)
    # cos(a0, b1) = (100 + 1.2) / (sqrt(101) * sqrt(101.44)); cos(a0, b0) = 99 / 101
    assert [(r["language"], r["sentence"]) for r in rows] == [("sov", 1), ("sov", 0)]
    assert rows[0]["cosine"] == pytest.approx(101.2 / np.sqrt(101 * 101.44))
    assert rows[1]["cosine"] == pytest.approx(99 / 101)
    assert [r["translation"] for r in rows] == [False, True]  # b0 translates a0
    assert vp.translation_rank(proj, 0) == (2, 5, pytest.approx(99 / 101))


def test_neighbours_among_the_same_system_or_all_and_the_true_translation():
    v = np.array([[1.0, 0], [0, 1]])
    blocks = [vp.Block("s1", "en", "a", ["x", "y"], v), vp.Block("s1", "de", "b", ["X", "Y"], v + [0, 0.1]),
              vp.Block("s2", "en", "a", ["x", "y"], v), vp.Block("s2", "de", "b", ["X", "Y"], v * 2)]
    proj = vp.build(blocks)
    own = vp.neighbours(proj, 0, k=None, among="system")
    assert {r["system"] for r in own} == {"s1"} and len(own) == 3
    assert own[0]["translation"] and (own[0]["language"], own[0]["sentence"]) == ("de", 0)
    everyone = vp.neighbours(proj, 0, k=None, among="all")
    assert len(everyone) == 7
    # s2's x and X point the same way as s1's x (cosine 1) but are not s1's translation
    assert [r["translation"] for r in everyone].count(True) == 1
    top = [(r["system"], r["language"]) for r in everyone if r["cosine"] == pytest.approx(1.0)]
    assert top == [("s2", "en"), ("s2", "de")]
    with pytest.raises(XlvizError, match="unknown choice"):
        vp.neighbours(proj, 0, among="nope")


# --- search --------------------------------------------------------------------------------------------------
def test_search_is_case_insensitive_and_literal():
    texts = ["The cat.", "a CAT sat", "dog", "c.t", "1+1=2", "(a)", "x[y"]
    assert search_mask(texts, "cat").tolist() == [True, True, False, False, False, False, False]
    assert search_mask(texts, "c.t").tolist() == [False, False, False, True, False, False, False]  # "." is a dot
    assert search_mask(texts, "1+1").tolist() == [False, False, False, False, True, False, False]
    assert search_mask(texts, "(").tolist() == [False] * 5 + [True, False]
    assert search_mask(texts, "[").tolist() == [False] * 6 + [True]  # an invalid pattern, searched as text
    assert search_mask(texts, ".*").tolist() == [False] * 7
    assert not search_mask(texts, "").any() and not search_mask(texts, "   ").any()


def test_search_marks_points_and_the_figure_rings_them():
    blocks = [vp.Block("s", "en", "a", ["the <b>cat</b>", "a dog"], np.eye(2)),
              vp.Block("s", "sov", "b", ["cat the", "dog a"], np.eye(2)[::-1])]
    proj = vp.search(vp.build(blocks), "CAT")
    assert proj.matches == [0, 2]
    fig = vp.figure(proj, {"s": "#123456"}, "t", selected=1, near=[3])
    names = [t.name for t in fig.data]
    assert "contains “CAT” (2)" in names and "selected" in names and "nearest neighbours" in names
    ring = next(t for t in fig.data if t.name.startswith("contains"))
    assert list(ring.customdata) == [0, 2]
    # hover shows the sentence as text: markup is escaped, not rendered
    assert any("the &lt;b&gt;cat&lt;/b&gt;" in h for t in fig.data for h in (t.text or ()))
    base = [t for t in fig.data if t.name in ("s · en", "s · sov")]
    assert [t.marker.symbol for t in base] == ["circle", "diamond"] and {t.marker.color for t in base} == {"#123456"}


def test_clicked_point_reads_customdata():
    assert vp.clicked_point({"points": [{"curve_number": 2, "point_index": 0, "customdata": [7]}]}) == 7
    assert vp.clicked_point({"points": [{"customdata": 3}]}) == 3
    assert vp.clicked_point({"points": []}) is None and vp.clicked_point(None) is None


def test_projector_views_import_without_streamlit():
    """A notebook without Streamlit draws the projector (nothing under xlviz.views imports it)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = ("import sys; sys.modules['streamlit'] = None\n"
            "import numpy as np, xlviz.views as xv, xlviz.views.embeddings as vp\n"
            "p = vp.build([vp.Block('s', 'en', 'a', ['x', 'y', 'z'], np.eye(3)), vp.Block('s', 'de', 'b', ['X', 'Y', 'Z'], np.eye(3))])\n"
            "f = vp.figure(vp.search(p, 'x'), None, 't', selected=0, near=vp.neighbour_points(p, 0, 2))\n"
            "assert callable(xv.projector) and len(f.data) >= 4\n"
            "print('ok')\n")
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", code], cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


# --- the notebook API ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def analysis_run(tmp_path_factory):
    from tests.analysis_fixtures import make_analysis_run

    return make_analysis_run(tmp_path_factory.mktemp("projector") / "checkpoints", "demo-run")


def test_notebook_projector_on_a_run(analysis_run):
    import xlviz.views as xv
    from tests.analysis_fixtures import L2
    from xlviz.analysis.reports import parallel_data, run_systems
    from xlviz.models.reference import load_spec
    from xlviz.analysis.representations import sentence_embeddings

    view = xv.projector(analysis_run, L2, query="THE", k=4, n=6)
    assert "projector" in xv.__all__ and "ProjectorView" in xv.__all__
    pts = view.points
    assert len(pts) == 2 * 2 * 6 and set(pts["system"]) == {"demo-run · transferred", "demo-run · floor"}
    assert pts["match"].tolist() == [("the" in t.lower()) for t in pts["text"]] and pts["match"].any()
    assert len(view.neighbours) == 4 and view.neighbours["translation"].sum() <= 1
    # the cosines are those of the package's own vectors at the last layer
    s = run_systems(analysis_run, L2)[0]
    data = parallel_data("world", run_dir=str(analysis_run), l2=L2, lang_b=L2, limit=6)
    ea = sentence_embeddings(*load_spec(s.a), data.src, pooling="mean", max_length=128)[-1]
    eb = sentence_embeddings(*load_spec(s.b), data.tgt, pooling="mean", max_length=128)[-1]
    both = np.vstack([ea, eb])
    cos = both @ both[0] / (np.linalg.norm(both, axis=1) * np.linalg.norm(both[0]))
    best = int(np.argsort(-cos[1:], kind="stable")[0]) + 1
    first = view.neighbours.iloc[0]
    assert first["cosine"] == pytest.approx(cos[best], abs=1e-5)
    assert (first["language"], first["sentence"]) == (("en", best) if best < 6 else (L2, best - 6))
    # another point by (system, language, sentence)
    other = view.neighbours_of(("floor", L2, 2), k=3)
    assert len(other) == 3 and set(other["system"]) == {"demo-run · floor"}
    fig_names = [t.name for t in view.figure.data]
    assert any(n.startswith("contains “THE”") for n in fig_names) and "selected" in fig_names
    with pytest.raises(XlvizError, match="no layer 99"):
        xv.projector(analysis_run, L2, layer=99, n=4)


def test_notebook_projector_with_models_and_sentences(analysis_run):
    import xlviz.views as xv
    from tests.analysis_fixtures import L2

    l1 = analysis_run / "s1_pretrain"
    l2 = analysis_run / "s2_transfer-sov"
    view = xv.projector({"mine": (str(l1), str(l2))}, L2, sentences=(["the cat", "a dog"], ["cat the", "dog a"]),
                        point=("mine", "en", 1), k=3)
    assert view.point == 1 and view.neighbours["system"].tolist() == ["mine"] * 3
    assert view.points["language"].tolist() == ["en", "en", L2, L2]
    with pytest.raises(XlvizError, match="sentences="):
        xv.projector({"mine": str(l1)}, L2)


# --- the Alignment page (AppTest) ----------------------------------------------------------------------------
def _alignment(root, monkeypatch, query: dict | None = None):
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(root))
    monkeypatch.delenv("XLVIZ_SHARED_DATA", raising=False)
    at = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "app.py"), default_timeout=240)
    at.run()
    if query:
        at.query_params.update(query)
    at.switch_page("pages/alignment.py").run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def _projector_fig(at) -> dict:
    import json

    return json.loads(next(e for e in at.get("plotly_chart") if e.key == "al_fig_projector").proto.spec)


def _neighbour_table(at):
    return next(d.value for d in at.dataframe if "translation" in d.value.columns)


def test_alignment_projector_two_systems_and_a_search(analysis_run, monkeypatch):
    at = _alignment(analysis_run.parent, monkeypatch)
    assert "al_fig_projector" not in [e.key for e in at.get("plotly_chart")]  # off until asked for: no cost
    at.toggle(key="al_pj_on").set_value(True).run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.multiselect(key="al_pj_systems").value == ["run:demo-run:transferred", "run:demo-run:floor"]
    spec = _projector_fig(at)
    shown = {t["name"] for t in spec["data"] if t.get("mode") == "markers"}
    assert {"demo-run · transferred · en", "demo-run · transferred · sov", "demo-run · floor · en",
            "demo-run · floor · sov", "selected", "nearest neighbours"} <= shown
    n_pts = sum(len(t["x"]) for t in spec["data"] if t["name"].startswith("demo-run"))
    assert n_pts == 2 * 2 * 12  # 12 pairs of the tiny run, both languages, both systems
    table = _neighbour_table(at)
    assert len(table) == 10 and set(table["system"]) == {"demo-run · transferred"}  # the first point's own system
    assert table["cosine"].is_monotonic_decreasing
    at.text_input(key="al_pj_query").input("THE").run()
    assert not at.exception, [e.message for e in at.exception]
    ring = next(t for t in _projector_fig(at)["data"] if t["name"].startswith("contains"))
    caption = next(c.value for c in at.caption if "points contain" in c.value)
    assert caption.startswith(f"{len(ring['x'])} of {n_pts} points contain") and len(ring["x"]) > 0
    # pick another point: its neighbours, and the URL holds the whole view
    at.selectbox(key="al_pj_point").set_value("run:demo-run:floor|b|3").run()
    table = _neighbour_table(at)
    assert set(table["system"]) == {"demo-run · floor"} and table["translation"].sum() <= 1
    at.radio(key="al_pj_among").set_value("all").run()
    assert set(_neighbour_table(at)["system"]) <= {"demo-run · floor", "demo-run · transferred"}
    at.slider(key="al_pj_layer").set_value(1).run()
    assert "layer 1 · PCA of sentences" in _projector_fig(at)["layout"]["title"]["text"]
    url = {k: at.query_params[k] for k in ("al_pj_on", "al_pj_systems", "al_pj_layer", "al_pj_query", "al_pj_point",
                                           "al_pj_among")}
    flat = {k: v[0] if isinstance(v, list) else v for k, v in url.items()}
    assert flat["al_pj_query"] == "THE" and flat["al_pj_point"] == "run:demo-run:floor|b|3" and flat["al_pj_layer"] == "1"

    # the URL reopens the same view (a bookmark, a shared link)
    again = _alignment(analysis_run.parent, monkeypatch, flat)
    assert again.toggle(key="al_pj_on").value is True and again.text_input(key="al_pj_query").value == "THE"
    assert again.selectbox(key="al_pj_point").value == "run:demo-run:floor|b|3"
    assert again.slider(key="al_pj_layer").value == 1 and again.radio(key="al_pj_among").value == "all"
    assert any(t["name"].startswith("contains “THE”") for t in _projector_fig(again)["data"])


def test_alignment_projector_survives_odd_url_values(analysis_run, monkeypatch):
    at = _alignment(analysis_run.parent, monkeypatch, {"al_pj_on": "true", "al_pj_query": "3", "al_pj_layer": "abc",
                                                       "al_pj_point": "nope|a|0", "al_pj_systems": '["gone"]',
                                                       "al_pj_k": "abc"})
    assert at.toggle(key="al_pj_on").value is True
    assert at.text_input(key="al_pj_query").value == "3"  # a number in the URL is still a search text
    assert at.selectbox(key="al_pj_point").value == "run:demo-run:transferred|a|0"  # unknown point: the first
    assert at.multiselect(key="al_pj_systems").value == ["run:demo-run:transferred", "run:demo-run:floor"]
    assert len(_neighbour_table(at)) == 10
    assert "URL parameter 'al_pj_k' must be a whole number" in "\n".join(w.value for w in at.warning)
    long = _alignment(analysis_run.parent, monkeypatch, {"al_pj_on": "true", "al_pj_query": "(x" * 150})
    assert long.text_input(key="al_pj_query").value == ("(x" * 150)[:200]  # cut to the box's 200 characters
    assert not any("points contain" in c.value and not c.value.startswith("0 of") for c in long.caption)
