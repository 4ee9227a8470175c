"""The run artefact manifest (``manifest.json``, :mod:`xlviz.runs`): written by the run's writer,
read with the confined reader, one clear line for a bad one; runs written before it load from
their folder names, parsed in runs.py only; no module outside runs.py parses those names."""

from __future__ import annotations

import ast
import json
import os
import re
from pathlib import Path

import pytest

from xlviz import runs
from xlviz.errors import XlvizError
from xlviz.io import atomic_write_json
from xlviz.runs import Run

REPO = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------- folder-name parses
# A parse of a run's folder names is a string operation on a path's ``.name`` / ``.stem`` (or a
# model choice's or data set's ``.key``, which carries an export's or a run's name): splitting
# it at '-', '@' or ':', a regular expression applied to it, a slice by a stage prefix's length, a
# comparison with ``export`` / ``encoders``, a prefix test for a stage or artefact folder, and
# a glob that selects folders by that convention. Only xlviz/runs.py may do any of these.
NAME_ATTRS = {"name", "stem", "key"}
SPLITS = {"split", "rsplit", "partition", "rpartition"}
REGEX_CALLS = {"match", "fullmatch", "search", "findall", "finditer", "sub"}
FOLDER_WORDS = ("export", "encoders", "predictions")
STAGE_PREFIX = re.compile(r"^s\d")
GLOB_CONVENTION = re.compile(r"^s\d|export|encoders|predictions|\*-\*")
ALLOWED: dict[str, str] = {}  # "path:line": why (none needed)


