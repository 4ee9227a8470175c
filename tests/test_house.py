"""One house plan: one model reference, one floor builder, no import circles, one place for a
run's world files.

- The untrained L2 embedding matrix (step 2's starting point and, untrained, the floor) is
  drawn in ``xlviz/models/floor.py`` alone: its builders are defined nowhere else, every
  module that uses them imports them from there, and the modules that once held their own
  copy (MONOTRANS's world and corpus stages, the analyses' floor) call ``floor_model``.
- The model reference (``ModelSpec``) and its loader live in ``xlviz/models/reference.py`` and
  import no torch (the pages name models with it before loading any).
- No two modules of ``xlviz/`` import each other, directly or round a circle, counting the
  imports inside functions (``scripts/architecture.py``'s ``module_cycles``).
- Streamlit stays in ``xlviz/ui``: no module under ``xlviz/views`` (the Streamlit-free code the
  pages and notebooks share, one module per view) imports Streamlit or ``xlviz.ui``, at module
  level or inside a function; and every module of ``xlviz/ui`` that holds code imports Streamlit
  (what does not need it belongs in ``xlviz/views``), but for the exceptions named below.
- No module builds a path into a run's ``world/`` folder by hand (``run / "world" / "qa" /
  f"test.{lang}.json"``, ``ctx.path("world", "tokenizers", lang)``): the world stage records
  its files in the run's manifest and readers ask ``xlviz.runs.world_path`` / ``world_files``,
  which fall back to the conventional places for runs made before (``tests/test_manifest.py``).
Checked on the source (AST), so the checks also run where torch is slow to import.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FLOOR_MODULE = "xlviz/models/floor.py"
# The functions that build the untrained rows: step 2's starting point and its primitives.
FLOOR_BUILDERS = ("floor_model", "make_l2_mlm", "new_l2_embeddings")
# Modules that call the primitive make_l2_mlm rather than floor_model, and why.
PRIMITIVE_CALLERS = {
    "xlviz/methods/clwe.py": "every row past the special ones is replaced by the mapped CLWE vectors: none stays untrained",
    "bench/bench_analysis.py": "a randomly initialised stand-in model for timing the analyses, not a run's floor",
}
# The modules that each built the floor their own way before: they call floor_model now.
FLOOR_CALLERS = ("xlviz/methods/monotrans.py", "xlviz/models/reference.py", "xlviz/methods/into_l1.py")
REFERENCE = ("ModelSpec", "load_spec", "load_tokenizer")


def _architecture():
    spec = importlib.util.spec_from_file_location("architecture", REPO / "scripts" / "architecture.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _sources() -> dict[str, str]:
    """``{path: source}`` of the package, the pages, the bench and the scripts (not the tests)."""
    files = [*REPO.glob("xlviz/**/*.py"), *REPO.glob("pages/*.py"), REPO / "app.py", *REPO.glob("bench/*.py"),
             *REPO.glob("scripts/*.py")]
    return {str(f.relative_to(REPO)): f.read_text() for f in sorted(files)}


def floor_problems(files: dict[str, str]) -> list[str]:
    """Where ``files`` (``{path: source}``) build untrained L2 rows outside the floor module."""
    problems = []
    for path, text in files.items():
        tree = ast.parse(text)
        defined = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        called = {n.func.id if isinstance(n.func, ast.Name) else n.func.attr for n in ast.walk(tree)
                  if isinstance(n, ast.Call) and isinstance(n.func, (ast.Name, ast.Attribute))}
        imported = {(n.module, a.name) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        if path == FLOOR_MODULE:
            problems += [f"{path} does not define {name}" for name in FLOOR_BUILDERS if name not in defined]
            continue
        problems += [f"{path} defines {name} (the floor module's)" for name in FLOOR_BUILDERS if name in defined]
        for module, name in imported:
            if name in FLOOR_BUILDERS and module != "xlviz.models.floor":
                problems.append(f"{path} imports {name} from {module}, not xlviz.models.floor")
        for name in ("make_l2_mlm", "new_l2_embeddings"):
            if name in called and path not in PRIMITIVE_CALLERS:
                problems.append(f"{path} calls {name}: build step 2's starting point with floor_model")
        if path in FLOOR_CALLERS and "floor_model" not in called:
            problems.append(f"{path} no longer calls floor_model")
    return problems


def test_one_floor_builder():
    assert floor_problems(_sources()) == []


def test_the_floor_check_finds_a_second_builder():
    copy = ("import torch\n"
            "def floor(l1, n, seed):\n"
            "    from xlviz.models.monotrans import make_l2_mlm\n"
            "    return make_l2_mlm(l1, n, seed=seed)\n")
    assert floor_problems({"xlviz/analysis/reports.py": copy}) == [
        "xlviz/analysis/reports.py imports make_l2_mlm from xlviz.models.monotrans, not xlviz.models.floor",
        "xlviz/analysis/reports.py calls make_l2_mlm: build step 2's starting point with floor_model"]
    assert floor_problems({"xlviz/methods/monotrans.py": "def new_l2_embeddings(x):\n    return x\n"}) == [
        "xlviz/methods/monotrans.py defines new_l2_embeddings (the floor module's)", "xlviz/methods/monotrans.py no longer calls floor_model"]
    assert floor_problems({FLOOR_MODULE: "def floor_model():\n    pass\n"}) == [
        f"{FLOOR_MODULE} does not define make_l2_mlm", f"{FLOOR_MODULE} does not define new_l2_embeddings"]


def test_the_model_reference_lives_in_models_and_imports_no_torch():
    where = {path: sorted(n.name for n in ast.walk(ast.parse(text))
                          if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name in REFERENCE)
             for path, text in _sources().items()}
    assert {p: names for p, names in where.items() if names} == {"xlviz/models/reference.py": sorted(REFERENCE)}
    code = ("import sys\n"
            "from xlviz.models.reference import ModelSpec\n"
            "import xlviz.analysis.reports\n"
            "assert hash(ModelSpec('x')) == hash(ModelSpec('x'))\n"
            "print('torch' in sys.modules, 'transformers' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["False", "False"]


def test_no_import_cycle_between_modules():
    arch = _architecture()
    assert arch.module_cycles() == []


def test_the_cycle_check_finds_a_circle_through_a_function():
    arch = _architecture()
    files = {"x": "", "x.a": "import x.b\n", "x.b": "def f():\n    from x.c import g\n", "x.c": "from x import a\n",
             "x.d": "from x.a import h\n"}
    assert arch.cycles(arch.module_edges(files)) == [["x.a", "x.b", "x.c"]]
    files["x.c"] = "import json\nfrom x import d\n"  # x.d imports x.a: still a circle, one module longer
    assert arch.cycles(arch.module_edges(files)) == [["x.a", "x.b", "x.c", "x.d"]]
    files["x.c"] = "import json\n"
    assert arch.cycles(arch.module_edges(files)) == []


# --------------------------------------------------------------------------- Streamlit stays in ui
# Modules of xlviz/ui that hold code but import no Streamlit, and why they stay there (none today).
UI_WITHOUT_STREAMLIT: dict[str, str] = {}


def imported_modules(text: str, module: str) -> list[tuple[int, str]]:
    """``(line, module)`` for every import of ``text`` (module ``module``), module level or inside a
    function; ``from a import b`` counts as ``a.b`` (it may name a submodule), a relative import
    is resolved against ``module``'s package."""
    out = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".")[: -node.level]
                base = ".".join(package + ([base] if base else []))
            out += [(node.lineno, f"{base}.{a.name}" if base else a.name) for a in node.names]
    return out


