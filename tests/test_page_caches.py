"""The caches that keep warm pages fast must never hide a change on disk: a run's writer adds
artefacts and world files while pages poll, and the next rerun must show them.

Covered: the parsed manifest and world listing (xlviz.runs), a figure shared between sessions
(xlviz.ui.common.shared_figure), the Probing page's whole agreement results (xlviz.ui.analysis),
the XQuAD slice numbers' key (xlviz.ui.slices_section), and the sidebar of a served session
seeing a new export after a rerun (AppTest).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

from xlviz.runs import Run, artefacts, record_artefacts, world_files

APP = str(Path(__file__).resolve().parents[1] / "app.py")


def _run(tmp_path: Path, name: str = "r") -> Run:
    run = Run(tmp_path / name)
    run.write_config({"name": name, "seed": 0, "languages": ["sov"]})
    return run


def _export(run: Run, system: str, lang: str) -> dict:
    folder = run.path / "export" / f"{system}-{lang}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text("{}")
    return {"kind": "export", "path": f"export/{system}-{lang}", "system": system, "language": lang, "role": "qa"}


def test_manifest_changes_are_seen_at_the_next_read(tmp_path):
    run = _run(tmp_path)
    record_artefacts(run, [_export(run, "monotrans", "sov")])
    assert [a.system for a in artefacts(run, "export")] == ["monotrans"]
    assert [a.system for a in artefacts(run, "export")] == ["monotrans"]  # read again: the same
    record_artefacts(run, [_export(run, "floor", "sov")])  # the writer's atomic replace
    assert [a.system for a in artefacts(run, "export")] == ["floor", "monotrans"]
    # an edit in place (same file, no rename) is seen too
    data = json.loads(run.manifest_path.read_text())
    data["artefacts"] = [e for e in data["artefacts"] if e["system"] != "floor"]
    with open(run.manifest_path, "w") as f:
        json.dump(data, f)
    assert [a.system for a in artefacts(run, "export")] == ["monotrans"]
    # a manifest broken by hand is reported at every read, not remembered as the last good one
    run.manifest_path.write_text("{not json")
    with pytest.raises(Exception):
        artefacts(run)
    with pytest.raises(Exception):
        artefacts(run)
    os.remove(run.manifest_path)  # no manifest: the folders are read
    assert {a.system for a in artefacts(run, "export")} == {"floor", "monotrans"}


def test_callers_cannot_change_the_parsed_manifest(tmp_path):
    run = _run(tmp_path)
    record_artefacts(run, [_export(run, "monotrans", "sov")])
    from xlviz.runs import _manifest_entries

    _manifest_entries(run)[0]["system"] = "changed"
    assert _manifest_entries(run)[0]["system"] == "monotrans"


def test_world_files_appear_and_go_at_the_next_read(tmp_path):
    run = _run(tmp_path)
    (run.path / "world" / "tokenizers" / "en").mkdir(parents=True)
    assert list(world_files(run, "tokenizer")) == ["en"]
    (run.path / "world" / "tokenizers" / "sov").mkdir()
    assert list(world_files(run, "tokenizer")) == ["en", "sov"]
    qa = run.path / "world" / "qa"
    qa.mkdir()
    assert world_files(run, "qa", split="test") == {}
    (qa / "test.sov.json").write_text("{}")
    assert list(world_files(run, "qa", split="test")) == ["sov"]
    shutil.rmtree(run.path / "world" / "tokenizers" / "en")
    assert list(world_files(run, "tokenizer")) == ["sov"]


def test_shared_figure_is_built_once_per_content():
    from xlviz.ui.common import shared_figure

    built = []

    def build(rows, title):
        import plotly.graph_objects as go

        built.append(title)
        return go.Figure(go.Scatter(x=[r["x"] for r in rows], y=[r["y"] for r in rows]), layout={"title": {"text": title}})

    rows = [{"x": 0, "y": 1.0}, {"x": 1, "y": 2.0}]
    a = shared_figure(build, rows, "t")
    b = shared_figure(build, [dict(r) for r in rows], "t")  # equal content, other objects
    assert a is b and built == ["t"]
    c = shared_figure(build, [{"x": 0, "y": 1.0}, {"x": 1, "y": 2.5}], "t")  # a new number: a new figure
    assert c is not a and list(c.data[0].y) == [1.0, 2.5] and len(built) == 2
    assert a.layout.title.x == 0.01  # tidied before it is shared


def test_finished_agreement_is_recomputed_when_the_data_or_model_changes(monkeypatch, tmp_path):
    from xlviz.models.reference import ModelSpec
    from xlviz.ui import analysis as ua

    ua._finished().clear()
    calls = []
    stamp = {"data": "d1"}
    monkeypatch.setattr(ua, "load", lambda spec, task="base": None)
    monkeypatch.setattr(ua, "_args", lambda spec: (spec.path, None, (None, None, None), spec.stamp()))
    monkeypatch.setattr(ua, "data_stamp", lambda data, run_path: stamp["data"])
    monkeypatch.setattr(ua, "agreement_pairs", lambda data, run_path, n, dstamp: ("x", [{}] * 70))

    def chunk(path, tok, floor, mstamp, data, run_path, n, dstamp, lo, hi, unit):
        calls.append((dstamp, lo))
        return [{"category": "c", "covered": True, "correct": stamp["data"] == "d1", "n": lo}] * (min(hi, 70) - lo)

    monkeypatch.setattr(ua, "_agreement_chunk", chunk)
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text("{}")
    spec = ModelSpec(str(model))
    first = ua.agreement(spec, "world:sov", None, 100, "word")
    assert len(calls) == 2  # two chunks of 64
    again = ua.agreement(spec, "world:sov", None, 100, "word")
    assert len(calls) == 2 and again == first
    assert again is not first and again["items"] is first["items"]  # shared, not copied per lookup
    with pytest.raises(AttributeError):
        again["items"].clear()  # ... and not to be emptied by a caller: the next one is whole
    again.pop("accuracy")  # the top level is the caller's own
    assert len(ua.agreement(spec, "world:sov", None, 100, "word")["items"]) == 70
    stamp["data"] = "d2"  # the data file changed
    changed = ua.agreement(spec, "world:sov", None, 100, "word")
    assert len(calls) == 4 and changed["accuracy"] != first["accuracy"]
    os.utime(model / "config.json", ns=(1, 1))  # the model's files changed
    ua.agreement(spec, "world:sov", None, 100, "word")
    assert len(calls) == 6


def test_slice_numbers_key_follows_the_scores():
    from xlviz.ui.slices_section import _rows_digest

    rows = pd.DataFrame({"id": ["a", "b"], "language": ["sov", "sov"], "model": ["m", "m"], "paragraph": ["p", "p"],
                         "exact_match": [100.0, 0.0], "f1": [100.0, 50.0]})
    key = _rows_digest(rows, "sov")
    assert _rows_digest(rows.copy(), "sov") == key
    assert _rows_digest(rows.assign(f1=[100.0, 60.0]), "sov") != key
    assert _rows_digest(rows.assign(model=["m", "n"]), "sov") != key


def test_sidebar_sees_a_new_export_after_a_rerun(tmp_path, monkeypatch):
    """A run's writer records a new system while a tab is open: its next rerun offers it, and
    one the writer drops is gone (the parsed manifest is not reused after a change)."""
    from streamlit.testing.v1 import AppTest

    from tests.app_fixtures import make_run

    root = tmp_path / "checkpoints"
    path = make_run(root, "demo-run")
    run = Run(path)
    record_artefacts(run, [])  # the run's folders into a manifest, as a current run has one
    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(root))

    def offered() -> str:
        """The sidebar's models in a new tab (AppTest reports the sidebar on a session's first run)."""
        at = AppTest.from_file(APP, default_timeout=120)
        at.run()
        assert not at.exception, at.exception
        return " | ".join(at.sidebar.multiselect(key="xlviz_models").options)

    assert "monotrans · QA (en, sov) · demo-run" in offered() and "newsys" not in offered()
    for lang in ("en", "sov"):
        shutil.copytree(path / "export" / f"monotrans-{lang}", path / "export" / f"newsys-{lang}")
    record_artefacts(run, [{"kind": "export", "path": f"export/newsys-{lang}", "system": "newsys", "language": lang,
                            "role": "qa"} for lang in ("en", "sov")])
    assert "newsys · QA (en, sov) · demo-run" in offered()
    data = json.loads(run.manifest_path.read_text())
    data["artefacts"] = [e for e in data["artefacts"] if e.get("system") != "newsys"]
    run.manifest_path.write_text(json.dumps(data))  # in place
    assert "newsys" not in offered()
