"""The Probing page's agreement results stored in a run (``xlviz analyse agreement RUN``, the end
of ``xlviz demo``): written for exactly the page's first view, listed in the manifest, read by the
page with the numbers it computes, and never used once a model changed.

The run is ``tests/analysis_fixtures.py``'s: en + sov with an L1 masked LM, a transferred sov model
and the floor rebuilt from the L1 model, on a small generated world.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from tests.analysis_fixtures import L2, make_analysis_run
from xlviz.cli import main

APP = str(Path(__file__).resolve().parents[1] / "app.py")


@pytest.fixture(scope="module")
def base_run(tmp_path_factory) -> Path:
    """A run with nothing stored (copied before each use that writes)."""
    return make_analysis_run(tmp_path_factory.mktemp("agr") / "checkpoints", "agr-run")


def _copy(base: Path, root: Path, name: str = "agr-run") -> Path:
    dst = root / "checkpoints" / name
    shutil.copytree(base, dst)
    return dst


def _agreement_files(run: Path) -> list[str]:
    return sorted(p.name for p in (run / "analyses").glob("agreement-*")) if (run / "analyses").is_dir() else []


def _hashes(run: Path) -> dict[str, str]:
    return {p.relative_to(run).as_posix(): hashlib.sha1(p.read_bytes()).hexdigest()
            for p in sorted(run.rglob("*")) if p.is_file()}


def test_the_cli_stores_the_first_view_once_listed_in_the_manifest(base_run, tmp_path, capsys):
    from xlviz.runs import artefacts
    from xlviz.views.probing import first_view_rows

    run = _copy(base_run, tmp_path)
    rows = first_view_rows(run)
    assert [m.name.split(" · ", 1)[1] for m in rows] == ["L1 model", "transferred", "floor"]
    assert main(["analyse", "agreement", str(run)]) == 0
    out = capsys.readouterr().out
    assert "agreement results of 3 row(s) written to" in out and out.count("computed") == 3
    files = _agreement_files(run)
    assert len(files) == 6 and {f.rsplit(".", 1)[1] for f in files} == {"json", "csv"}
    listed = {a.path: a for a in artefacts(run, "analysis")}
    assert {f"analyses/{f}" for f in files} <= set(listed)  # every stored file is in the manifest
    assert sorted(listed[f"analyses/{f}"].language for f in files if f.endswith(".json")) == ["en", L2, L2]
    for f in files:
        if f.endswith(".json"):
            obj = json.loads((run / "analyses" / f).read_text())
            req = obj["request"]
            assert req["max_per_category"] == 100 and req["unit"] == "word" and req["data"] in ("world:en", f"world:{L2}")
            assert {"world", "pairs"} == set(req["inputs"]) and len(req["model"]) == 40
    # a second run reads them all and writes nothing
    manifest = (run / "manifest.json").read_bytes()
    assert main(["analyse", "agreement", str(run), "--quiet"]) == 0
    assert "all 3 rows' agreement results were already stored" in capsys.readouterr().out
    assert (run / "manifest.json").read_bytes() == manifest and len(_agreement_files(run)) == 6


def test_the_page_reads_the_stored_result_equal_to_the_computed_one(base_run, tmp_path, monkeypatch):
    """Field by field, the stored result is what the page's own path computes on an unstored
    copy of the run; the page's path then returns it without loading a model."""
    from xlviz.analysis import agreement_store as ag
    from xlviz.ui import analysis as ua
    from xlviz.views.probing import first_view_rows

    stored_run = _copy(base_run, tmp_path / "a")
    plain_run = _copy(base_run, tmp_path / "b")
    assert main(["analyse", "agreement", str(stored_run), "--quiet"]) == 0
    computed = {}
    for m in first_view_rows(plain_run):
        computed[m.name.split(" · ", 1)[1]] = ua.agreement(m.spec, f"world:{m.language}", str(plain_run), 100, "word")
    # the stored run: no model may load now (the page's loaders fail if called)
    def no_load(*args, **kwargs):
        raise AssertionError("a model was loaded although its result is stored")

    monkeypatch.setattr(ua, "load", no_load)
    monkeypatch.setattr(ua, "_load", no_load)
    for m in first_view_rows(stored_run):
        name = m.name.split(" · ", 1)[1]
        got = ua.agreement(m.spec, f"world:{m.language}", str(stored_run), 100, "word")
        want = computed[name]
        assert list(got) == list(want)
        for field in want:
            assert got[field] == want[field], (name, field)
        assert len(got["items"]) == got["n_total"] > 0 and any(it["logp_good"] is not None for it in got["items"])
        # and the file holds exactly that
        req = ag.spec_request(stored_run, m.spec, f"world:{m.language}", 100, "word")
        assert ag.find(stored_run, req)[0] == {**want, "items": list(want["items"])}  # the page holds them as a tuple
    # other settings than the stored ones are not read from the run
    m = first_view_rows(stored_run)[1]
    assert ua.stored_agreement(m.spec, f"world:{L2}", str(stored_run), 5, "word") is None
    assert ua.stored_agreement(m.spec, f"world:{L2}", str(stored_run), 100, "token") is None
    assert ua.stored_agreement(m.spec, "marvin-linzen", str(stored_run), 100, "word") is None