def _is_name(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr in NAME_ATTRS


def _const(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _parses(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            attr, recv, first = node.func.attr, node.func.value, _const(node.args[0]) if node.args else None
            if attr in SPLITS and _is_name(recv) and first is not None and (
                    "-" in first or "@" in first or any(w in first for w in FOLDER_WORDS) or (recv.attr == "key" and ":" in first)):
                found.append((node.lineno, f".{recv.attr}.{attr}({first!r})"))
            elif attr in REGEX_CALLS and any(_is_name(a) for a in node.args):
                found.append((node.lineno, f"regex .{attr}() on a folder name"))
            elif attr in ("startswith", "endswith") and _is_name(recv) and first is not None and (
                    STAGE_PREFIX.match(first) or first in FOLDER_WORDS):
                found.append((node.lineno, f".{recv.attr}.{attr}({first!r})"))
            elif attr in ("glob", "rglob") and first is not None and GLOB_CONVENTION.search(first):
                found.append((node.lineno, f".{attr}({first!r})"))
        elif isinstance(node, ast.Subscript) and _is_name(node.value):
            for sub in ast.walk(node.slice):
                prefix = _const(sub.args[0]) if isinstance(sub, ast.Call) and sub.args else None
                if (isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id == "len" and prefix is not None
                        and (STAGE_PREFIX.match(prefix) or prefix.rstrip("/") in FOLDER_WORDS)):
                    found.append((node.lineno, f".{node.value.attr}[len({_const(sub.args[0])!r}):]"))
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_is_name(s) for s in sides) and any(_const(s) in FOLDER_WORDS for s in sides):
                found.append((node.lineno, "folder name compared with " + "/".join(_const(s) for s in sides if _const(s))))
    return sorted(found)


def folder_name_parses(root: Path) -> list[str]:
    """``path:line: what`` for every folder-name parse under ``root``'s xlviz/ and pages/
    outside xlviz/runs.py (and not allowed with a reason)."""
    out = []
    for base in ("xlviz", "pages"):
        for f in sorted((root / base).rglob("*.py")):
            rel = f.relative_to(root).as_posix()
            if rel == "xlviz/runs.py":
                continue
            for line, what in _parses(ast.parse(f.read_text(encoding="utf-8"), filename=rel)):
                if f"{rel}:{line}" not in ALLOWED:
                    out.append(f"{rel}:{line}: {what}")
    return out


def test_no_module_outside_runs_parses_folder_names():
    found = folder_name_parses(REPO)
    assert found == [], "folder names parsed outside xlviz/runs.py (ask xlviz.runs instead):\n" + "\n".join(found)


def test_the_scan_finds_the_old_parses_and_only_those():
    """The scan flags each way the readers used to parse names, and none of the unrelated
    string operations (a question id, a dotted setting, a system-name pattern, a file suffix)."""
    old = '''
system, lang = folder.name.rsplit("-", 1)
system, _, lang = folder.name.rpartition("-")
m = _STAGE_RE.match(folder.name)
m = re.fullmatch(r"s2_transfer-([^-]+)", folder.name)
ok = re.match(r"^s\\d+_", folder.name)
a = parent.name == "export"
b = model.parent.name != "export"
for f in path.glob("s2_transfer-*"): pass
for f in (path / "encoders").glob("*-*"): pass
variant = folder.name[len("s3_finetune"):]
system = m.key.rsplit(":export:", 1)[1]
x = folder.name.startswith("s2_transfer-")
a, b = p.stem.split("-", 1)
data_run = dataset.key.split(":", 1)[1]
'''
    assert len(_parses(ast.parse(old))) == len(old.strip().splitlines())
    unrelated = '''
base = example["id"].rsplit("-", 2)[0]
parts = key.split(".")
n = PATTERN.fullmatch(system)
lang = stem.rsplit(".", 1)[-1]
langs = [p.name.split("_")[0] for p in pud.glob("*_pud-ud-test.conllu")]
name = p.name[: -len(SUFFIX)]
stem = p.name[: -len(".json")]
files = folder.glob("tatoeba.*-eng.eng")
'''
    assert _parses(ast.parse(unrelated)) == []


# --------------------------------------------------------------------------- an old run layout
def _model_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps({"model_type": "bert", "architectures": ["BertForMaskedLM"]}))
    (path / "model.safetensors").write_bytes(b"")  # never loaded here: only looked at
    (path / "tokenizer.json").write_text("{}")
    return path


def old_layout(run_dir: Path, l2s=("svo", "sov")) -> Run:
    """A run folder as the code before the manifest wrote it: names only, no manifest.json."""
    run = Run(run_dir)
    run_dir.mkdir(parents=True)
    run.write_config({"seed": 0, "world": {"languages": [{"code": c, "order": "svo", "script": "latin"} for c in l2s]},
                      "methods": ["monotrans", "dictionary-oracle", "jointpair-disjoint"]})
    langs = ["en", *l2s]
    rows = []
    for system in ("monotrans", "dictionary-oracle", "jointpair-disjoint"):
        for lang in langs:
            _model_dir(run_dir / "export" / f"{system}-{lang}")
            _model_dir(run_dir / "encoders" / f"{system}-{lang}")
            atomic_write_json(run_dir / "predictions" / f"{system}-{lang}.json", {"q1": "a"})
            rows.append({"system": system, "language": lang, "setting": "zero-shot", "exact_match": 1.0, "f1": 2.0})
    _model_dir(run_dir / "encoders" / f"jointpair-disjoint@{l2s[1]}-en")
    run.write_results(rows)
    for stage in ("s1_pretrain", f"s2_transfer-{l2s[0]}", f"s2_transfer-{l2s[1]}", f"s2_transfer-{l2s[0]}-pos", "s3_finetune",
                  "s3_finetune-pos-noise"):
        _model_dir(run_dir / stage)
    (run_dir / f"s1_jointpair-disjoint-{l2s[0]}" / "en").mkdir(parents=True)  # a stage folder that is not a model
    (run_dir / "export" / "stray.txt").write_text("not a model folder")
    return run


def test_old_run_layout_loads_without_writing(tmp_path):
    run = old_layout(tmp_path / "old")
    before = sorted(p.relative_to(run.path).as_posix() for p in run.path.rglob("*"))
    exports = runs.exports(run)
    assert {(a.system, a.language) for a in exports} == {(s, l) for s in ("monotrans", "dictionary-oracle", "jointpair-disjoint")
                                                        for l in ("en", "svo", "sov")}
    assert all(a.role == "qa" and a.setting == "zero-shot" and a.stage == f"s4_{a.system}" for a in exports)
    pair = runs.artefact(run, "encoder", system="jointpair-disjoint", language="en", pair="sov")
    assert pair is not None and pair.folder == run.path / "encoders" / "jointpair-disjoint@sov-en" and pair.role == "l1-encoder"
    assert pair.name == "jointpair-disjoint@sov"
    assert runs.artefact(run, "encoder", system="jointpair-disjoint", language="sov").role == "l2-encoder"
    saved = runs.artefact(run, "predictions", system="dictionary-oracle", language="svo")
    assert saved.folder == run.path / "predictions" / "dictionary-oracle-svo.json"
    stages = {a.path: (a.role, a.language, a.variant) for a in runs.artefacts(run, "stage")}
    assert stages == {"s1_pretrain": ("pretrained", "en", None), "s2_transfer-svo": ("transferred", "svo", None),
                      "s2_transfer-sov": ("transferred", "sov", None), "s2_transfer-svo-pos": ("transferred", "svo", "pos"),
                      "s3_finetune": ("finetuned", "en", None), "s3_finetune-pos-noise": ("finetuned", "en", "pos-noise")}
    # readers never write: the migrated manifest stays in memory
    assert sorted(p.relative_to(run.path).as_posix() for p in run.path.rglob("*")) == before
    assert not run.manifest_path.exists()


def test_old_layout_through_the_readers(tmp_path):
    """The app's model choices, the analyses' run info and the saved-predictions lookup read
    the old layout as they did before (same keys, same pairs)."""
    from xlviz.analysis.reports import run_info
    from xlviz.views.choices import run_model_choices
    from xlviz.views.qa import saved_predictions_file

    run = old_layout(tmp_path / "old")
    keys = [c.key for c in run_model_choices(run)]
    assert keys == ["run:old:s1_pretrain", "run:old:s2_transfer-sov", "run:old:s2_transfer-svo", "run:old:s2_transfer-svo-pos",
                    "run:old:s3_finetune", "run:old:s3_finetune-pos-noise",
                    "run:old:export:monotrans", "run:old:export:dictionary-oracle", "run:old:export:jointpair-disjoint",
                    "run:old:encoders:monotrans", "run:old:encoders:dictionary-oracle", "run:old:encoders:jointpair-disjoint",
                    "run:old:encoders:jointpair-disjoint@sov"]
    by_key = {c.key: c for c in run_model_choices(run)}
    assert by_key["run:old:export:monotrans"].system == "monotrans"
    assert [l for l, _ in by_key["run:old:export:monotrans"].per_language] == ["en", "svo", "sov"]
    info = run_info(run.path)
    enc = run.path / "encoders"
    assert info.transferred == {"svo": run.path / "s2_transfer-svo", "sov": run.path / "s2_transfer-sov"}
    assert info.system_encoders("sov")["jointpair-disjoint"] == (enc / "jointpair-disjoint@sov-en", enc / "jointpair-disjoint-sov")
    assert info.system_encoders("svo")["jointpair-disjoint"] == (enc / "jointpair-disjoint-en", enc / "jointpair-disjoint-svo")
    (run.path / "world" / "qa").mkdir(parents=True)
    data = run.path / "world" / "qa" / "test.sov.json"
    data.write_text("{}")
    assert saved_predictions_file(run.path / "export" / "monotrans-sov", data) == run.path / "predictions" / "monotrans-sov.json"
    assert saved_predictions_file(run.path / "export" / "monotrans-en", data) is None


def test_a_language_code_with_a_dash_splits_on_the_runs_languages(tmp_path):
    """``monotrans-pt-br``: the old ``rsplit('-', 1)`` read system ``monotrans-pt``, language
    ``br``; the run's own languages split it right."""
    run = old_layout(tmp_path / "old", l2s=("pt-br", "sov"))
    assert {(a.system, a.language) for a in runs.exports(run) if a.system == "monotrans"} == {
        ("monotrans", "en"), ("monotrans", "pt-br"), ("monotrans", "sov")}
    assert runs.artefact(run, "stage", role="transferred", language="pt-br", variant="pos").path == "s2_transfer-pt-br-pos"


def test_the_writer_migrates_an_old_run_when_it_records(tmp_path):
    """The run's own writer (resuming it) writes the manifest: the old folders' entries and the new one."""
    run = old_layout(tmp_path / "old")
    _model_dir(run.path / "export" / "floor-sov")
    with run.writer_lock():
        run.record_artefacts([{"kind": "export", "path": "export/floor-sov", "system": "floor", "language": "sov", "role": "qa",
                               "setting": "zero-shot", "stage": "s4_floor"}])
    data = json.loads(run.manifest_path.read_text())
    assert data["version"] == 1
    paths = [e["path"] for e in data["artefacts"]]
    assert paths == sorted(paths) and "export/floor-sov" in paths and "encoders/jointpair-disjoint@sov-en" in paths
    assert len(paths) == len(runs.legacy_artefacts(run))  # the new folder is now among the folders too
    # from now on the file is what readers read: a folder added by hand is not an artefact
    _model_dir(run.path / "export" / "handmade-sov")
    assert runs.artefact(run, "export", system="handmade", language="sov") is None
    assert runs.artefact(run, "export", system="floor", language="sov").setting == "zero-shot"


# --------------------------------------------------------------------------- the file itself
def test_artefact_paths_are_made_in_runs():
    assert runs.artefact_relpath("export", "monotrans+pos", "sov") == "export/monotrans+pos-sov"
    assert runs.artefact_relpath("encoder", "jointpair-disjoint", "en", pair="sov") == "encoders/jointpair-disjoint@sov-en"
    assert runs.artefact_relpath("predictions", "floor", "svo") == "predictions/floor-svo.json"
    for bad in ({"system": "../x", "language": "sov"}, {"system": "m", "language": "a/b"}):
        with pytest.raises(XlvizError):
            runs.artefact_relpath("export", **bad)


BAD_MANIFESTS = [
    ("not json", "{", None),
    ("a list", [], None),
    ("another version", {"version": 7, "artefacts": []}, "version"),
    ("no list", {"version": 1, "artefacts": {}}, "artefacts"),
    ("entry not an object", {"version": 1, "artefacts": ["export/x"]}, "artefacts[0]"),
    ("unknown kind", {"version": 1, "artefacts": [{"kind": "weights", "path": "x"}]}, "artefacts[0].kind"),
    ("path out of the run", {"version": 1, "artefacts": [{"kind": "stage", "path": "../other/s1"}]}, "artefacts[0].path"),
    ("absolute path", {"version": 1, "artefacts": [{"kind": "stage", "path": "/etc"}]}, "artefacts[0].path"),
    ("system not text", {"version": 1, "artefacts": [{"kind": "export", "path": "export/a-b", "system": 3, "language": "b"}]},
     "artefacts[0].system"),
    ("export without language", {"version": 1, "artefacts": [{"kind": "export", "path": "export/a", "system": "a"}]},
     "artefacts[0].language"),
    ("qa set without split", {"version": 1, "artefacts": [{"kind": "qa", "path": "world/qa/x.json", "language": "sov"}]},
     "artefacts[0].split"),
    ("parallel pairs without their L1", {"version": 1, "artefacts": [{"kind": "parallel", "path": "world/parallel/x.jsonl",
                                                                      "language": "sov"}]}, "artefacts[0].pair"),
    ("depends_on not a list", {"version": 1, "artefacts": [{"kind": "stage", "path": "s1", "depends_on": "s1"}]},
     "artefacts[0].depends_on"),
    ("depends_on not names", {"version": 1, "artefacts": [{"kind": "stage", "path": "s1", "depends_on": ["s1", 2]}]},
     "artefacts[0].depends_on"),
]


@pytest.mark.parametrize("what,content,field", BAD_MANIFESTS, ids=[b[0] for b in BAD_MANIFESTS])
def test_a_bad_manifest_is_one_line_naming_file_and_field(tmp_path, what, content, field):
    run = old_layout(tmp_path / "run")
    run.manifest_path.write_text(content if isinstance(content, str) else json.dumps(content))
    with pytest.raises(XlvizError) as e:
        runs.exports(run)
    text = str(e.value)
    assert "manifest.json" in text and "\n" not in text and "Traceback" not in text
    if field:
        assert e.value.field == field and field in text
    # the app's model discovery skips such a run instead of failing the page
    from xlviz.views.choices import run_model_choices

    assert run_model_choices(run) == []


def test_a_bad_manifest_is_one_line_from_the_cli(tmp_path, capsys):
    from xlviz.cli import main as cli

    run = old_layout(tmp_path / "run")
    run.manifest_path.write_text(json.dumps({"version": 1, "artefacts": [{"kind": "stage", "path": "a/../../b"}]}))
    assert cli(["analyse", "alignment", "--run", str(run.path), "--l2", "sov", "--out", str(tmp_path / "a.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "manifest.json" in err[0] and "artefacts[0].path" in err[0], err


def test_manifest_is_read_confined(tmp_path):
    """A manifest.json that is a symlink (to a file elsewhere) is refused, and an entry whose
    folder is a symlink out of the run is not offered."""
    run = old_layout(tmp_path / "run")
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps({"version": 1, "artefacts": []}))
    os.symlink(elsewhere, run.manifest_path)
    with pytest.raises(XlvizError, match="manifest"):
        runs.exports(run)
    run.manifest_path.unlink()
    outside = _model_dir(tmp_path / "outside-model")
    os.symlink(outside, run.path / "export" / "planted-sov")
    atomic_write_json(run.manifest_path, {"version": 1, "artefacts": [
        {"kind": "export", "path": "export/planted-sov", "system": "planted", "language": "sov"},
        {"kind": "export", "path": "export/monotrans-sov", "system": "monotrans", "language": "sov"}]})
    assert [a.system for a in runs.exports(run)] == ["monotrans"]
    assert runs.owner_of(run.path / "export" / "monotrans-sov")[1].system == "monotrans"
    assert runs.owner_of(outside) is None


def test_demo_style_parallel_files_are_named_in_runs(tmp_path):
    run = old_layout(tmp_path / "run", l2s=("pt-br", "sov"))
    folder = run.path / "world" / "parallel"
    folder.mkdir(parents=True)
    for l2 in ("pt-br", "sov"):
        (folder / f"en-{l2}.jsonl").write_text("")
    assert runs.parallel_files(run.path) == {"pt-br": folder / "en-pt-br.jsonl", "sov": folder / "en-sov.jsonl"}
    assert runs.parallel_languages(folder / "en-pt-br.jsonl") == ("en", "pt-br")


# --------------------------------------------------------------------------- the world's files
def _old_world(run: Run) -> dict[str, Path]:
    """World files where a run made before they were recorded has them (no manifest entry)."""
    world = run.path / "world"
    files = {"world": world / "world.json", "tok-en": world / "tokenizers" / "en", "tok-svo": world / "tokenizers" / "svo",
             "test-svo": world / "qa" / "test.svo.json", "test-en": world / "qa" / "test.en.json",
             "train-en": world / "qa" / "train.en.json", "pairs-svo": world / "parallel" / "en-svo.jsonl"}
    for key, f in files.items():
        f.parent.mkdir(parents=True, exist_ok=True)
        f.mkdir() if key.startswith("tok-") else f.write_text("{}")
    return files


def test_world_paths_are_made_in_runs():
    assert runs.artefact_relpath("qa", language="sov", split="test") == "world/qa/test.sov.json"
    assert runs.artefact_relpath("parallel", language="sov", pair="en") == "world/parallel/en-sov.jsonl"
    assert runs.artefact_relpath("tokenizer", language="pt-br") == "world/tokenizers/pt-br"
    assert runs.artefact_relpath("world") == "world/world.json"
    assert runs.world_relpath("qa", language="en", split="dev") == "qa/dev.en.json"
    for bad in ({"kind": "qa", "language": "sov"}, {"kind": "tokenizer", "language": "../x"},
                {"kind": "parallel", "language": "sov", "pair": "a/b"}):
        with pytest.raises(XlvizError):
            runs.artefact_relpath(**bad)
    with pytest.raises(XlvizError, match="split"):
        runs.world_path("/nowhere", "qa", language="sov")


def test_world_files_of_a_run_made_before_they_were_recorded(tmp_path):
    """A run whose manifest has no world entries (its world stage ran before they were
    recorded) has its world files found at their conventional places, and nothing is written."""
    run = old_layout(tmp_path / "old")
    with run.writer_lock():  # a manifest, as every run made since manifests has, without world entries
        run.record_artefacts([])
    files = _old_world(run)
    manifest = run.manifest_path.read_bytes()
    assert runs.world_path(run, "qa", split="test", language="svo") == files["test-svo"]
    assert runs.world_path(run.path, "world") == files["world"] and runs.world_folder(run) == run.path / "world"
    assert runs.world_files(run, "tokenizer") == {"en": files["tok-en"], "svo": files["tok-svo"]}
    assert runs.world_files(run, "qa", split="test") == {"en": files["test-en"], "svo": files["test-svo"]}
    assert runs.world_files(run, "parallel") == runs.parallel_files(run.path) == {"svo": files["pairs-svo"]}
    assert runs.parallel_languages(files["pairs-svo"]) == ("en", "svo")
    qa = runs.artefact(run, "qa", language="en", split="train")
    assert qa is not None and qa.folder == files["train-en"] and qa.stage == "world"
    # a file the run does not have: its conventional place, for the caller's own check to refuse
    assert runs.world_path(run, "qa", split="test", language="sov") == run.path / "world" / "qa" / "test.sov.json"
    assert not runs.world_path(run, "tokenizer", language="sov").exists()
    assert runs.world_path(run, "parallel", language="sov") == run.path / "world" / "parallel" / "en-sov.jsonl"
    assert run.manifest_path.read_bytes() == manifest  # readers never write
    # a manifest that cannot be read: the world's files are still where the stage put them
    run.manifest_path.write_text("{")
    assert runs.world_files(run, "tokenizer") == {"en": files["tok-en"], "svo": files["tok-svo"]}
    assert runs.world_path(run, "qa", split="test", language="svo") == files["test-svo"]


def test_recorded_world_files_are_what_readers_get(tmp_path):
    """Once the world stage recorded its files, readers get those (wherever they are) and no
    longer look in the conventional places."""
    run = old_layout(tmp_path / "old")
    files = _old_world(run)
    moved = run.path / "world" / "qa-v2" / "test.svo.json"
    moved.parent.mkdir()
    moved.write_text("{}")
    with run.writer_lock():
        run.record_artefacts([{"kind": "qa", "path": "world/qa-v2/test.svo.json", "language": "svo", "split": "test",
                               "stage": "world"}])
    assert runs.world_path(run, "qa", split="test", language="svo") == moved
    assert runs.world_files(run, "qa", split="test") == {"svo": moved}
    assert runs.world_files(run, "tokenizer") == {}  # recorded: only what the manifest lists
    assert runs.world_path(run, "tokenizer", language="en") == files["tok-en"]  # not recorded: its conventional place
    entries = json.loads(run.manifest_path.read_text())["artefacts"]
    assert not [e for e in entries if e["kind"] in runs.WORLD_KINDS and e["path"] != "world/qa-v2/test.svo.json"]


def test_old_world_through_the_readers(tmp_path, monkeypatch):
    """The app's QA data sets and languages, the analyses' tokenizers and a run's parallel pairs
    read an old run's world files as before."""
    from xlviz.analysis.reports import run_info
    from xlviz.views.choices import discover_qa_datasets, run_languages

    run = old_layout(tmp_path / "old")
    files = _old_world(run)
    for tok in ("tok-en", "tok-svo"):
        (files[tok] / "tokenizer.json").write_text("{}")
    (run.path / "status.json").write_text(json.dumps({"state": "completed"}))
    sets = [d for d in discover_qa_datasets(tmp_path) if d.run == "old"]
    assert len(sets) == 1 and sets[0].folder == str(run.path / "world" / "qa")
    assert sets[0].files == (("en", str(files["test-en"])), ("svo", str(files["test-svo"])))
    assert run_languages(run) == ["en", "svo", "sov"]
    (run.path / "world" / "tokenizers" / "tr").mkdir()  # a language with no step-2 folder (whose own tokenizer wins)
    (run.path / "world" / "tokenizers" / "tr" / "tokenizer.json").write_text("{}")
    toks = run_info(run.path).l2_tokenizers
    assert toks["tr"] == run.path / "world" / "tokenizers" / "tr" and toks["svo"] == run.path / "s2_transfer-svo"
    assert "en" not in toks
    pairs = files["pairs-svo"]
    pairs.write_text(json.dumps({"id": "p1", "src": "a cat", "tgt": "ka tac"}) + "\n")
    files["world"].unlink()  # a corpus run: no generated world, its saved pairs
    from xlviz.data.parallel import parallel_data

    data = parallel_data("world", run_dir=run.path, l2="svo")
    assert (data.lang_a, data.lang_b, data.src, data.tgt) == ("en", "svo", ["a cat"], ["ka tac"])
    with pytest.raises(XlvizError, match="no parallel pairs for en-sov .*world/parallel/en-sov.jsonl"):
        parallel_data("world", run_dir=run.path, l2="sov")


def test_the_world_stage_records_the_files_readers_open(tmp_path):
    """A run's world stage records every file of world/ that readers open (the world, each
    language's tokenizer and QA sets, the parallel pairs), with its kind and fields."""
    from xlviz.transfer.config import TransferConfig
    from xlviz.transfer.pipeline import Pipeline

    cfg = TransferConfig.from_dict({
        "model_size": "tiny", "vocab_size": 200, "block_size": 8, "qa_max_length": 32, "doc_stride": 16, "mixed_precision": "no",
        "world": {"corpus_documents": 40, "qa_train_paragraphs": 4, "qa_dev_paragraphs": 2, "qa_test_paragraphs": 2,
                  "parallel_pairs": 6, "agreement_pairs": 3, "sense_pairs": 3}})
    pipe = Pipeline(cfg, tmp_path / "run")
    pipe.run.path.mkdir(parents=True)
    pipe.run.write_config(cfg.to_dict())
    pipe.execute("world", 0)  # as the run executes it (the stage's name is recorded with its files)
    world = pipe.run.path / "world"
    entries = [e for e in json.loads(pipe.run.manifest_path.read_text())["artefacts"] if e["kind"] in runs.WORLD_KINDS]
    on_disk = {"world/world.json", *(p.relative_to(pipe.run.path).as_posix() for sub in ("qa", "parallel", "tokenizers")
                                      for p in (world / sub).iterdir())}
    assert {e["path"] for e in entries} == on_disk
    assert all(e["stage"] == "world" for e in entries)
    langs = pipe.world.languages
    assert len(langs) >= 2
    assert {(e["split"], e["language"]) for e in entries if e["kind"] == "qa"} == {
        *(("test", lang) for lang in langs), ("train", "en"), ("dev", "en")}
    assert {(e["pair"], e["language"]) for e in entries if e["kind"] == "parallel"} == {("en", l2) for l2 in langs[1:]}
    assert runs.world_files(pipe.run, "tokenizer") == {lang: world / "tokenizers" / lang for lang in sorted(langs)}
    assert pipe.world_file("tokenizer", language=langs[1]) == world / "tokenizers" / langs[1]
    assert len(pipe.tokenizer(langs[1])) > 5
