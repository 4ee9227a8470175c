"""Shared fixtures: the real data beside the repo, tiny models, temporary run roots."""

from __future__ import annotations

import os
from pathlib import Path

# Before torch loads: spinning OpenMP threads slow every test several-fold when the cores are shared.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# Under pytest-xdist every worker is one process per core: one thread each, or they fight over cores.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest

REPO = Path(__file__).resolve().parents[1]


def _shared_data() -> Path | None:
    env = os.environ.get("XLVIZ_SHARED_DATA")
    candidates = [Path(env)] if env else []
    candidates += [REPO.parent / "shared" / "data", REPO / ".." / ".." / "shared" / "data"]
    for c in candidates:
        if c.is_dir():
            return c.resolve()
    return None


@pytest.fixture(scope="session")
def shared_data() -> Path:
    path = _shared_data()
    if path is None:
        pytest.skip("../shared/data is absent (real XQuAD/PUD/Tatoeba/Multi30k data sets); set XLVIZ_SHARED_DATA to run this test")
    return path


@pytest.fixture(scope="session", autouse=True)
def _runs_under_basetemp(tmp_path_factory):
    """--run-dir must lie inside the checkpoints root: let tests' tmp_path run folders qualify
    (also when scripts/test.sh set XLVIZ_CHECKPOINTS to a folder of its own)."""
    os.environ["XLVIZ_CHECKPOINTS"] = str(tmp_path_factory.getbasetemp())
    yield


@pytest.fixture()
def checkpoints(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "checkpoints"
    root.mkdir()
    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(root))
    return root


def _module_cost(items: list) -> dict:
    """A rough cost per test module, to hand the longest ones out first: a browser module starts
    a server and a browser, a `slow` test trains whole runs."""
    cost: dict = {}
    for item in items:
        key = item.nodeid.split("::", 1)[0]
        weight = 1
        if item.get_closest_marker("browser"):
            weight = 30
        elif item.get_closest_marker("slow"):
            weight = 10
        cost[key] = cost.get(key, 0) + weight
    return cost


def pytest_collection_modifyitems(config, items):
    """Longest modules first (a stable sort, so tests keep their order inside a module): with
    `--dist loadfile` each module goes whole to one worker, and a long module handed out last
    would leave the other worker idle at the end."""
    cost = _module_cost(items)
    items.sort(key=lambda item: -cost[item.nodeid.split("::", 1)[0]])
