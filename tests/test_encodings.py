"""Stored encodings (xlviz.analysis.encodings): written into a run by ``xlviz analyse encodings``
(and by a world run's scoring stage), read by the Alignment page instead of loading models.

Checks: the stored arrays equal what the page computes (bit for bit: the same chunks through the
same functions); a file is used only for the model, texts and settings it says it holds (a changed
model reads as not stored); a malformed or mislabelled file is refused naming it; and the page
renders a run with stored encodings without importing torch or transformers' model code, showing
the same table as when it computes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.analysis_fixtures import L2, make_analysis_run
from tests.app_fixtures import charts
from xlviz.analysis import encodings as enc
from xlviz.analysis.reports import parallel_data, run_systems
from xlviz.models.reference import ModelSpec
from xlviz.cli import main
from xlviz.errors import XlvizError

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def stored_run(tmp_path_factory) -> Path:
    """A finished en + sov run (transferred and floor) whose encodings the CLI stored."""
    run = make_analysis_run(tmp_path_factory.mktemp("enc") / "checkpoints", "stored-run")
    assert main(["analyse", "encodings", "--run", str(run), "--quiet"]) == 0
    return run


def _data(run: Path):
    return parallel_data("world", run_dir=str(run), l2=L2, limit=enc.PAIRS)


def _sides(run: Path):
    """(system name, side, spec, texts, words) of every side the page's default view encodes."""
    data = _data(run)
    for s in run_systems(run, L2):
        yield s.name, "a", s.a, data.src, data.src_words
        yield s.name, "b", s.b, data.tgt, data.tgt_words


def test_the_cli_stores_one_file_per_encoder_in_the_manifest(stored_run):
    from xlviz.runs import artefacts

    found = artefacts(stored_run, "encodings")
    # transferred and floor read English with the same s1_pretrain: 3 encoders, 3 files
    assert len(found) == 3 and all(a.role == "encodings" and a.folder.suffix == ".safetensors" for a in found)
    assert {a.language for a in found} == {"en", L2}
    assert sorted(enc.stored(stored_run).values()) == sorted(a.folder for a in found)
    # a second run of the command finds everything stored and writes nothing
    before = {a.folder: a.folder.stat().st_mtime_ns for a in found}
    assert main(["analyse", "encodings", "--run", str(stored_run), "--quiet"]) == 0
    assert {a.folder: a.folder.stat().st_mtime_ns for a in artefacts(stored_run, "encodings")} == before


def test_stored_vectors_equal_the_pages_computation(stored_run):
    """Read back from disk, the arrays are the page's own (ui.analysis computes them chunk by chunk)."""
    from xlviz.ui import analysis as ua

    n_words = sum(len(w) for w in _data(stored_run).src_words)
    for name, side, spec, texts, words in _sides(stored_run):
        meta = enc.request(enc.spec_fingerprint(spec), texts, words, "mean", 128)
        path = enc.find(stored_run, meta)
        assert path is not None, (name, side)
        sent, word = enc.read(path, meta)
        live_sent, live_word = ua.sentence_and_word_vectors(spec, texts, words, "mean", 128)
        assert sent.shape == live_sent.shape and sent.shape[1] == len(texts) == 12
        assert np.array_equal(sent, live_sent), (name, side)
        assert np.array_equal(word, live_word, equal_nan=True), (name, side)
        if side == "a":
            assert word.shape[1] == n_words
        # the page's lookup finds the same arrays
        got = ua.stored_vectors(str(stored_run), spec, texts, words, "mean", 128)
        assert got is not None and np.array_equal(got[0], live_sent)


def test_other_settings_or_texts_are_not_stored(stored_run):
    from xlviz.ui import analysis as ua

    name, side, spec, texts, words = next(_sides(stored_run))
    run = str(stored_run)
    assert ua.stored_vectors(run, spec, texts, words, "cls", 128) is None  # another pooling
    assert ua.stored_vectors(run, spec, texts, words, "mean", 64) is None  # another token limit
    assert ua.stored_vectors(run, spec, texts[:8], words[:8], "mean", 128) is None  # fewer pairs
    assert ua.stored_vectors(run, spec, texts, None, "mean", 128) is None  # word translation off
    assert ua.stored_vectors(None, spec, texts, words, "mean", 128) is None  # no run (real data)