def _below(name: str, top: str) -> bool:
    return name == top or name.startswith(top + ".")


def layer_problems(files: dict[str, str]) -> list[str]:
    """Imports of Streamlit or ``xlviz.ui`` under ``xlviz/views``, and modules of ``xlviz/ui``
    that hold code without importing Streamlit (not in :data:`UI_WITHOUT_STREAMLIT`)."""
    problems = []
    for path, text in sorted(files.items()):
        module = path[:-3].replace("/", ".").removesuffix(".__init__")
        if path.endswith("__init__.py"):
            module += ".__init__"  # a package's relative imports start from the package itself
        imports = imported_modules(text, module)
        if path.startswith("xlviz/views/"):
            problems += [f"{path}:{line} imports {name}" for line, name in imports
                         if _below(name, "streamlit") or _below(name, "xlviz.ui")]
        elif path.startswith("xlviz/ui/") and path not in UI_WITHOUT_STREAMLIT:
            body = [n for n in ast.parse(text).body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))
                    and not (isinstance(n, ast.ImportFrom) and n.module == "__future__")]
            if body and not any(_below(name, "streamlit") for _, name in imports):
                problems.append(f"{path} imports no Streamlit: its code belongs in xlviz/views")
    return problems


def test_streamlit_stays_in_ui_and_views_never_import_it():
    files = {p: t for p, t in _sources().items() if p.startswith(("xlviz/views/", "xlviz/ui/"))}
    assert "xlviz/views/attention.py" in files and "xlviz/ui/common.py" in files  # the scan sees both packages
    assert layer_problems(files) == []
    assert all(why for why in UI_WITHOUT_STREAMLIT.values())


