"""xlviz.views (the notebook API): no Streamlit, the pages' figures, the example notebook
executed on a tiny run, and one scoring function for the XQuAD cards and tables."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_methods import TINY
from xlviz.cli import main as cli
from xlviz.runs import Run

ROOT = Path(__file__).resolve().parents[1]
L2 = "sov"


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    """A finished tiny bench run (MONOTRANS, floor, dictionary oracle; about 15 s)."""
    root = tmp_path_factory.mktemp("views")
    config = root / "tiny.json"
    config.write_text(json.dumps(TINY))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XLVIZ_CHECKPOINTS", str(root))  # the CLI confines run folders to the checkpoints root
        assert cli(["transfer", "--config", str(config), "--run-dir", str(root / "run")]) == 0
    return root / "run"


def test_views_import_and_draw_without_streamlit():
    """The notebook API, every module under xlviz/views and everything they import load with
    Streamlit blocked (a notebook without it installed), none reaches xlviz.ui, and the figure
    functions draw."""
    code = (
        "import sys; sys.modules['streamlit'] = None\n"
        "import importlib, pkgutil\n"
        "import xlviz.views as xv, xlviz.views.figures as vf\n"
        "names = [m.name for m in pkgutil.iter_modules(xv.__path__)]\n"
        "assert {'attention', 'qa', 'xquad', 'runs', 'sweeps', 'export'} <= set(names), names\n"
        "for name in names: importlib.import_module('xlviz.views.' + name)\n"
        "assert not [m for m in sys.modules if m.startswith('xlviz.ui')], 'a view imported xlviz.ui'\n"
        "rows = [{'system': 's', 'layer': l, 'retrieval_a_to_b': 0.5, 'retrieval_b_to_a': 0.25, 'cka': 0.1} for l in range(3)]\n"
        "f = vf.retrieval_figure(vf.retrieval_long(rows, 'en', 'sov'))\n"
        "assert len(f.data) == 2 and list(f.data[0].y) == [50.0] * 3, f.data\n"
        "assert all(xv.__dict__[n].__doc__ for n in xv.__all__)\n"
        "print('ok')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_pages_draw_through_xlviz_views():
    """One code path: the figure functions the pages reach through xlviz.ui are xlviz.views'."""
    import xlviz.views.figures as vf
    from xlviz.ui import analysis as ua
    from xlviz.ui import common

    assert ua.layer_lines is vf.layer_lines and ua.projection_figure is vf.projection_figure
    assert common.tidy is vf.tidy
    for page in ("alignment", "xquad"):
        assert "xlviz.views" in (ROOT / "pages" / f"{page}.py").read_text(encoding="utf-8")


def test_xquad_comparison_scores_as_results_json(tiny_run):
    """The notebook's XQuAD tables are the run's results.json numbers (its saved predictions,
    scored with each language's own articles)."""
    import xlviz.views as xv

    comp = xv.xquad_comparison(tiny_run, L2)
    results = {(r["system"], r["language"]): r for r in Run(tiny_run).results()}
    checked = 0
    for system in comp.f1.index:
        for lang in ("en", L2):
            r = results[(system, lang)]
            cell = comp.rows[(comp.rows["model"] == system) & (comp.rows["language"] == lang)]
            assert cell["f1"].mean() == pytest.approx(r["f1"], abs=1e-3)
            assert cell["exact_match"].mean() == pytest.approx(r["exact_match"], abs=1e-3)
            assert comp.f1.loc[system, lang] == pytest.approx(r["f1"], abs=0.05)  # the table shows one decimal
            checked += 1
    assert checked >= 4
    card = comp.card(comp.ids[0])
    assert card.count('class="xlviz-qa"') == 2 and "xlviz-answers" in card


def test_views_figures_from_a_run(tiny_run):
    import xlviz.views as xv

    enc = tiny_run / "encoders" / "monotrans-en"
    html = xv.head_view(enc, "the cat", "the dog")
    assert html._repr_html_().startswith("<svg") and "data-q" in html
    mv = xv.model_view(enc, "the cat")
    n_layers = json.loads((enc / "config.json").read_text())["num_hidden_layers"]
    n_heads = json.loads((enc / "config.json").read_text())["num_attention_heads"]
    # every layer × head: a tile of the one heatmap and a click target each
    tiles = [t for t in mv.data if t.type == "heatmap"][0].meta["tiles"]
    assert sorted((t["layer"], t["head"]) for t in tiles) == [(l, h) for l in range(n_layers) for h in range(n_heads)]
    assert sorted(tuple(c) for t in mv.data if t.type == "scatter" for c in t.customdata) == sorted(
        (t["layer"], t["head"]) for t in tiles)
    ret = xv.retrieval(tiny_run, L2, systems=["monotrans", "floor"])
    assert sorted({t.name.split(",")[0] for t in ret.data}) == ["run · floor", "run · monotrans"]
    assert all(len(t.y) == n_layers + 1 for t in ret.data)  # embeddings + every layer
    proj = xv.projection(tiny_run, L2, "monotrans", n=10)
    assert sum(len(t.x) for t in proj.data if t.mode == "markers") == 20
    with pytest.raises(Exception, match="no system 'nope'"):
        xv.cka(tiny_run, L2, systems=["nope"])