def test_a_changed_model_is_not_read_from_disk(stored_run, tmp_path):
    """Retrain (here: replace) the transferred model: its stored vectors no longer match, the page
    computes them, and the English side (unchanged) is still read."""
    from tests.tiny_models import make_tiny
    from xlviz.ui import analysis as ua

    run = tmp_path / "checkpoints" / "changed-run"
    shutil.copytree(stored_run, run)
    data = _data(run)
    transferred = next(s for s in run_systems(run, L2) if s.name.endswith("transferred"))
    assert ua.stored_vectors(str(run), transferred.b, data.tgt, data.tgt_words, "mean", 128) is not None
    words = sorted({w for ws in data.tgt_words for w in ws})
    make_tiny("bert", tmp_path / "new", task="mlm", words=words, seed=7)
    weights = Path(transferred.b.path) / "model.safetensors"
    shutil.copy(tmp_path / "new" / "model.safetensors", weights)
    os.utime(Path(transferred.b.path) / "config.json")  # as save_pretrained rewrites it
    assert enc.find(run, enc.request(enc.spec_fingerprint(transferred.b), data.tgt, data.tgt_words, "mean", 128)) is None
    assert ua.stored_vectors(str(run), transferred.b, data.tgt, data.tgt_words, "mean", 128) is None
    assert ua.stored_vectors(str(run), transferred.a, data.src, data.src_words, "mean", 128) is not None


def test_a_mislabelled_or_broken_file_is_refused_naming_it(stored_run, tmp_path):
    name, side, spec, texts, words = next(_sides(stored_run))
    meta = enc.request(enc.spec_fingerprint(spec), texts, words, "mean", 128)
    path = enc.find(stored_run, meta)
    other = dict(meta, pooling="cls")
    with pytest.raises(XlvizError, match="pooling") as e:
        enc.read(path, other)
    assert str(path) in str(e.value)
    sent, word = enc.read(path, meta)
    short = enc.save(tmp_path, meta, sent[:, :5], word)  # says 12 sentences, holds 5
    with pytest.raises(XlvizError, match="sentences"):
        enc.read(short, meta)
    broken = tmp_path / "broken.safetensors"
    broken.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json")
    with pytest.raises(XlvizError, match="safetensors") as e:
        enc.header(broken)
    assert "broken.safetensors" in str(e.value)
    with pytest.raises(XlvizError, match="words"):
        enc.save(tmp_path, meta, sent, None)
    from safetensors.numpy import save_file

    foreign = tmp_path / "foreign.safetensors"  # a safetensors file, but not stored encodings
    save_file({"sentences": sent}, str(foreign), metadata=dict(meta))
    with pytest.raises(XlvizError, match="no stored-encodings metadata") as e:
        enc.read(foreign, meta)
    assert "foreign.safetensors" in str(e.value) and "xlviz" in str(e.value)


def test_fingerprints_follow_content_not_place(stored_run, tmp_path):
    s1 = stored_run / "s1_pretrain"
    copy = tmp_path / "copy"
    shutil.copytree(s1, copy)
    assert enc.spec_fingerprint(ModelSpec(str(s1))) == enc.spec_fingerprint(ModelSpec(str(copy)))
    floor = ModelSpec(str(s1), str(stored_run / "world" / "tokenizers" / L2), floor_seed=1)
    assert enc.spec_fingerprint(floor) not in (enc.spec_fingerprint(ModelSpec(str(s1))),
                                               enc.spec_fingerprint(ModelSpec(str(s1), floor.tokenizer, floor_seed=2)))
    assert enc.spec_fingerprint(ModelSpec("bert-base-uncased")) is None  # a hub id: nothing stored
    assert enc.texts_fingerprint(["a b"], [["a", "b"]]) != enc.texts_fingerprint(["a b"], [["a b"]])
    assert enc.texts_fingerprint(["a b"]) != enc.texts_fingerprint(["a b"], [["a", "b"]])


def test_the_encodings_path_is_the_manifest_writers():
    from xlviz.runs import artefact_relpath

    assert artefact_relpath("encodings", key="0123456789abcdef") == "encodings/0123456789abcdef.safetensors"
    for bad in ("../../x", "ABCDEF0123", "", None, "abc"):
        with pytest.raises(XlvizError, match="key"):
            artefact_relpath("encodings", key=bad)