def test_the_layer_check_finds_streamlit_in_views_and_plain_code_in_ui():
    files = {
        "xlviz/views/a.py": "import streamlit as st\n",
        "xlviz/views/b.py": "def f():\n    from xlviz.ui.common import guard\n",  # inside a function too
        "xlviz/views/c.py": "from xlviz import ui\n",
        "xlviz/views/d.py": "from streamlit.runtime import Runtime\n",
        "xlviz/views/sub/__init__.py": "from ...ui import tables\n",  # relative: xlviz.ui.tables
        "xlviz/views/e.py": "from xlviz.views.qa import score\nimport streamlined\nfrom xlviz.uix import y\n",
        "xlviz/ui/f.py": '"""Docs."""\nfrom __future__ import annotations\n\nX = 1\n',
        "xlviz/ui/g.py": "def g():\n    import streamlit as st\n",
        "xlviz/ui/__init__.py": '"""The package: a docstring only."""\n',
    }
    assert layer_problems(files) == [
        "xlviz/ui/f.py imports no Streamlit: its code belongs in xlviz/views",
        "xlviz/views/a.py:1 imports streamlit",
        "xlviz/views/b.py:2 imports xlviz.ui.common.guard",
        "xlviz/views/c.py:1 imports xlviz.ui",
        "xlviz/views/d.py:1 imports streamlit.runtime.Runtime",
        "xlviz/views/sub/__init__.py:1 imports xlviz.ui.tables",
    ]


# --------------------------------------------------------------------------- a run's world files
# Where a run's world/ folder may be joined into a path by hand: the module that names its files.
WORLD_PATH_WRITERS = {
    "xlviz/runs.py": "names the world's files (world_relpath, artefact_relpath) and finds them (world_path)",
    "xlviz/methods/joint.py": "the joint methods' own vocabularies (world/tokenizers-joint), written and read by their stages only",
}
PATH_CALLS = ("path", "joinpath", "Path", "PurePath", "PosixPath", "join")
WORLD_FOLDERS = ("qa", "parallel", "tokenizers")
WORLD_TEXT = re.compile(r"world/(?:qa|parallel|tokenizers|world\.json)")