def test_the_probing_page_opens_on_the_stored_results_without_loading_a_model(base_run, tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    import xlviz.models.reference as reference

    run = _copy(base_run, tmp_path)
    plain = _copy(base_run, tmp_path / "plain", "agr-plain")
    assert main(["analyse", "agreement", str(run), "--quiet"]) == 0
    monkeypatch.delenv("XLVIZ_SHARED_DATA", raising=False)

    def grid(root: Path, query: dict) -> "object":
        monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(root))
        at = AppTest.from_file(APP, default_timeout=180)
        at.run()
        at.query_params.update(query)
        at.switch_page("pages/probing.py").run()
        assert not at.exception, [e.message for e in at.exception]
        assert not at.error, [e.value for e in at.error]
        return next(d.value for d in at.dataframe if "simple" in d.value.columns)

    computed = grid(tmp_path / "plain" / "checkpoints", {"run": "agr-plain"})

    def no_load(*args, **kwargs):
        raise AssertionError("a model was loaded although its result is stored")

    # as in a fresh server: nothing loaded or computed yet (the copies' byte-identical models
    # would otherwise be the ones just loaded, and their chunks the ones just scored)
    import streamlit as st

    from xlviz.ui import analysis as ua

    st.cache_data.clear()
    st.cache_resource.clear()
    ua._CANONICAL.clear()
    monkeypatch.setattr(reference, "load_spec", no_load)
    stored = grid(tmp_path / "checkpoints", {"run": "agr-run"})
    assert [r.split(" · ", 1)[1] for r in stored.index] == [r.split(" · ", 1)[1] for r in computed.index]
    assert stored.to_numpy().tolist() == computed.to_numpy().tolist()


def test_a_changed_model_is_not_read_from_the_run(base_run, tmp_path, capsys):
    from tests.analysis_fixtures import world_words
    from tests.tiny_models import make_tiny
    from xlviz.analysis import agreement_store as ag
    from xlviz.data.world import load_world
    from xlviz.ui import analysis as ua
    from xlviz.views.probing import agreement_results, first_view_rows

    run = _copy(base_run, tmp_path)
    assert main(["analyse", "agreement", str(run), "--quiet"]) == 0
    capsys.readouterr()
    # step 2's model is trained again: other weights in the same folder
    folder = run / f"s2_transfer-{L2}"
    shutil.rmtree(folder)
    make_tiny("bert", folder, task="mlm", words=world_words(load_world(run / "world"), L2), seed=7)
    how = {m.model.name.split(" · ", 1)[1]: m.how for m in agreement_results(run)}
    # the floor reads its tokenizer from that folder too (the request digests the whole folder)
    assert how == {"L1 model": "stored", "transferred": "computed", "floor": "computed"}
    m = next(r for r in first_view_rows(run) if r.role == "transferred")
    assert ag.find(run, ag.spec_request(run, m.spec, f"world:{L2}", 100, "word")) is None
    assert ua.stored_agreement(m.spec, f"world:{L2}", str(run), 100, "word") is None
    assert main(["analyse", "agreement", str(run)]) == 0
    assert "agreement results of 2 row(s) written to" in capsys.readouterr().out
    assert len(_agreement_files(run)) == 10  # the old files stay, unused