def test_the_cli_refuses_a_folder_that_is_no_run(tmp_path, capsys):
    assert main(["analyse", "encodings", "--run", str(tmp_path / "nothing")]) != 0
    assert "nothing: not a run folder" in capsys.readouterr().err
    assert not (tmp_path / "nothing").exists()


def test_the_pages_default_view_is_the_stored_one():
    """What a run stores is what the page shows first: its first pooling, its token limit and pairs."""
    text = (REPO / "pages" / "alignment.py").read_text()
    assert text.index('"mean":') < text.index('"mean_no_special":') < text.index('"cls":')
    assert enc.POOLING == "mean" and 'st.session_state["al_max_len"] = enc.MAX_LENGTH' in text and "value=enc.PAIRS" in text


_PAGE = r"""
import json, os, sys
from streamlit.testing.v1 import AppTest
at = AppTest.from_file(sys.argv[1], default_timeout=300)
at.switch_page("pages/alignment.py")  # the server's first page: nothing imported before
at.run()
assert not at.exception, [e.message for e in at.exception]
at.session_state["al_tab"] = "Table"  # only the open tab is drawn
at.run()
table = next(d.value for d in at.dataframe if "cka" in d.value.columns)
model_code = sorted(m for m in sys.modules if m == "torch" or (m.startswith("transformers.models.") and ".modeling_" in m))
print(json.dumps({"modules": model_code, "rows": table.to_dict("records")}))
"""


def _render(root: Path) -> dict:
    env = dict(os.environ, XLVIZ_CHECKPOINTS=str(root), PYTHONPATH=str(REPO))
    env.pop("XLVIZ_SHARED_DATA", None)
    out = subprocess.run([sys.executable, "-c", _PAGE, str(REPO / "app.py")], env=env, capture_output=True, text=True,
                         timeout=600, cwd=REPO)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_page_renders_from_disk_without_model_code(stored_run, tmp_path):
    """A fresh app process opened on the Alignment page: with the run's encodings stored it imports
    neither torch nor a transformers model, and shows the table it computes without them."""
    root = stored_run.parent
    got = _render(root)
    assert got["modules"] == []
    # the same run without its stored encodings: the page loads the models and computes
    bare = tmp_path / "checkpoints"
    shutil.copytree(stored_run, bare / stored_run.name)
    shutil.rmtree(bare / stored_run.name / "encodings")
    computed = _render(bare)
    assert "torch" in computed["modules"] and any(".modeling_" in m for m in computed["modules"])
    assert len(got["rows"]) == len(computed["rows"]) == 2 * 3
    assert got["rows"] == computed["rows"]


def test_every_view_of_the_page_works_on_stored_vectors(stored_run, monkeypatch):
    """The stored arrays are shared by every session and read-only: each chart and widget of the
    page works on them (words projection, projector, centring, the post-hoc map)."""
    from streamlit.testing.v1 import AppTest

    from xlviz.ui import analysis as ua

    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(stored_run.parent))
    monkeypatch.delenv("XLVIZ_SHARED_DATA", raising=False)
    calls = []
    monkeypatch.setattr(ua, "load", lambda *a, **k: calls.append(a))  # the page's door to a model (its spinner)
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=300)
    at.switch_page("pages/alignment.py").run()
    assert not at.exception, [e.message for e in at.exception]
    drawn = set()
    for tab in ("CKA", "Word translation", "Post-hoc map", "Retrieval"):  # only the open tab is drawn
        at.session_state["al_tab"] = tab
        drawn |= set(charts(at.run()))
    assert {"al_fig_retrieval", "al_fig_cka", "al_fig_words", "al_fig_proj", "al_fig_posthoc"} <= drawn
    at.radio(key="al_proj_level").set_value("words").run()
    at.toggle(key="al_pj_on").set_value(True).run()
    at.toggle(key="al_center").set_value(True).run()
    at.session_state["al_tab"] = "Post-hoc map"
    at.run().slider(key="al_train_frac").set_value(0.75).run()
    assert not at.exception, [e.message for e in at.exception]
    assert "al_fig_projector" in {e.key for e in at.get("plotly_chart")} and not calls
    # another view than the stored one is computed: the models load
    at.selectbox(key="al_pooling").set_value("cls").run()
    assert not at.exception and calls