def _path_parts(node: ast.AST) -> list[str]:
    """The parts of a path expression: ``a / "world" / f"test.{x}.json"`` -> ["<expr>", "world",
    "test.{}.json"]; a name or attribute that says ``world`` (``info.world_dir``) is "<world>"."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        return _path_parts(node.left) + _path_parts(node.right)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return ["".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)]
    if isinstance(node, ast.Starred):
        return _path_parts(node.value)
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    return ["<world>" if "world" in name.lower() else "<expr>"]


def hand_built_world_paths(files: dict[str, str]) -> list[str]:
    """``path:line: the path`` for every path into a run's world/ folder built by hand outside
    :data:`WORLD_PATH_WRITERS`: a ``/`` chain or a path call (``Path``, ``joinpath``,
    ``ctx.path``, ``os.path.join``) with a ``"world"`` part, or a world-named folder joined with
    ``qa`` / ``parallel`` / ``tokenizers``; or a text (not a docstring) that spells such a path
    with a value in it (``f"world/parallel/{l1}-{l2}.jsonl"``)."""
    found = []
    for path, text in files.items():
        if path in WORLD_PATH_WRITERS:
            continue
        tree = ast.parse(text)
        docstrings = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}
        inner = {id(n.left) for n in ast.walk(tree) if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div)}
        for node in ast.walk(tree):
            parts: list[str] = []
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and id(node) not in inner:
                parts = _path_parts(node)
            elif isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name)):
                name = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
                parts = [p for a in node.args for p in _path_parts(a)] if name in PATH_CALLS else []
            elif isinstance(node, ast.JoinedStr) and id(node) not in docstrings:
                spelled = _path_parts(node)[0]
                if re.search(WORLD_TEXT.pattern + r"/[^<>]*\{\}", spelled):
                    found.append(f"{path}:{node.lineno}: {spelled}")
                continue
            if any(p == "world" or p.startswith("world/") for p in parts) or (
                    "<world>" in parts and any(p in WORLD_FOLDERS for p in parts)):
                found.append(f"{path}:{node.lineno}: {'/'.join(parts)}")
    return found


def test_no_module_builds_a_world_path_by_hand():
    found = hand_built_world_paths(_sources())
    assert found == [], "paths into a run's world/ built by hand (ask xlviz.runs.world_path):\n" + "\n".join(found)


def test_the_world_path_check_finds_the_old_ways():
    """Each way a reader built a world path before (all of them were in the code), and none of
    the unrelated uses of the word: a stage name, a source name, a config key, a docstring."""
    old = {
        "a.py": 'file = r.path / "world" / "qa" / f"test.{lg}.json"\n',
        "b.py": 'tok = ctx.path("world", "tokenizers", lang)\n',
        "c.py": 'world = load_world(Path(run_dir) / "world")\n',
        "d.py": 'spec = str(info.world_dir / "tokenizers" / info.l1)\n',
        "e.py": 'folder = Path(run_path).joinpath("world", "parallel")\n',
        "f.py": 'raise XlvizError(f"no world/parallel/{l1}-{l2}.jsonl")\n',
        "g.py": 'stamp = os.path.join(run, "world/world.json")\n',
    }
    assert [hit.split(":")[0] for hit in hand_built_world_paths(old)] == list(old)
    unrelated = ('"""Reads world/qa/test.<lang>.json."""\n'
                 'WORLD = Stage("world", "data", run=run_world)\n'
                 'data = parallel_data("world", run_dir=run, l2=l2)\n'
                 'world = cfg.get("world")\n'
                 'p.add_argument("--source", default="world", help="a corpus run\'s world/parallel/<l1>-<l2>.jsonl")\n'
                 'atomic_write_json(d / "qa" / f"test.{lang}.json", qa)\n'
                 'ok = (Path(world_dir) / "world.json").is_file()\n')
    assert hand_built_world_paths({"x.py": unrelated}) == []
    assert hand_built_world_paths({"xlviz/runs.py": old["a.py"]}) == []  # the module that names them


# --- every setting declared once -----------------------------------------------------------------
# Run settings whose default was restated by hand (the CLI, the merge, the forms, the trainers):
# a number for them is written only where it is declared, or where a declared start differs.
BUDGET_SETTINGS = ("pretrain_steps", "transfer_steps", "finetune_steps", "mlm_batch_size", "corpus_documents",
                   "qa_train_paragraphs", "qa_test_paragraphs", "mlm_probability", "mlm_random_share")
# The masking functions' parameters the two masking settings become (xlviz.training.masking).
MASKING_PARAMETERS = ("prob", "random_share")
# (file, the class or variable there) that may write a number for them, and why.
SETTING_NUMBERS = {
    ("xlviz/transfer/settings.py", "RunSettings"): "the settings' declarations",
    ("xlviz/data/world.py", "WorldConfig"): "the world's flagged settings' declarations",
    ("xlviz/views/forms.py", "FORM_BUDGET"): "the Runs and Sweeps forms' small starting budget",
    ("xlviz/data/sources/files.py", "CORPUS_DEFAULTS"): "what corpus sources size otherwise than the world (Source.defaults)",
    ("xlviz/training/masking.py", "MASK_PROBABILITY"): "BERT's masking, the masking settings' defaults",
    ("xlviz/training/masking.py", "RANDOM_SHARE"): "BERT's masking, the masking settings' defaults",
}


def _number(node: ast.AST) -> bool:
    return (isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
            or isinstance(node, ast.UnaryOp) and _number(node.operand))


def _owner(stmt: ast.stmt) -> str:
    """The class or variable a module-level statement defines."""
    if isinstance(stmt, (ast.ClassDef, ast.FunctionDef)):
        return stmt.name
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [getattr(stmt, "target", None)]
    return next((t.id for t in targets if isinstance(t, ast.Name)), "")


def restated_numbers(files: dict[str, str], names=BUDGET_SETTINGS, parameters=MASKING_PARAMETERS) -> list[str]:
    """Where ``files`` write a number for one of the settings ``names`` (a keyword, a dict key, a
    class field, a ``getattr`` fallback) or for a masking function's ``parameters`` (a default or
    a keyword), outside :data:`SETTING_NUMBERS`."""
    problems = []
    for path, text in files.items():
        for stmt in ast.parse(text).body:
            if (path, _owner(stmt)) in SETTING_NUMBERS:
                continue
            for node in ast.walk(stmt):
                found = []
                if isinstance(node, ast.Call):
                    found += [k.arg for k in node.keywords if k.arg in (*names, *parameters) and _number(k.value)]
                    if isinstance(node.func, ast.Name) and node.func.id == "getattr" and len(node.args) == 3 \
                            and isinstance(node.args[1], ast.Constant) and node.args[1].value in names and _number(node.args[2]):
                        found.append(node.args[1].value)
                elif isinstance(node, ast.Dict):
                    found += [k.value for k, v in zip(node.keys, node.values)
                              if isinstance(k, ast.Constant) and k.value in names and _number(v)]
                elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id in names \
                        and node.value is not None and (_number(node.value) or isinstance(node.value, ast.Call)
                                                        and node.value.args and _number(node.value.args[0])):
                    found.append(node.target.id)
                elif isinstance(node, ast.arguments):
                    args = [*node.posonlyargs, *node.args]
                    pairs = [*zip(args[len(args) - len(node.defaults):], node.defaults), *zip(node.kwonlyargs, node.kw_defaults)]
                    found += [a.arg for a, d in pairs if d is not None and a.arg in (*names, *parameters) and _number(d)]
                problems += [f"{path}:{getattr(node, 'lineno', stmt.lineno)} writes a number for {name}" for name in found]
    return problems


def test_each_setting_has_one_default():
    """``pretrain_steps`` and the other budget settings have their one default in their
    declaration; a form starts from a smaller budget only through FORM_BUDGET; the masking
    settings are read through xlviz.training.masking with BERT's shares declared there."""
    files = {p: t for p, t in _sources().items() if p.startswith(("xlviz/", "pages/")) or p == "app.py"}
    assert restated_numbers(files) == []
    from xlviz.transfer.settings import RunSettings
    from xlviz.views.forms import FORM_BUDGET

    assert RunSettings().pretrain_steps > FORM_BUDGET["pretrain_steps"]  # the forms' budget is a smaller start


