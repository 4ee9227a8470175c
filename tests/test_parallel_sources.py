"""The registry of parallel-text sources (xlviz.data.parallel): one module per source, and
a source added at runtime reaches the CLI's ``--source`` choices and the Alignment and Attention
pages without either naming it."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from xlviz.data import parallel
from xlviz.data.parallel import ParallelData, ParallelSource, Request, parallel_data
from xlviz.errors import XlvizError

APP = str(Path(__file__).resolve().parents[1] / "app.py")


def _toy_read(r: Request) -> ParallelData:
    n = min(r.limit or 3, 3)
    return ParallelData(r.lang_a, r.lang_b or "xb", [f"a{i} sentence" for i in range(n)], [f"b{i} satz" for i in range(n)],
                        [f"toy-{i}" for i in range(n)], f"toy ({r.lang_a}-{r.lang_b})")


TOY = ParallelSource("toy", "Toy pairs", "three made-up pairs", _toy_read, languages=lambda d: ["xa", "xc"],
                     partners=lambda a, d: ["xb"], default_a="xa", default_b="xb")


@pytest.fixture
def toy():
    parallel.register(TOY)
    yield TOY
    parallel.unregister("toy")


def test_the_modules_are_the_registry():
    assert list(parallel.sources()) == ["world", "pud", "tatoeba", "multi30k", "files"]
    assert {s.takes for s in parallel.sources().values()} == {None, "run", "files"}
    with pytest.raises(XlvizError, match="unknown source 'nope'"):
        parallel_data("nope")
    with pytest.raises(XlvizError, match="at least 1"):
        parallel_data("pud", lang_b="de", limit=0)


def test_shared_sources_read_what_they_list(shared_data):
    for name in ("pud", "tatoeba", "multi30k"):
        src = parallel.source_of(name)
        a = src.default_a
        assert a in src.languages(None) and src.default_b in src.partners(a, None), name
        data = parallel_data(name, lang_a=a, lang_b=src.default_b, limit=5)
        assert len(data) == 5 and all(data.src) and all(data.tgt) and len(set(data.ids)) == 5, name


def test_a_source_without_its_data_is_not_offered(tmp_path):
    for name in ("pud", "tatoeba", "multi30k"):
        src = parallel.source_of(name)
        assert src.languages(str(tmp_path)) == [] and not src.available(str(tmp_path))


def test_a_registered_source_reaches_the_cli(toy, capsys):
    from xlviz.cli import build_parser

    alignment = build_parser()._subparsers._group_actions[0].choices["analyse"]._subparsers._group_actions[0].choices["alignment"]
    source = next(a for a in alignment._actions if a.dest == "source")
    assert "toy" in source.choices and "three made-up pairs" in source.help
    assert parallel_data("toy", lang_a="xa", lang_b="xb", limit=2).ids == ["toy-0", "toy-1"]


def test_a_registered_source_reaches_the_pages(toy, tmp_path, monkeypatch):
    from tests.analysis_fixtures import make_analysis_run
    from tests.app_fixtures import charts

    root = tmp_path / "checkpoints"
    make_analysis_run(root, "demo-run")
    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(root))
    monkeypatch.delenv("XLVIZ_SHARED_DATA", raising=False)
    at = AppTest.from_file(APP, default_timeout=180)
    at.session_state["xlviz_models"] = ["run:demo-run:s1_pretrain"]
    at.run()
    at.switch_page("pages/alignment.py").run()
    assert not at.exception, [e.message for e in at.exception]
    assert "Toy pairs" in at.segmented_control(key="al_source").options
    at.segmented_control(key="al_source").set_value("Toy pairs").run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.selectbox(key="al_toy_a").options == ["xa", "xc"] and at.selectbox(key="al_toy_b").value == "xb"
    assert any("toy (xa-xb): 3 pairs" in str(c.value) for c in at.caption)
    at.switch_page("pages/attention.py").run()
    assert "Toy pairs" in at.segmented_control(key="att_source").options
    at.segmented_control(key="att_source").set_value("Toy pairs").run()
    assert not at.exception and not at.error, [e.message for e in at.exception] + [e.value for e in at.error]
    assert at.selectbox(key="att_toy_pair").value == 0 and "a0 sentence" in at.markdown[0].value
    assert "att_heat_A + B" in charts(at)