def test_systems_pick_the_rows_to_store(base_run, tmp_path, capsys):
    run = _copy(base_run, tmp_path)
    assert main(["analyse", "agreement", str(run), "--systems", "transferred", "--max-per-category", "3", "--unit", "token"]) == 0
    out = capsys.readouterr().out
    assert "written to" in out and "floor" not in out.split("accuracy and coverage")[1]
    reqs = [json.loads((run / "analyses" / f).read_text())["request"] for f in _agreement_files(run) if f.endswith(".json")]
    assert len(reqs) == 2 and all(r["max_per_category"] == 3 and r["unit"] == "token" for r in reqs)


@pytest.mark.parametrize("argv, field", [
    (["RUN", "--max-per-category", "0"], "--max-per-category"),
    (["RUN", "--unit", "char"], "--unit"),
    (["RUN", "--systems", "nosuch"], "--systems"),
    (["RUN", "--data", f"world:{L2}"], "--data"),
    (["RUN", "--model", "RUN"], "--model"),
    (["--run", "RUN", "--data", f"world:{L2}", "--systems", "floor"], "--systems"),
])
def test_bad_input_is_refused_in_one_line_naming_the_field(base_run, capsys, argv, field):
    argv = [str(base_run) if a == "RUN" else a for a in argv]
    assert main(["analyse", "agreement", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"field '{field}'" in err and "Traceback" not in err
    assert _agreement_files(base_run) == []


def test_a_folder_that_is_not_a_run_or_has_no_world_is_refused(base_run, tmp_path, capsys):
    assert main(["analyse", "agreement", str(tmp_path / "nope")]) == 2
    assert "not a run folder" in capsys.readouterr().err
    corpus = _copy(base_run, tmp_path)
    (corpus / "world" / "world.json").unlink()
    assert main(["analyse", "agreement", str(corpus)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "world" in err and _agreement_files(corpus) == []


def test_the_demo_step_only_adds_analyses_and_their_manifest_entries(base_run, tmp_path):
    from xlviz.commands.demo import _store_probing
    from xlviz.runs import Run, artefacts

    path = _copy(base_run, tmp_path)
    run = Run(path)
    with run.writer_lock():  # a finished run has its lock file and manifest (this fixture predates manifests)
        run.record_artefacts([])
    before = _hashes(path)
    manifest = json.loads((path / "manifest.json").read_text())["artefacts"]
    assert manifest and not artefacts(path, "analysis")
    with run.writer_lock():  # the demo holds it while it ends
        line = _store_probing(run)
    assert "probing results (agreement, 3 rows) stored for the Probing page" in line
    after = _hashes(path)
    changed = {p for p in after if before.get(p) != after[p]}
    assert changed - {"manifest.json"} == {p for p in after if p.startswith("analyses/agreement-")}
    assert len(changed) == 7 and not set(before) - set(after)
    now = {e["path"]: e for e in json.loads((path / "manifest.json").read_text())["artefacts"]}
    assert all(now[e["path"]] == e for e in manifest)  # every former entry kept as it was
    assert {p for p in now if p not in {e["path"] for e in manifest}} == {p for p in changed if p != "manifest.json"}
    # a run it cannot store for says so, and the demo goes on
    (path / "world" / "world.json").unlink()
    shutil.rmtree(path / "analyses")
    with run.writer_lock():
        assert "probing results not stored" in _store_probing(run)