def test_the_default_check_finds_a_restated_default():
    form = ("from dataclasses import dataclass\n"
            "@dataclass\n"
            "class TransferForm:\n"
            "    pretrain_steps: int = 120\n"
            "def argv(self):\n"
            "    return dict(pretrain_steps=100, workers=0)\n")
    assert restated_numbers({"xlviz/views/runs.py": form}) == [
        "xlviz/views/runs.py:4 writes a number for pretrain_steps", "xlviz/views/runs.py:6 writes a number for pretrain_steps"]
    staged = ("def judge(self, monitor):\n"
              "    return mlm_verdict(monitor, random_share=getattr(self.cfg, 'mlm_random_share', 0.1))\n"
              "def mask(ids, prob=0.15):\n"
              "    return ids\n")
    assert restated_numbers({"xlviz/training/staged.py": staged}) == [
        "xlviz/training/staged.py:2 writes a number for mlm_random_share", "xlviz/training/staged.py:3 writes a number for prob"]
    assert restated_numbers({"xlviz/views/forms.py": "FORM_BUDGET = {'pretrain_steps': 120}\n"}) == []
    assert restated_numbers({"xlviz/views/forms.py": "OTHER = {'pretrain_steps': 120}\n"}) == [
        "xlviz/views/forms.py:1 writes a number for pretrain_steps"]


