"""``xlviz analyse ...`` on a fake run: numbers written as JSON/CSV, clean errors."""

from __future__ import annotations

import csv
import json

import pytest

from xlviz.cli import main
from tests.analysis_fixtures import L2, make_analysis_run


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return make_analysis_run(tmp_path_factory.mktemp("cli") / "checkpoints")


def _csv(path):
    with open(path, encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_alignment_run_json_and_csv(run_dir, tmp_path, capsys):
    out, table = tmp_path / "al.json", tmp_path / "al.csv"
    rc = main(["analyse", "alignment", "--run", str(run_dir), "--l2", L2, "--limit", "8", "--train-fraction", "0.5",
               "--center", "--out", str(out), "--csv", str(table)])
    assert rc == 0
    res = json.loads(out.read_text())
    assert res["meta"]["n_pairs"] == 8 and res["meta"]["center"] is True
    assert [s["name"].split(" · ")[1] for s in res["meta"]["systems"]] == ["transferred", "floor"]
    assert len(res["rows"]) == 6 and {"cka", "retrieval_after", "word_translation_a_to_b"} <= set(res["rows"][0])
    rows = _csv(table)
    assert len(rows) == 6 and rows[0]["layer"] == "0"
    printed = capsys.readouterr().out
    assert "8 pairs" in printed and "transferred" in printed and "floor" in printed


def test_alignment_one_model_on_files(run_dir, tmp_path):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("the cat sees the dog\nthe dog sees the cat\na bird\n")
    b.write_text("the cat sees the dog\nthe dog sees the cat\na bird\n")
    out = tmp_path / "f.json"
    rc = main(["analyse", "alignment", "--source", "files", "--files", str(a), str(b), "--model",
               str(run_dir / "s1_pretrain"), "--out", str(out)])
    assert rc == 0
    rows = json.loads(out.read_text())["rows"]
    assert all(r["retrieval_a_to_b"] == 1.0 and r["cka"] == pytest.approx(1.0) for r in rows)


def test_alignment_corpus_run_without_generated_world(run_dir, tmp_path):
    """A run on real corpora (xlviz transfer-corpus) has no world.json, only world/parallel/<l1>-<l2>.jsonl."""
    import shutil

    corpus_run = tmp_path / "corpus-run"
    shutil.copytree(run_dir, corpus_run)
    (corpus_run / "world" / "world.json").unlink()
    out = tmp_path / "c.json"
    assert main(["analyse", "alignment", "--run", str(corpus_run), "--l2", L2, "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["meta"]["n_pairs"] == 12 and "parallel pairs" in res["meta"]["source"]
    assert "word_translation_a_to_b" not in res["rows"][0]  # no words or dictionary in a corpus run's pairs
    assert main(["analyse", "agreement", "--run", str(corpus_run), "--data", f"world:{L2}"]) == 2


def test_agreement_world_and_items(run_dir, tmp_path, capsys):
    out, items = tmp_path / "agr.json", tmp_path / "items.csv"
    rc = main(["analyse", "agreement", "--run", str(run_dir), "--data", f"world:{L2}", "--max-per-category", "3",
               "--out", str(out), "--items", str(items)])
    assert rc == 0
    res = json.loads(out.read_text())
    models = {r["model"].split(" · ")[1] for r in res["rows"]}
    assert models == {"transferred", "floor"}
    overall = [r for r in res["rows"] if r["category"] == "all"]
    assert all(r["n_total"] == 9 and r["coverage"] == 1.0 for r in overall)
    rows = _csv(items)
    assert len(rows) == 18 and {"masked", "logp_good", "logp_bad", "preferred", "correct"} <= set(rows[0])
    assert "[MASK]" in rows[0]["masked"]
    assert "coverage" in capsys.readouterr().out


def test_agreement_typed_model_on_l1(run_dir, tmp_path):
    out = tmp_path / "en.json"
    assert main(["analyse", "agreement", "--model", str(run_dir / "s1_pretrain"), "--run", str(run_dir),
                 "--data", "world:en", "--max-per-category", "2", "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["meta"]["language"] == "en" and res["rows"][0]["n_total"] == 6


def test_wic_and_probing(run_dir, tmp_path):
    out = tmp_path / "wic.json"
    assert main(["analyse", "wic", "--run", str(run_dir), "--data", "world:en", "--limit", "12", "--folds", "2",
                 "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert [r["layer"] for r in res["rows"]] == [0, 1, 2] and "binary" in res["meta"]["gold_similarity"]
    out = tmp_path / "probing.json"
    table = tmp_path / "probing.csv"
    assert main(["analyse", "probing", "--run", str(run_dir), "--tasks", "agreement", "--max-per-category", "2",
                 "--out", str(out), "--csv", str(table)]) == 0
    res = json.loads(out.read_text())
    assert {r["role"] for r in res["agreement"]} == {"reference", "transferred", "floor"}
    assert res["wic"] == [] and "transferred into L1 (xx→en) on L1 data" in res["meta"]["note"]
    assert {r["task"] for r in _csv(table)} == {"agreement"}
    # word in context runs where the pairs test the context (English); the sov rows would only
    # test whether two words are identical (a homonym's senses are two sov words), so they are named
    out = tmp_path / "probing-wic.json"
    assert main(["analyse", "probing", "--run", str(run_dir), "--tasks", "wic", "--limit", "40", "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert {r["language"] for r in res["wic"]} == {"en"}
    assert res["wic_skipped"] and all(s.endswith("(sov)") for s in res["wic_skipped"])


@pytest.mark.parametrize("argv, message", [
    (["alignment", "--run", "RUN"], "--l2"),
    (["alignment", "--run", "RUN", "--l2", "xx"], "no language 'xx'"),
    (["alignment"], "nothing to compare"),
    (["agreement", "--data", "world:en"], "needs --run DIR"),
    (["agreement", "--run", "RUN", "--data", "wikipedia"], "unknown agreement data"),
    (["wic", "--run", "RUN", "--data", "marvin-linzen"], "world:LANG"),
    (["probing", "--run", "NOPE"], "not a run folder"),
])
def test_errors_are_one_line(run_dir, capsys, argv, message):
    argv = [str(run_dir) if a == "RUN" else a for a in argv]
    assert main(["analyse", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