def test_example_notebook_runs_and_shows_the_figures(tiny_run):
    """examples/quickstart.ipynb executed on the tiny run: its plotly figures and HTML views are
    in the executed output, and no cell failed."""
    import nbclient
    import nbformat

    nb = nbformat.read(ROOT / "examples" / "quickstart.ipynb", as_version=4)
    old = {k: os.environ.get(k) for k in ("XLVIZ_EXAMPLE_RUN", "PYTHONPATH")}
    os.environ["XLVIZ_EXAMPLE_RUN"] = str(tiny_run)
    os.environ["PYTHONPATH"] = str(ROOT)  # the kernel imports this tree's xlviz
    try:
        nbclient.NotebookClient(nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}).execute()
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    plotly = [o for o in outputs if "application/vnd.plotly.v1+json" in o.get("data", {})]
    assert len(plotly) >= 5  # model view, cross-language share, retrieval, CKA, projection
    titles = {o["data"]["application/vnd.plotly.v1+json"]["layout"].get("title", {}).get("text") for o in plotly}
    assert "Linear CKA between the two languages' sentence vectors" in titles
    html = "\n".join(o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {}))
    assert "<svg" in html and "data-q" in html  # the head view
    assert "xlviz-answers" in html and re.search(r"<b>F1 \(%\)</b>", html)  # XQuAD tables and a card


def test_question_card_scores_like_the_table():
    """A card's EM/F1 are the table's (the language's articles stripped), not the official
    v1.1 normalisation: an L2 answer that differs from the gold by the L2's article."""
    from xlviz.data.squad import QAExample
    from xlviz.views.qa import prediction_rows
    from xlviz.views.xquad import question_card

    ex = QAExample("q1", "t", "ka dog saw ka cat", "who saw?", [{"text": "ka dog", "answer_start": 0}])
    preds = {("m", L2): {"q1": {"text": "dog", "start": 3, "end": 6}}}
    rows = prediction_rows({L2: [ex]}, preds, ["q1"], articles={L2: ["ka"]})
    card = question_card(L2, ex, [("m", preds[("m", L2)]["q1"])], {"m": "#123456"}, ["ka"])
    cells = re.findall(r"<td style='text-align:right'>([0-9.]+)</td>", card)
    assert [float(c) for c in cells] == [rows.loc[0, "exact_match"], rows.loc[0, "f1"]] == [100.0, 100.0]
    v11 = question_card(L2, ex, [("m", preds[("m", L2)]["q1"])], {"m": "#123456"}, None)
    assert re.findall(r"<td style='text-align:right'>([0-9]+)</td>", v11)[0] == "0"  # what the card showed before


def test_xquad_page_card_scores_like_its_table(tiny_run, monkeypatch):
    """On the XQuAD page, an L2 question whose answer differs from the gold only by the L2's
    own articles shows the table's EM/F1 on its card (before: the official v1.1 numbers)."""
    from streamlit.testing.v1 import AppTest

    from xlviz.data.squad import language_articles, load_squad, read_squad_json
    from xlviz.views.qa import prediction_rows, read_saved_predictions

    file = tiny_run / "world" / "qa" / f"test.{L2}.json"
    examples = {L2: load_squad(file)}
    ids = [e.id for e in examples[L2]]
    preds = {("monotrans", L2): read_saved_predictions(tiny_run / "predictions" / f"monotrans-{L2}.json", ids)}
    own = prediction_rows(examples, preds, ids, articles={L2: language_articles(read_squad_json(file), file)})
    v11 = prediction_rows(examples, preds, ids)
    differ = own[(own["f1"] != v11["f1"]) | (own["exact_match"] != v11["exact_match"])]
    if differ.empty:
        pytest.skip("no question of this run scores differently with the L2's articles")
    row = differ.iloc[0]
    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(tiny_run.parent))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.session_state["xlviz_models"] = [f"run:{tiny_run.name}:export:monotrans"]
    at.session_state["xlviz_languages"] = ["en", L2]
    at.session_state["xq_source"] = f"run:{tiny_run.name}"
    at.session_state["xq_pick"] = row["id"]
    at.run()
    at.switch_page("pages/xquad.py").run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.selectbox(key="xq_pick").value == row["id"]
    card = next(h.proto.body for h in at.get("html") if f'data-lang="{L2}"' in h.proto.body)
    em, f1 = re.findall(r"<td style='text-align:right'>([0-9.]+)</td>", card)[:2]
    assert (em, f1) == (f"{row['exact_match']:.0f}", f"{row['f1']:.1f}"), "F1 with the per-question table's one decimal"