def test_every_setting_has_a_flag_and_the_merge_is_generated():
    """Every field of the run settings and of each source's options is a declared setting with
    a flag of ``xlviz transfer`` (a nested one through its own fields), ``demo`` and ``sweep``
    share the flags of EVERY_COMMAND, and a flag's value lands at its setting's place in the
    config (the world's in ``world``, a source option's in ``data``)."""
    import argparse
    import dataclasses

    from xlviz.cli import build_parser
    from xlviz.data.sources import sources
    from xlviz.fields import declared
    from xlviz.transfer.settings import EVERY_COMMAND, RunSettings, named_settings, run_settings, with_flags

    classes = [RunSettings, *(s.options_class for s in sources().values() if s.options_class is not None)]
    undeclared = [f"{c.__name__}.{f.name}" for c in classes for f in dataclasses.fields(c) if not declared(c, f.name)]
    assert undeclared == []
    settings = run_settings()
    assert {s.path for s in settings} >= {f"data.{f.name}" for c in classes[1:] for f in dataclasses.fields(c)}
    assert {s.path.partition(".")[0] for s in settings} >= {f.name for f in dataclasses.fields(RunSettings)}
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    flags = {cmd: {o for a in sub.choices[cmd]._actions for o in a.option_strings} for cmd in ("transfer", "demo", "sweep")}
    assert sorted(s.flag for s in settings if s.flag not in flags["transfer"]) == []
    for cmd in ("demo", "sweep"):
        assert {s.flag for s in named_settings(EVERY_COMMAND)} <= flags[cmd]
    samples = {int: 7, float: 0.25, str: "x", bool: True}
    for s in settings:
        value = samples.get(s.type, ["a", "b"])
        args = argparse.Namespace(**{s.name: value if s.type is not bool else (not s.default)})
        if s.meta.get("parse") is not None or s.type is bool and s.default is None:
            continue
        d = with_flags(args, {"source": "files"} if s.path.startswith("data.") else {})
        home, _, key = s.path.rpartition(".")
        assert (d[home] if home else d)[key] == (value if s.type is not bool else not s.default), s.path


# --- stages typed, scoring in the tasks ----------------------------------------------------------
# The one module that spells a scoring stage's name on disk (xlviz.runs.scoring_stage) and reads
# names of runs made before the manifest (legacy_artefacts).
STAGE_NAMER = "xlviz/runs.py"
SCORE_PREFIX = "s4_"
# What QA scoring is made of: the pipeline schedules the tasks' scoring and imports none of it.
SCORING_MODULES = ("xlviz.evaluation", "xlviz.data.squad", "xlviz.transfer.qa", "xlviz.analysis")  # and any task module


def stage_names_by_hand(files: dict[str, str]) -> list[str]:
    """``path:line: text`` for every text (not a docstring) outside :data:`STAGE_NAMER` that
    spells a scoring stage's prefix (``f"s4_{system}"``, ``stage.startswith("s4_")``,
    ``"s4_" + lang``): built as a string or parsed from one rather than asked of
    :func:`xlviz.runs.scoring_stage` and kept typed."""
    found = []
    for path, text in files.items():
        if path == STAGE_NAMER:
            continue
        tree = ast.parse(text)
        docstrings = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}
        parts = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}  # read with their f-string
        for node in ast.walk(tree):
            if id(node) in docstrings or id(node) in parts:
                continue
            if isinstance(node, ast.JoinedStr):
                spelled = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                spelled = node.value
            else:
                continue
            if spelled.startswith(SCORE_PREFIX):
                found.append(f"{path}:{node.lineno}: {spelled}")
    return sorted(set(found))


