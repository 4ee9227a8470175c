"""Metrics by slice: the slice table of a tiny run equals its per-question scores regrouped by
hand; the world's slices read the generator's facts; the table is stored in the run once and
read back while its inputs are unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from xlviz.cli import main as cli
from xlviz.errors import XlvizError
from xlviz.io import atomic_write_json


def _run(tmp_path: Path) -> Path:
    """The app fixture's run (en + sov, 4 test paragraphs) with saved sov predictions of two
    systems: monotrans right on every other question, the floor on every third."""
    from tests.app_fixtures import make_run

    path = make_run(tmp_path, models=False)
    data = json.loads((path / "world" / "qa" / "test.sov.json").read_text())
    qas = [(q, p["context"]) for a in data["data"] for p in a["paragraphs"] for q in p["qas"]]
    for system, every in (("monotrans", 2), ("floor", 3)):
        preds = {q["id"]: q["answers"][0]["text"] if i % every == 0 else ctx.split()[0] for i, (q, ctx) in enumerate(qas)}
        atomic_write_json(path / "predictions" / f"{system}-sov.json", preds)
    return path


def _by_hand(path: Path, system: str) -> list[dict]:
    """Per-question rows: scores from the official per-question scorer, slices read off the ids
    and the text (role = the id's target, facts = the paragraph's distinct fact numbers,
    position = the answer's start over the context's length)."""
    from xlviz.data.squad import language_articles
    from xlviz.evaluation.squad_metric import per_question_scores

    data = json.loads((path / "world" / "qa" / "test.sov.json").read_text())
    preds = json.loads((path / "predictions" / f"{system}-sov.json").read_text())
    scores = {r["id"]: r for r in per_question_scores(data, preds, articles=language_articles(data))}
    rows = []
    for ai, a in enumerate(data["data"]):
        for pi, p in enumerate(a["paragraphs"]):
            facts = {q["id"].split("-")[2] for q in p["qas"]}
            for q in p["qas"]:
                share = q["answers"][0]["answer_start"] / len(p["context"])
                rows.append({"id": q["id"], "paragraph": f"{ai}/{pi}", "f1": scores[q["id"]]["f1"],
                             "exact_match": scores[q["id"]]["exact_match"],
                             "answer role": {"subj": "subject", "obj": "object", "loc": "location"}[q["id"].rsplit("-", 1)[1]],
                             "facts in paragraph": str(len(facts)),
                             "answer position": "first third" if share < 1 / 3 else "middle third" if share < 2 / 3 else "last third"})
    return rows


def test_slice_table_equals_per_question_scores_regrouped_by_hand(tmp_path):
    from xlviz.transfer.slices import compute

    path = _run(tmp_path)
    rep = compute(path, "sov", ["monotrans", "floor"], pair=("monotrans", "floor"), n_resamples=200)
    assert rep.source == "world"
    got = {(r["dimension"], r["value"], r["system"]): r for r in rep.rows}
    hand = {s: _by_hand(path, s) for s in ("monotrans", "floor")}
    checked = 0
    for system, rows in hand.items():
        assert got[("all", "all", system)]["f1"] == pytest.approx(np.mean([r["f1"] for r in rows]), abs=1e-3)
        for dim in ("answer role", "facts in paragraph", "answer position"):
            values = {r[dim] for r in rows}
            assert {v for d, v, s in got if d == dim and s == system} == values
            for v in values:
                mine = [r for r in rows if r[dim] == v]
                row = got[(dim, v, system)]
                assert row["n_questions"] == len(mine)
                assert row["n_paragraphs"] == len({r["paragraph"] for r in mine})
                assert row["f1"] == pytest.approx(np.mean([r["f1"] for r in mine]), abs=1e-3)
                assert row["exact_match"] == pytest.approx(np.mean([r["exact_match"] for r in mine]), abs=1e-3)
                assert row["f1_low"] <= row["f1"] <= row["f1_high"]
                assert rep.members[dim][v] == [r["id"] for r in mine]
                checked += 1
    assert checked >= 10
    diffs = {(d["dimension"], d["value"], d["metric"]): d for d in rep.differences}
    a, b = hand["monotrans"], hand["floor"]
    for v in {r["answer role"] for r in a}:
        want = np.mean([x["f1"] - y["f1"] for x, y in zip(a, b) if x["answer role"] == v])
        assert diffs[("answer role", v, "f1")]["difference"] == pytest.approx(want, abs=1e-3)


def test_world_slices_follow_the_generator():
    from xlviz.data.world import World, WorldConfig
    from xlviz.evaluation.slices import world_slices

    world = World(WorldConfig(seed=1, qa_test_paragraphs=6))
    en = world.qa("test", "en")
    slices = world_slices(world, "en")
    questions = {q["id"]: q for a in en["data"] for p in a["paragraphs"] for q in p["qas"]}
    assert list(slices) == list(questions)
    for qid, s in slices.items():
        q = questions[qid]
        assert s["question word"] == q["question"].split()[0]  # English fronts its wh word
        assert s["answer role"] == {"subj": "subject", "obj": "object", "loc": "location"}[qid.rsplit("-", 1)[1]]
        assert (s["answer type"] == "place") == (s["answer role"] == "location")
        if s["question word"] == "who":
            assert s["answer type"] == "person"
    # the accessor reads the facts; it changes no generated byte
    assert World(WorldConfig(seed=1, qa_test_paragraphs=6)).qa("test", "en") == en


def test_squad_slices_by_hand():
    from xlviz.evaluation.slices import squad_slices

    ctx = "Paris is the capital of France and its largest city by far."
    data = {"data": [{"paragraphs": [{"context": ctx, "qas": [
        {"id": "a", "question": "Which city is the capital of France?", "answers": [{"text": "Paris", "answer_start": 0}]},
        {"id": "b", "question": "Quelle est la plus grande ville?", "answers": [{"text": "its largest city by far", "answer_start": ctx.index("its")}]},
    ]}]}]}
    english = {"data": [{"paragraphs": [{"context": ctx, "qas": [{"id": "b", "question": "How big is it?", "answers": []}]}]}]}
    s = squad_slices(data, english)
    assert s["a"] == {"question word": "which", "answer length": "1 word", "answer position": "first third",
                      "question-context overlap": "two thirds or more"}  # city, capital, france of which, city, the, capital, france
    assert s["b"]["question word"] == "how"  # read from the English file of the same id
    assert s["b"]["answer length"] == "4+ words" and s["b"]["answer position"] == "middle third"


def test_report_slices_stores_once_and_reads_back(tmp_path, capsys):
    from xlviz.runs import artefacts

    path = _run(tmp_path)
    assert cli(["report", "--slices", str(path), "--systems", "monotrans,floor", "--language", "sov"]) == 0
    out = capsys.readouterr().out
    assert "answer role: object" in out and "written to" in out
    stored = [a for a in artefacts(path, "analysis")]
    assert sorted(Path(a.path).suffix for a in stored) == [".csv", ".json"]
    assert cli(["report", "--slices", str(path), "--systems", "monotrans,floor", "--language", "sov"]) == 0
    assert "read from" in capsys.readouterr().out
    # new predictions: the stored table no longer matches and a new one is written beside it
    preds = json.loads((path / "predictions" / "floor-sov.json").read_text())
    atomic_write_json(path / "predictions" / "floor-sov.json", {k: "" for k in preds})
    assert cli(["report", "--slices", str(path), "--systems", "monotrans,floor", "--language", "sov"]) == 0
    assert "written to" in capsys.readouterr().out
    assert len(artefacts(path, "analysis")) == 4


def test_report_slices_names_a_missing_system(tmp_path, capsys):
    path = _run(tmp_path)
    assert cli(["report", "--slices", str(path), "--systems", "monotrans,nosuch", "--language", "sov"]) != 0
    err = capsys.readouterr().err
    assert "nosuch" in err and "Traceback" not in err


def test_slices_view(tmp_path):
    import xlviz.views as xv

    path = _run(tmp_path)
    view = xv.slices(path, "sov", pair=("monotrans", "floor"))
    assert set(view.rows["system"]) == {"monotrans", "floor"}
    ids = view.questions("answer role", "subject")
    assert ids and all(i.endswith("-subj") for i in ids)
    assert "answer role: subject" in view.table.index and "all" in view.table.index
    assert "paired F1 difference" in view._repr_html_()
    assert len(view.figure().data) == 2


# --------------------------------------------------------------------------- the XQuAD page
def test_xquad_page_slices_link_to_their_questions(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from tests.app_fixtures import make_run, open_panel

    root = tmp_path / "checkpoints"
    make_run(root, "demo-run")
    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(root))
    at = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "app.py"), default_timeout=180)
    at.run()
    at.switch_page("pages/xquad.py").run()
    assert not at.exception, [e.message for e in at.exception]
    assert any("Scores by slice" in e.label for e in at.get("expander"))
    assert not [d for d in at.dataframe if "answer role: subject" in d.value.index], "drawn only while open"
    at = open_panel(at, "xq_slices")
    tables = [d.value for d in at.dataframe if "answer role: subject" in d.value.index]
    assert len(tables) == 1 and "all" in tables[0].index and "monotrans" in tables[0].columns
    assert "world generator" in "\n".join(c.value for c in at.caption)
    before = at.selectbox(key="xq_pick").options
    pick = next(o for o in at.selectbox(key="xq_slice").options if o.startswith("answer role: subject"))
    at.selectbox(key="xq_slice").set_value(pick).run()
    assert not at.exception, [e.message for e in at.exception]
    after = at.selectbox(key="xq_pick").options
    assert after and len(after) < len(before) and all(o.split(" — ")[0].endswith("-subj") for o in after)


def test_analysis_files_are_plain_names_under_analyses():
    from xlviz.runs import artefact_relpath

    assert artefact_relpath("analysis", key="slices-0a1b2c.json") == "analyses/slices-0a1b2c.json"
    for bad in ("../x.json", "slices.exe", "Slices-1.json", "a/b.json", ".json", None):
        with pytest.raises(XlvizError):
            artefact_relpath("analysis", key=bad)


def test_a_results_rows_slices_are_the_report_slices_of_its_system(tmp_path):
    """The ``slices`` field a run writes into each results row (``xlviz.transfer.tasks.qa.slice_rows``) is
    ``xlviz report --slices``'s table of that system and language, less its ``all`` row."""
    from xlviz.data.world import load_world
    from xlviz.evaluation.slices import WORLD_DIMENSIONS, row_slices, world_slices
    from xlviz.evaluation.squad_metric import per_question_scores
    from xlviz.evaluation.uncertainty import paragraph_ids
    from xlviz.transfer.slices import compute

    path = _run(tmp_path)
    world = load_world(path / "world")
    data = world.qa("test", "sov")
    preds = json.loads((path / "predictions" / "monotrans-sov.json").read_text())
    got = row_slices(per_question_scores(data, preds, articles=world.articles("sov")), paragraph_ids(data),
                     world_slices(world, "sov"), order=WORLD_DIMENSIONS)
    want = [{k: v for k, v in r.items() if k != "system"} for r in compute(path, "sov", ["monotrans"]).rows if r["dimension"] != "all"]
    assert got == want and len(got) >= 10
    assert {"dimension", "value", "n_questions", "exact_match", "exact_match_low", "f1", "f1_high"} <= set(got[0])


