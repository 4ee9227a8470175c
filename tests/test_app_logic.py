"""The app's logic without a browser: data set discovery, decoding as the run did, the
``xlviz app`` launcher and its Streamlit config, loss curves across a resume, run comparison."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from xlviz.runs import Run

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def run_root(tmp_path_factory) -> Path:
    from tests.app_fixtures import make_run

    root = tmp_path_factory.mktemp("logic") / "checkpoints"
    make_run(root, "demo-run")
    return root


# --- XQuAD data and decoding ---------------------------------------------------------------------

def test_generated_test_set_keeps_english_beside_train_file(run_root):
    from xlviz.views.choices import discover_qa_datasets

    qa = run_root / "demo-run" / "world" / "qa"
    assert (qa / "train.en.json").is_file()  # sorts after test.en.json: it used to take en's place
    ds = {d.key: d for d in discover_qa_datasets(run_root)}["run:demo-run"]
    assert ds.languages() == ["en", "sov"]
    assert Path(ds.file("en")).name == "test.en.json"


def test_run_models_decode_with_the_runs_settings(run_root, tmp_path):
    from xlviz.views.qa import run_decoding

    dec = run_decoding(run_root / "demo-run" / "export" / "monotrans-sov")
    assert (dec.max_length, dec.doc_stride, dec.max_answer_length) == (48, 24, 6)
    assert "demo-run" in dec.source
    other = run_decoding(tmp_path / "some-model", max_positions=128)  # not a run's: SQuAD's, capped
    assert (other.max_length, other.doc_stride, other.max_answer_length) == (128, 42, 30)


def test_saved_predictions_only_for_the_runs_own_model_and_data(run_root, tmp_path):
    from tests.app_fixtures import make_qa_folder
    from xlviz.views.qa import read_saved_predictions, saved_predictions_file

    run = run_root / "demo-run"
    own = saved_predictions_file(run / "export" / "monotrans-en", run / "world" / "qa" / "test.en.json")
    assert own == run / "predictions" / "monotrans-en.json"
    assert saved_predictions_file(run / "export" / "monotrans-en", run / "world" / "qa" / "test.sov.json") is None
    assert saved_predictions_file(run / "export" / "monotrans-en", make_qa_folder(tmp_path) / "xquad.en.json") is None
    preds = read_saved_predictions(own, ["nope"] + list(__import__("json").loads(own.read_text()))[:2])
    assert len(preds) == 2 and all(set(p) == {"text", "start", "end", "score"} for p in preds.values())


def test_model_digest_is_equal_for_copies_only(run_root, tmp_path):
    from xlviz.views.qa import model_digest

    export = run_root / "demo-run" / "export"
    copy = shutil.copytree(export / "monotrans-en", tmp_path / "copy-en")
    assert model_digest(copy) == model_digest(export / "monotrans-en")
    assert model_digest(export / "monotrans-sov") != model_digest(export / "monotrans-en")
    assert model_digest(tmp_path / "missing") is None
    # weights in a format or file name the digest used to skip (pytorch_model.bin, shards) count too
    other = shutil.copytree(export / "monotrans-en", tmp_path / "other-en")
    (other / "pytorch_model.bin").write_bytes(b"other weights")
    assert model_digest(other) != model_digest(copy)


def test_identical_model_folders_are_loaded_and_encoded_once(run_root, tmp_path, monkeypatch):
    """A run exports the same English encoder once per system: the Alignment page loads it and
    encodes each sentence once for all of them (byte-identical folders), never for another model."""
    from xlviz.analysis import representations
    from xlviz.models.reference import ModelSpec
    from xlviz.ui import analysis as ua

    export = run_root / "demo-run" / "export"
    first = shutil.copytree(export / "monotrans-en", tmp_path / "first-en")
    copy = shutil.copytree(export / "monotrans-en", tmp_path / "copy-en")
    other = export / "monotrans-sov"
    a, b, c = ModelSpec(str(first)), ModelSpec(str(copy)), ModelSpec(str(other))
    assert ua._args(a)[0] == str(first) and ua._args(b) == ua._args(a) and ua._args(c)[0] == str(other)
    calls = []
    real = representations.sentence_embeddings
    monkeypatch.setattr(representations, "sentence_embeddings", lambda *x, **k: calls.append(1) or real(*x, **k))
    texts = ["the cat sat", "a dog ran", "unrelated words here"]
    va = ua.sentence_vectors(a, texts, "mean", 32)
    vb = ua.sentence_vectors(b, texts, "mean", 32)
    assert len(calls) == 1 and (va == vb).all()
    # the copy changes: its own model again
    (copy / "config.json").write_text((copy / "config.json").read_text().replace("}", ', "note": 1}', 1))
    os.utime(copy / "config.json", ns=(1, 1))
    assert ua._args(b)[0] == str(copy)
    # the first folder is gone: the copy no longer maps to it
    shutil.rmtree(first)
    back = shutil.copytree(export / "monotrans-en", tmp_path / "back-en")
    assert ua._args(ModelSpec(str(back)))[0] == str(back)


# --- xlviz app and its Streamlit config -----------------------------------------------------------

def test_streamlit_config_turns_the_file_watcher_off():
    cfg = tomllib.loads((REPO / ".streamlit" / "config.toml").read_text())
    assert cfg["server"]["fileWatcherType"] == "none"
    # and Streamlit itself reads it when started in the repository root (README's command)
    out = subprocess.run([sys.executable, "-c", "from streamlit import config; config.get_config_options(force_reparse=True);"
                          "print(config.get_option('server.fileWatcherType'))"],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.stdout.strip().splitlines()[-1] == "none", out.stderr[-500:]


def test_streamlit_config_runs_pages_without_a_full_collection_or_magic():
    """No ``gc.collect(2)`` after each page run (0.1 s held after the run's last message) and no
    magic (a page is recompiled for it whenever the last tab closed): read by Streamlit itself."""
    cfg = tomllib.loads((REPO / ".streamlit" / "config.toml").read_text())
    assert cfg["runner"] == {"postScriptGC": False, "magicEnabled": False}
    out = subprocess.run([sys.executable, "-c", "from streamlit import config; config.get_config_options(force_reparse=True);"
                          "print(config.get_option('runner.postScriptGC'), config.get_option('runner.magicEnabled'))"],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.stdout.strip().splitlines()[-1] == "False False", out.stderr[-500:]


def test_xlviz_app_replaces_itself_with_streamlit(monkeypatch, tmp_path):
    from xlviz.commands import app as cmd

    calls = []

    def fake_exec(path, argv, env):
        calls.append((path, list(argv), dict(env), os.getcwd()))
        raise SystemExit(0)

    monkeypatch.setattr(os, "execve", fake_exec)
    monkeypatch.setattr(subprocess, "call", lambda *a, **k: pytest.fail("Streamlit started as a child process"))
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: pytest.fail("Streamlit started as a child process"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()  # an --out that is not a folder is refused before Streamlit starts
    with pytest.raises(SystemExit):
        cmd.handle(argparse.Namespace(port=8765, out=str(tmp_path / "runs"), headless=True))
    path, argv, env, cwd = calls[0]
    # Streamlit's command line through xlviz.ui.serve: the model stack is imported before it listens
    assert path == sys.executable and argv[1:3] == ["-m", "xlviz.ui.serve"] and argv[3].endswith("app.py") and "8765" in argv
    assert Path(cwd) == REPO and (Path(cwd) / ".streamlit" / "config.toml").is_file()
    assert env["XLVIZ_CHECKPOINTS"] == str((tmp_path / "runs").resolve())


# --- runs: curves and comparison -------------------------------------------------------------------

def _resumed_metrics() -> list[dict]:
    first = [{"stage": "s1_pretrain", "step": s, "loss": 9.0 - s / 10, "elapsed": float(s)} for s in range(0, 50, 10)]
    second = [{"stage": "s1_pretrain", "step": s, "loss": 8.5 - s / 10, "elapsed": 60.0 + s} for s in range(0, 80, 10)]
    later = [{"stage": "s2_transfer-sov", "step": s, "loss": 5.0, "elapsed": 200.0 + s} for s in range(0, 30, 10)]
    return first + second + later


def test_loss_curve_after_a_resume_does_not_join_the_attempts():
    from xlviz.views.runs import loss_figure

    fig = loss_figure(_resumed_metrics())
    xs = [list(t.x) for t in fig.data]
    assert len(xs) == 3  # two attempts of s1, one of s2
    for x in xs:  # every line goes forward: no diagonal back to step 0
        assert all(b > a for a, b in zip(x, x[1:])), x


def test_overlay_smoothing_log_and_time_axis(tmp_path):
    from xlviz.views.runs import curves_frame, overlay_figure, smooth

    assert smooth([1.0, 3.0], 0.0) == [1.0, 3.0]
    # debiased EMA: w=0.5 -> 1, (0.25 + 0.75) / 0.75 = (0.5*0.5*1 + 0.5*3) / (1 - 0.25)
    assert smooth([1.0, 3.0], 0.5) == pytest.approx([1.0, (0.25 + 1.5) / 0.75])
    runs = []
    for name in ("a", "b"):
        run = Run(tmp_path / name)
        run.write_config({"name": name})
        for m in _resumed_metrics():
            run.log_metric(**m)
        runs.append(run)
    curves = curves_frame(runs)
    assert set(curves["run"]) == {"a", "b"} and set(curves["attempt"]) == {0, 1}
    fig = overlay_figure(curves, x="elapsed", smoothing=0.6, log_y=True)
    assert fig.layout.yaxis.type == "log" and fig.layout.xaxis.title.text == "time (s)"
    named = [t for t in fig.data if t.showlegend is not False]
    assert len(named) == 6 and len(fig.data) == 12  # 2 runs x 3 curves, each with its faint raw line
    assert {t.line.color for t in named if t.name.startswith("a ·")} != {t.line.color for t in named if t.name.startswith("b ·")}


def test_config_diff_seed_groups_and_ratio(tmp_path):
    from xlviz.views.runs import compare_table, config_diff, results_frame, seed_groups, seed_summary

    runs = []
    for name, seed, steps, f1 in (("s0", 0, 100, 60.0), ("s1", 1, 100, 70.0), ("long", 0, 400, 80.0)):
        run = Run(tmp_path / name)
        run.write_config({"name": name, "seed": seed, "languages": ["sov"], "pretrain_steps": steps,
                          "world": {"seed": seed, "languages": [{"code": "sov"}]}, "versions": {"torch": name}})
        run.write_results([{"system": "monotrans", "language": "en", "exact_match": f1 - 10, "f1": f1},
                           {"system": "monotrans", "language": "sov", "exact_match": f1 / 2 - 10, "f1": f1 / 2}])
        runs.append(run)
    diff = config_diff(runs)
    assert set(diff["key"]) == {"seed", "world.seed", "pretrain_steps"}  # name and versions left out
    assert diff.set_index("key").loc["pretrain_steps", "long"] == "400"
    assert seed_groups(runs) == [["s0", "s1"]]
    long = results_frame(runs)
    table = compare_table(long)
    assert table.set_index("run").loc["s1", "F1 sov/L1"] == pytest.approx(0.50)
    summary = seed_summary(long, seed_groups(runs)).set_index(["system", "language"])
    assert summary.loc[("monotrans", "en"), "F1 mean"] == pytest.approx(65.0)
    assert summary.loc[("monotrans", "en"), "F1 sd"] == pytest.approx(7.07, abs=0.01)  # sd of 60, 70
    assert summary.loc[("monotrans", "sov"), "n"] == 2


def test_one_colour_per_system_whatever_the_order():
    from xlviz.views.colours import colour_map

    a = colour_map(["floor", "monotrans", "clwe"])
    b = colour_map(["clwe", "monotrans", "floor", "floor"])
    assert a == b and len(set(a.values())) == 3


# --- export ----------------------------------------------------------------------------------------

def test_figure_csv_and_self_contained_run_report(run_root):
    from xlviz.views.export import figure_frame, run_report_html
    from xlviz.views.runs import loss_figure

    run = Run(run_root / "demo-run")
    fig = loss_figure(run.metrics())
    frame = figure_frame(fig)
    assert len(frame) == len(run.metrics()) and set(frame.columns) == {"trace", "x", "y"}
    page = run_report_html(run, {"Alignment": fig})
    import re

    assert not re.search(r"<script[^>]*\ssrc=", page)  # nothing fetched: opens offline, no CDN
    assert page.count("Plotly.newPlot") == 2 and len(page) > 1_000_000  # plotly.js inlined once
    assert "monotrans" in page and "max_answer_length" in page and "Training loss" in page


@pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="image export needs /usr/bin/chromium (apt-get install chromium)")
def test_figure_png_and_svg_offline():
    import plotly.graph_objects as go

    from xlviz.views.export import figure_image

    fig = go.Figure(go.Bar(x=["en", "sov"], y=[71.4, 52.0]))
    assert figure_image(fig, "png").startswith(b"\x89PNG")
    assert b"<svg" in figure_image(fig, "svg")[:400]


def test_xquad_intervals_paired_tests_and_question_table():
    import pandas as pd

    from xlviz.data.squad import QAExample
    from xlviz.views.qa import cell_intervals, paired_tests, question_table

    rows = []
    for i in range(20):
        rows.append({"id": f"q{i}", "language": "en", "model": "A", "exact_match": 100.0, "f1": 100.0})
        rows.append({"id": f"q{i}", "language": "en", "model": "B", "exact_match": 100.0 if i < 5 else 0.0,
                     "f1": 100.0 if i < 5 else 0.0})
    rows = pd.DataFrame(rows)
    ci = cell_intervals(rows).set_index("model")
    assert (ci.loc["A", "F1 low"], ci.loc["A", "F1 high"]) == (100.0, 100.0)
    assert ci.loc["B", "F1 low"] < 25.0 < ci.loc["B", "F1 high"] and ci.loc["B", "n"] == 20
    test = paired_tests(rows).iloc[0]
    # no paragraphs: every question its own cluster; 15 questions favour A by 100, 2^20 patterns -> Monte Carlo
    assert test["F1 A − B"] == 75.0 and test["p F1"] < 0.01 and test["p EM"] < 0.01 and test["seeds"] == 1
    assert test["p from"].startswith("Monte Carlo sign-flip")
    ex = [QAExample(id=f"q{i}", title="", context="c", question=f"question {i}", answers=[]) for i in range(20)]
    table = question_table(rows, {"en": ex})
    assert list(table.columns) == ["id", "question", "A · en", "B · en"] and table.loc[7, "B · en"] == 0.0


# --- attention views -------------------------------------------------------------------------------

def test_head_view_and_overview_with_colorbar_and_separators():
    import numpy as np

    from xlviz.views.attention import head_view_html, overview

    attn = np.array([[0.9, 0.1, 0.0], [0.005, 0.5, 0.495], [0.2, 0.3, 0.5]])
    page = head_view_html(attn, ["the", "cat", "<b>"], [0, 0, 1])
    assert page.count("<line") == 7  # weights below 1% are not drawn
    assert 'stroke-opacity="0.900"' in page and "&lt;b&gt;" in page and "<script src" not in page
    fig = overview(np.stack([np.stack([attn, attn])]), layers=[0], heads=[0, 1], segment=[0, 0, 1])
    assert fig.layout.coloraxis.colorbar.title.text == "weight" and fig.layout.coloraxis.cmax == 0.9
    assert len(fig.layout.shapes) == 4  # one vertical and one horizontal A|B line per thumbnail


def test_each_systems_encoders_are_one_choice(run_root, tmp_path):
    """encoders/<system>-<lang> (what Alignment, Probing and a cross-attention model's Attention
    view use) are listed per system beside its QA exports, masked LMs, not QA."""
    import shutil

    from xlviz.runs import Run
    from xlviz.views.choices import run_model_choices

    run_dir = tmp_path / "checkpoints" / "enc-run"
    shutil.copytree(run_root / "demo-run", run_dir)
    shutil.copytree(run_dir / "s1_pretrain", run_dir / "encoders" / "monotrans-en")
    shutil.copytree(run_dir / "s2_transfer-sov", run_dir / "encoders" / "monotrans-sov")
    choices = {c.key: c for c in run_model_choices(Run(run_dir))}
    enc = choices["run:enc-run:encoders:monotrans"]
    assert not enc.qa and enc.group == "encoders" and [l for l, _ in enc.per_language] == ["en", "sov"]
    assert enc.short == "monotrans encoder" and "encoder (en, sov)" in enc.label
    assert choices["run:enc-run:export:monotrans"].qa


def test_app_start_gives_blas_one_thread_and_imports_no_model_stack():
    """The app's first script run limits BLAS to one thread (small matrices on shared cores) and
    leaves torch and transformers to be imported where a page needs them, in its own thread."""
    code = (
        "import sys\n"
        "from threadpoolctl import threadpool_info\n"
        "import numpy\n"
        "from xlviz.ui.serve import limit_threads\n"
        "limit_threads()\n"
        "limit_threads()\n"  # once per process
        "blas = [i for i in threadpool_info() if i['user_api'] == 'blas']\n"
        "assert blas and all(i['num_threads'] == 1 for i in blas), blas\n"
        "assert 'torch' not in sys.modules and 'transformers' not in sys.modules\n"
        "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1])))
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-2000:]


def test_the_launcher_imports_the_model_stack_before_streamlit_runs(monkeypatch):
    """``python -m xlviz.ui.serve APP ...`` = ``streamlit run APP ...`` with torch and transformers'
    BERT classes already imported in the main thread (no visitor waits for them)."""
    from streamlit.web import cli

    from xlviz.ui import serve

    seen = {}

    def fake_main(prog_name=None):
        seen["argv"] = list(sys.argv)
        seen["loaded"] = {m for m in ("torch", "transformers", "xlviz.models.loading") if m in sys.modules}
        seen["bert"] = "transformers.models.bert.modeling_bert" in sys.modules

    monkeypatch.setattr(cli, "main", fake_main)
    monkeypatch.setattr(sys, "argv", ["serve"])
    assert serve.main(["app.py", "--server.port", "8765"]) == 0
    assert seen["argv"] == ["streamlit", "run", "app.py", "--server.port", "8765"]
    assert seen["loaded"] == {"torch", "transformers", "xlviz.models.loading"} and seen["bert"]
    # and every module a page imports from the package, so a first visit imports nothing
    import pkgutil

    import xlviz.ui
    import xlviz.views

    for package in (xlviz.ui, xlviz.views):
        for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
            assert info.name in sys.modules, info.name


# --- what a page visit reuses: exact keys, stamps of the checkpoints tree, one URL message -----

def test_array_cache_key_reads_every_byte_and_a_read_only_array_is_hashed_once(monkeypatch):
    """Streamlit's own key for an array of 500,000 values or more hashes a sample of 100,000:
    two arrays differing in one value outside it would share a cached result."""
    import hashlib

    import numpy as np

    from xlviz.ui import common

    a = np.zeros((600, 1000), dtype=np.float32)
    b = a.copy()
    b[599, 999] = 1.0  # one value of 600,000
    assert common.array_digest(a) != common.array_digest(b)
    assert common.array_digest(a) == common.array_digest(a.copy())
    assert common.array_digest(a) != common.array_digest(a.reshape(1000, 600))  # the shape is part of the key
    assert common.array_digest(a[:, :2]) == common.array_digest(np.ascontiguousarray(a[:, :2]))
    # read-only, with read-only buffers below it: hashed once per process
    calls = []
    real = hashlib.blake2b
    monkeypatch.setattr(hashlib, "blake2b", lambda *x, **k: calls.append(1) or real(*x, **k))
    base = np.arange(20.0)
    view = base[5:15]
    view.setflags(write=False)
    common.array_digest(view), common.array_digest(view)
    assert len(calls) == 2, "a view of a writable array may change: hashed each time"
    base.setflags(write=False)
    first = common.array_digest(view)
    assert common.array_digest(view) == first and len(calls) == 3


def test_tree_stamp_changes_with_what_the_model_list_reads(tmp_path):
    from xlviz.ui.common import tree_stamp

    run = tmp_path / "run"
    (run / "s1_pretrain").mkdir(parents=True)
    (run / "manifest.json").write_text('{"artefacts": []}')
    first = tree_stamp(tmp_path)
    assert tree_stamp(tmp_path) == first
    (run / "manifest.json").write_text('{"artefacts": [1]}')  # rewritten in place: the folder's time may not move
    second = tree_stamp(tmp_path)
    assert second != first
    (run / "s1_pretrain").rmdir()  # a stage folder deleted by hand
    assert tree_stamp(tmp_path) != second
    deep = tmp_path / "a" / "b" / "c" / "d" / "e" / "f"
    deep.mkdir(parents=True)
    before = tree_stamp(tmp_path)
    (deep / "x.json").write_text("{}")  # below the depth looked at
    assert tree_stamp(tmp_path) == before


def test_write_url_sends_one_message_for_all_its_keys(monkeypatch):
    from streamlit.runtime.state.query_params import QueryParams
    from streamlit.testing.v1 import AppTest

    sent = []
    real = QueryParams._send_query_param_msg
    monkeypatch.setattr(QueryParams, "_send_query_param_msg", lambda self: sent.append(1) or real(self))

    def script():
        import streamlit as st

        from xlviz.ui.state import write_url

        st.session_state.update(a="x", b=[1, 2], c=3, d=None)
        write_url(("a", "b", "c", "d", "gone"))
        write_url(("a", "b", "c"))  # nothing changed: no message

    at = AppTest.from_function(script)
    at.query_params["gone"] = "old"
    at.query_params["other"] = "kept"
    at.run()
    assert not at.exception
    assert len(sent) == 1
    assert dict(at.query_params) == {"a": "x", "b": "[1, 2]", "c": "3", "other": "kept"}


# --- the server's root named in each page ------------------------------------------------------------

def test_base_url_script_is_injected_after_head_and_escaped():
    from xlviz.ui.base_url import inject, script

    page = b"<!DOCTYPE html><html><head><meta charset='UTF-8'/><script src='x.js'></script></head></html>"
    out = inject(page, "")
    assert out.startswith(b"<!DOCTYPE html><html><head><script>window.__streamlit=")
    assert b'BACKEND_BASE_URL:location.origin+"/"' in out and out.endswith(page[len(b"<!DOCTYPE html><html><head>"):])
    assert b'location.origin+"/lab"' in script("/lab/")
    assert b"</script><script>" not in script("</script><script>alert(1)")  # a config value stays a string
    assert inject(b"<html>no head</html>", "") == b"<html>no head</html>"


def test_base_url_middleware_changes_only_html_pages():
    import asyncio

    from xlviz.ui.base_url import BackendBaseUrl

    def app_sending(content_type: bytes, body: bytes, chunks: int = 1, encoding: bytes | None = None):
        async def app(scope, receive, send):
            headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode()), (b"etag", b'"f"')]
            if encoding:
                headers.append((b"content-encoding", encoding))
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            step = max(1, len(body) // chunks)
            parts = [body[i:i + step] for i in range(0, len(body), step)]
            for i, part in enumerate(parts):
                await send({"type": "http.response.body", "body": part, "more_body": i < len(parts) - 1})
        return app

    def call(app, method="GET"):
        sent = []

        async def send(message):
            sent.append(message)

        asyncio.run(BackendBaseUrl(app)({"type": "http", "method": method, "path": "/attention"}, None, send))
        headers = dict(sent[0]["headers"])
        return headers, b"".join(m.get("body", b"") for m in sent[1:])

    page = b"<html><head><title>t</title></head><body></body></html>"
    headers, body = call(app_sending(b"text/html; charset=utf-8", page, chunks=3))
    assert b"BACKEND_BASE_URL" in body and body.endswith(b"<title>t</title></head><body></body></html>")
    assert headers[b"content-length"] == str(len(body)).encode() and b"etag" not in headers
    js = b"console.log('<head>')"
    assert call(app_sending(b"application/javascript", js)) == ({b"content-type": b"application/javascript",
                                                                 b"content-length": str(len(js)).encode(), b"etag": b'"f"'}, js)
    _, zipped = call(app_sending(b"text/html", b"\x1f\x8b<head>", encoding=b"gzip"))
    assert zipped == b"\x1f\x8b<head>"  # an encoded body is never touched
    _, posted = call(app_sending(b"text/html", page), method="POST")
    assert posted == page


def test_base_url_installed_innermost_and_read_by_streamlits_browser_code(monkeypatch):
    """xlviz app adds the middleware last (it sees the HTML before gzip); Streamlit's browser code
    (pinned) still takes the server's root from ``window.__streamlit.BACKEND_BASE_URL``."""
    from pathlib import Path

    import streamlit
    from streamlit.web.server.starlette import starlette_app

    from xlviz.ui import base_url

    monkeypatch.setattr(starlette_app, "create_streamlit_middleware", starlette_app.create_streamlit_middleware)
    base_url.install()
    base_url.install()  # once only
    stack = starlette_app.create_streamlit_middleware()
    assert [m.cls for m in stack].count(base_url.BackendBaseUrl) == 1 and stack[-1].cls is base_url.BackendBaseUrl
    bundle = next((Path(streamlit.__file__).parent / "static" / "static" / "js").glob("index.*.js")).read_text()
    assert "window.__streamlit" in bundle and "BACKEND_BASE_URL" in bundle