def scoring_imports(text: str) -> list[str]:
    """The modules of QA scoring (:data:`SCORING_MODULES`, a task's own module) a module
    imports, at the top or inside a function (the task registry, ``xlviz.transfer.tasks``, is
    how a run reaches its tasks)."""
    names = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return sorted({n for n in names if n.startswith("xlviz.transfer.tasks.") or any(n == m or n.startswith(m + ".") for m in SCORING_MODULES)})


def test_no_stage_name_is_built_or_parsed_by_hand():
    found = stage_names_by_hand(_sources())
    assert found == [], "scoring stage names spelt by hand (ask xlviz.runs.scoring_stage, keep the stage typed):\n" + "\n".join(found)


def test_the_stage_name_check_finds_the_old_ways():
    old = {
        "a.py": 'scored = [f"s4_{system}" for system in systems]\n',
        "b.py": 'if stage.startswith("s4_") and stage[3:] in systems:\n    pass\n',
        "c.py": 'name = "s4_" + lang\n',
    }
    assert [hit.split(":")[0] for hit in stage_names_by_hand(old)] == list(old)
    unrelated = ('"""One ``s4_<system>`` stage per system."""\n'
                 'def f():\n    """Scored in ``s4_<system>``."""\n'
                 'name = scoring_stage(system)\n'
                 'stage = "s3_finetune"\n')
    assert stage_names_by_hand({"x.py": unrelated}) == []
    assert stage_names_by_hand({STAGE_NAMER: old["a.py"]}) == []  # the module that names them


def test_the_pipeline_schedules_and_scores_nothing():
    """The transfer pipeline imports no piece of QA scoring (the metric, predictions, SQuAD
    reading, the QA run's helpers, a task's module): the tasks score, it schedules."""
    text = (REPO / "xlviz" / "transfer" / "pipeline.py").read_text()
    assert scoring_imports(text) == []
    assert scoring_imports("from xlviz.evaluation.squad_metric import evaluate_squad\n"
                           "def f():\n    from xlviz.transfer.tasks.qa import judge\n") == [
        "xlviz.evaluation.squad_metric", "xlviz.transfer.tasks.qa"]
    assert scoring_imports("from xlviz.transfer.tasks import task_of\nfrom xlviz.transfer.exports import export_encoders\n") == []


# MONOTRANS's stages on a corpus source live in its own module (``corpus_stages``), the pieces
# every method's corpus stages share in xlviz/methods/corpus.py: no second MONOTRANS module.
FOLDED_MODULES = ("xlviz/methods/stream.py",)


def test_monotrans_corpus_stages_live_in_the_method_module():
    assert [m for m in FOLDED_MODULES if (REPO / m).exists()] == []
    monotrans = ast.parse((REPO / "xlviz/methods/monotrans.py").read_text())
    defined = {n.name for n in monotrans.body if isinstance(n, ast.FunctionDef)}
    assert {"corpus_stages", "new_l2_model", "l2_model"} <= defined
    imports = [f"{n.module}" for path, text in _sources().items() for n in ast.walk(ast.parse(text))
               if isinstance(n, ast.ImportFrom) and n.module == "xlviz.methods" and any(a.name == "stream" for a in n.names)]
    assert imports == []