def test_report_slices_of_a_corpus_run_read_its_qa_files(tmp_path, capsys):
    """A corpus run scored XQuAD-style files (``data.qa_eval``) without its trained questions:
    ``xlviz report --slices`` reads the same files, slices the questions it scored (question
    word from the English file of the same ids) and its ``all`` row is the run's score."""
    from xlviz.transfer import slices as run_slices

    def squad(lang, question):  # 2 articles x 2 paragraphs x 3 questions
        data = []
        for a in range(2):
            paras = []
            for p in range(2):
                text = f"the answer is word{a}{p} here and more text follows"
                paras.append({"context": text, "qas": [{"id": f"q{a}{p}{q}", "question": question,
                                                        "answers": [{"text": f"word{a}{p}", "answer_start": 14}]}
                                                       for q in range(3)]})
            data.append({"title": f"t{a}", "paragraphs": paras})
        return {"version": "1.1", "data": data}

    qa = tmp_path / "qa"
    qa.mkdir()
    (qa / "xquad.en.json").write_text(json.dumps(squad("en", "who is the answer?")))
    (qa / "xquad.de.json").write_text(json.dumps(squad("de", "wer ist die antwort?")))
    run = tmp_path / "run"
    (run / "predictions").mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"source": "files", "seed": 0, "data": {
        "l1": "en", "l2": "de", "qa_eval": [str(qa / "xquad.en.json"), str(qa / "xquad.de.json")]}}))
    # q0xx were trained on (not scored); right on article 1's first paragraph only
    preds = {f"q1{p}{q}": ("word10" if p == 0 else "nothing") for p in range(2) for q in range(3)}
    (run / "predictions" / "monotrans-de.json").write_text(json.dumps(preds))
    report = run_slices.compute(run, "de", ["monotrans"])
    assert report.source == "squad"
    rows = {(r["dimension"], r["value"]): r for r in report.rows}
    assert rows[("all", "all")]["n_questions"] == 6 and rows[("all", "all")]["exact_match"] == pytest.approx(50.0)
    assert rows[("question word", "who")]["n_questions"] == 6  # read from the English file: "wer" is no English wh word
    assert {q for ids in report.members.values() for v in ids.values() for q in v} == set(preds)
    assert cli(["report", "--slices", str(run), "--language", "de"]) == 0
    out = capsys.readouterr().out
    assert "the text's slices" in out and "question word: who" in out
