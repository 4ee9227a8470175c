"""Data flows one way: the imports between packages go down the layers (data -> models ->
training -> methods -> evaluation -> analysis -> transfer -> views -> ui -> commands -> pages), and
docs/architecture.md's picture of them is the code's (scripts/architecture.py --write)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _architecture():
    spec = importlib.util.spec_from_file_location("architecture", REPO / "scripts" / "architecture.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_import_goes_up_the_layers():
    arch = _architecture()
    graph = arch.edges()
    assert ("methods", "models") in graph and ("pages", "ui") in graph  # the scan sees the imports
    assert arch.violations(graph) == []


def test_the_checker_finds_an_upward_import():
    arch = _architecture()
    assert arch.violations({("data", "methods"): ["xlviz/data/x.py:1"]}) == [
        "data (layer 0) imports methods (layer 3) (xlviz/data/x.py:1)"]
    assert arch.violations({("models", "training"): ["xlviz/models/veco.py:231"]})  # the span loss lived in training
    assert arch.violations({("runs", "methods"): ["xlviz/runs.py:1"]})  # utilities import no layer
    assert arch.violations({("newpkg", "data"): ["xlviz/newpkg/a.py:1"]})  # every package has a layer
    assert arch.violations({("views", "cli"): ["xlviz/views/runs.py:144"]}) == []  # a documented exception
    assert arch.violations({("views", "ui"): ["xlviz/views/qa.py:1"]}) == [
        "views (layer 7) imports ui (layer 8) (xlviz/views/qa.py:1)"]  # the Streamlit layer sits above the views


def test_the_architecture_doc_draws_the_current_imports():
    arch = _architecture()
    assert arch.current_doc_block() == arch.block(arch.edges()), "run: python scripts/architecture.py --write"