# A method's stages read the run's data through ``ctx.data`` (xlviz.data.sources.RunData), the
# same way on every source. These are the only places in xlviz/methods that still ask which
# source it is (``on_corpus``, ``source_kind``, a source's ``kind``) or hold the generated world
# itself (``ctx.world``), each where the premise truly differs.
SOURCE_BRANCHES = {
    ("xlviz/methods/base.py", "on_corpus_config"): "the config-level predicate itself (what a method needs there)",
    ("xlviz/methods/base.py", "needs"): "a system with corpus stages needs the two corpora only there (it is scored by the tasks)",
    ("xlviz/methods/common.py", "run_world"): "the world stage generates and writes the world itself",
    ("xlviz/methods/common.py", "data_stage"): "the data stage differs: the generated world, or vocabularies learned on files",
    ("xlviz/methods/common.py", "new_body_config"): "the corpus runs were measured with the run's dropout, the world's without",
    ("xlviz/methods/common.py", "train_mlm"): "streamed blocks and global batches on files; in-memory batches per process on the world",
    ("xlviz/methods/clwe.py", "run_vectors"): "VecMap's loop follows the run's budget on real vocabularies",
    ("xlviz/methods/clwe.py", "stages"): "a corpus run scores by its tasks: no QA fine-tuning stage",
    ("xlviz/methods/joint.py", "stages"): "a corpus run scores by its tasks: no QA fine-tuning stage",
    ("xlviz/methods/ppa.py", "stages"): "a corpus run scores by its tasks: no QA fine-tuning stage",
    ("xlviz/methods/veco.py", "stages"): "a corpus run scores by its tasks: no QA fine-tuning stage",
    ("xlviz/methods/wu.py", "stages"): "a corpus run scores by its tasks: no QA fine-tuning stage",
    ("xlviz/methods/joint.py", "joint_blocks"): "no long blocks on streamed text (the corpus runs were measured without)",
    ("xlviz/methods/joint.py", "block_batches"): "a shuffle buffer for streamed text",
    ("xlviz/methods/monotrans.py", "stages"): "MONOTRANS's corpus stages (init_model, step 1b, streamed, seeded by place)",
    ("xlviz/methods/monotrans.py", "encoder_stages"): "MONOTRANS's corpus stages",
    ("xlviz/methods/monotrans.py", "encoder"): "MONOTRANS's corpus stages wrote its models",
    ("xlviz/methods/monotrans.py", "dictionary"): "the oracle counts the generated world's gold dictionary",
    ("xlviz/methods/wechsel.py", "dictionary_split"): "the gold dictionary's held-out split is the world's (gold_split)",
    ("xlviz/methods/ppa.py", "check_run"): "the world's parallel training pairs are sized by its config; a corpus source's by its files",
    ("xlviz/methods/wechsel.py", "run_vectors"): "static vectors trained on the world's corpus items",
}


def source_branches(files: dict[str, str]) -> set[tuple[str, str]]:
    """(path, innermost function) of each place in ``files`` that asks which source the run
    reads (``on_corpus``, ``on_corpus_config``, ``source_kind``, ``<x>.kind ==``) or holds the
    generated world itself (``ctx.world``)."""
    found = set()

    def hit(n: ast.AST) -> bool:
        return (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("on_corpus", "on_corpus_config")
                or isinstance(n, ast.Attribute) and n.attr == "source_kind"
                or isinstance(n, ast.Compare) and isinstance(n.left, ast.Attribute) and n.left.attr == "kind"
                or isinstance(n, ast.Attribute) and n.attr == "world" and isinstance(n.value, ast.Name) and n.value.id == "ctx")

    def visit(node: ast.AST, path: str, fn: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else fn
            if hit(child):
                found.add((path, inner))
            visit(child, path, inner)

    for path, text in files.items():
        visit(ast.parse(text), path, "<module>")
    return found


def test_methods_read_the_run_data_the_same_way_on_every_source():
    methods = {p: t for p, t in _sources().items() if p.startswith("xlviz/methods/")}
    assert source_branches(methods) == set(SOURCE_BRANCHES)


def test_the_source_branch_check_finds_a_new_branch():
    text = "def stage(ctx):\n    return ctx.world.l1 if ctx.source_kind == 'world' else ctx.data.l1\n"
    assert source_branches({"xlviz/methods/x.py": text}) == {("xlviz/methods/x.py", "stage")}
    assert source_branches({"xlviz/methods/x.py": "def stage(ctx):\n    return ctx.data.l1\n"}) == set()


def test_the_world_and_the_corpus_sources_give_the_same_run_data():
    from xlviz.data.sources import RunData
    from xlviz.data.sources.files import CorpusData
    from xlviz.data.sources.world import WorldData

    members = {n for n in vars(RunData) if not n.startswith("_")} | set(RunData.__annotations__)
    assert {"l1", "l2s", "corpus", "sample", "qa", "dictionary", "parallel_train", "kind"} <= members
    for cls in (WorldData, CorpusData):
        assert sorted(n for n in members if not hasattr(cls, n)) == [], cls.__name__
    assert (WorldData.kind, CorpusData.kind) == ("world", "corpus")
