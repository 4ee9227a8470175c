"""Bad input a hostile or careless user gives: the report checks what it averages, flags and
corpus files are refused before anything is made, and every error is one bounded line.

Fast: hand-made run folders (results.json, verdicts.json, manifest.json, config.json), tiny
models from tests/tiny_models.py; nothing trains. ``CASES`` counts the cases tried per group.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pytest

from xlviz.cli import main as cli
from xlviz.errors import XlvizError

CASES: dict[str, list[str]] = {"silent misreads": [], "inputs refused before anything is made": [], "one line": []}


def one_line_error(capsys, *needles: str) -> str:
    """The command's stderr holds exactly one error line, holding every needle, and no traceback."""
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err, err
    errors = [line for line in err.splitlines() if ": error: " in line]
    assert len(errors) == 1, err
    assert all(n in errors[0] for n in needles), (needles, err)
    return errors[0]


ROWS = [{"system": "x", "language": "en", "f1": 80.0, "exact_match": 70.0},
        {"system": "x", "language": "sov", "f1": 20.0, "exact_match": 10.0}]
CONFIG = {"name": "t", "seed": 0, "pretrain_steps": 40, "world": {"seed": 0, "corpus_documents": 400},
          "versions": {"torch": "2.13.0"}}


def make_run(folder: Path, rows=ROWS, config: dict | None = None, verdicts: dict | None = None, manifest: list | None = None) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(CONFIG if config is None else config))
    (folder / "results.json").write_text(json.dumps(rows))
    if verdicts is not None:
        (folder / "verdicts.json").write_text(json.dumps(verdicts))
    if manifest is not None:
        (folder / "manifest.json").write_text(json.dumps({"version": 1, "artefacts": manifest}))
    return folder


# --- silent misreads: what the report averages --------------------------------------------------------

CASES["silent misreads"] += ["report R R", "report R ./R", "report R link-to-R"]


@pytest.mark.parametrize("spelling", ["same", "dot", "link"])
def test_report_refuses_one_run_given_twice(tmp_path, capsys, monkeypatch, spelling):
    run = make_run(tmp_path / "r1")
    monkeypatch.chdir(tmp_path)
    other = {"same": "r1", "dot": "./r1/", "link": "alias"}[spelling]
    if spelling == "link":
        os.symlink(run, tmp_path / "alias")
    assert cli(["report", "r1", other]) == 2
    one_line_error(capsys, "given twice")


CASES["silent misreads"] += ["report of runs with other settings", "--allow-different-settings labels them",
                             "report of two copies of one seed"]


def test_report_refuses_runs_that_differ_in_more_than_the_seed(tmp_path, capsys):
    a = make_run(tmp_path / "a")
    b = make_run(tmp_path / "b", config={**CONFIG, "seed": 1, "pretrain_steps": 300})
    assert cli(["report", str(a), str(b)]) == 2
    line = one_line_error(capsys, "pretrain_steps: 40 -> 300", "config.json")
    assert "seed" not in line.split("(")[1].split(")")[0]  # the seed is no difference
    # asked for: shown together, what differs listed under the table
    assert cli(["report", str(a), str(b), "--allow-different-settings"]) == 0
    out = capsys.readouterr().out
    assert "| x | zero-shot |" in out and "differs from run 1 in: pretrain_steps: 40 -> 300" in out


def test_report_takes_runs_that_differ_only_in_seed_name_and_versions(tmp_path, capsys):
    a = make_run(tmp_path / "a")
    other = {**CONFIG, "seed": 1, "name": "u", "world": {"seed": 1, "corpus_documents": 400}, "versions": {"torch": "2.14"}}
    b = make_run(tmp_path / "b", rows=[{**ROWS[0], "f1": 60.0, "exact_match": 50.0}, ROWS[1]], config=other)
    assert cli(["report", str(a), str(b)]) == 0
    assert "70.0 ± 14.1" in capsys.readouterr().out


def test_report_refuses_two_copies_of_one_seed(tmp_path, capsys):
    a = make_run(tmp_path / "a")
    b = make_run(tmp_path / "b")  # same settings, same seed: a copy, or the same run made twice
    assert cli(["report", str(a), str(b)]) == 2
    one_line_error(capsys, "one seed would count twice")


GRID_REPEATS = {"seed": ["--grid", "seed=0,0"], "languages": ["--grid", "world.languages=svo,tr,svo"],
                "grid file": None}
CASES["silent misreads"] += [f"sweep grid repeats a value ({k})" for k in GRID_REPEATS]


@pytest.mark.parametrize("case", list(GRID_REPEATS))
def test_sweep_refuses_a_repeated_grid_value(tmp_path, capsys, monkeypatch, case):
    import xlviz.transfer.sweep as sweep

    monkeypatch.setattr(sweep, "run_sweep", lambda *a, **k: pytest.fail("a sweep with a repeated value ran"))
    grid = GRID_REPEATS[case]
    if grid is None:
        (tmp_path / "grid.json").write_text(json.dumps({"seed": [1, 2, 1]}))
        grid = ["--grid-file", str(tmp_path / "grid.json")]
    assert cli(["sweep", *grid, "--out", str(tmp_path / "sw")]) == 2
    one_line_error(capsys, "twice", "--grid")
    assert not (tmp_path / "sw").exists()


DEGENERATE = {"s1_pretrain": {"verdict": "degenerate", "kind": "mlm", "reason": "on the plateau"},
              "s3_finetune": {"verdict": "ok", "kind": "qa", "reason": "fine"}}
ROW_VERDICTS = {"edited to ok": {"verdict": "ok"}, "edited to banana": {"verdict": "banana"}, "field removed": {},
                "ok, stages only in the manifest": {"verdict": "ok", "manifest": True}}
CASES["silent misreads"] += [f"row verdict {k}" for k in ROW_VERDICTS] + ["row verdict banana, stages ok"]


@pytest.mark.parametrize("case", list(ROW_VERDICTS))
def test_report_takes_verdicts_from_verdicts_json_not_the_row(tmp_path, capsys, case):
    spec = dict(ROW_VERDICTS[case])
    manifest = spec.pop("manifest", False)
    row = {"system": "x", "language": "sov", "f1": 20.0, "exact_match": 10.0, **spec}
    if not manifest:
        row["degenerate_stages"] = ["s1_pretrain"]
    entries = [{"kind": "export", "path": "export/x-sov", "system": "x", "language": "sov", "role": "qa",
                "depends_on": ["s1_pretrain", "s3_finetune"]}] if manifest else None
    run = make_run(tmp_path / "r", rows=[row], verdicts=DEGENERATE, manifest=entries)
    assert cli(["report", str(run)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("x "))
    assert "degenerate" in line and "s1_pretrain" in line and "20.0" not in line


def test_report_refuses_an_unknown_row_verdict(tmp_path, capsys):
    row = {"system": "x", "language": "sov", "f1": 20.0, "exact_match": 10.0, "verdict": "banana"}
    run = make_run(tmp_path / "r", rows=[row], verdicts={"s1_pretrain": {"verdict": "ok", "kind": "mlm"}})
    assert cli(["report", str(run)]) == 2
    one_line_error(capsys, "results.json", "[0].verdict", "banana")


BAD_SCORES = {"F1 1e308": (10.0, 1e308, "[0].f1"), "F1 -5": (0.0, -5.0, "[0].f1"), "F1 150": (10.0, 150.0, "[0].f1"),
              "EM 300": (300.0, 50.0, "[0].exact_match"), "EM 90 with F1 10": (90.0, 10.0, "[0].exact_match")}
CASES["silent misreads"] += [f"score {k}" for k in BAD_SCORES] + ["unknown setting"]


@pytest.mark.parametrize("case", list(BAD_SCORES))
def test_report_refuses_scores_no_test_set_gives(tmp_path, capsys, case):
    em, f1, field = BAD_SCORES[case]
    run = make_run(tmp_path / "r", rows=[{"system": "x", "language": "sov", "exact_match": em, "f1": f1}])
    assert cli(["report", str(run)]) == 2
    one_line_error(capsys, "results.json", field)


def test_report_refuses_an_unknown_setting(tmp_path, capsys):
    run = make_run(tmp_path / "r", rows=[{**ROWS[1], "setting": "nonsense"}])
    assert cli(["report", str(run)]) == 2
    one_line_error(capsys, "results.json", "[0].setting", "nonsense")


CASES["silent misreads"] += ["sweep cell row edited to ok", "compare with every pair degenerate"]


def test_report_of_a_sweep_refuses_a_cell_row_that_hides_its_verdict(tmp_path, capsys):
    from tests.sweep_fixtures import make_sweep
    from xlviz.runs import Run

    folder = make_sweep(tmp_path)
    assert cli(["report", str(folder)]) == 0
    capsys.readouterr()
    cell = Run(sorted(p for p in folder.iterdir() if (p / "results.json").exists())[0])
    rows = cell.results()
    rows[0] = {**rows[0], "verdict": "ok", "degenerate_stages": ["s1_pretrain"]}
    cell.results_path.write_text(json.dumps(rows))
    cell.verdicts_path.write_text(json.dumps(DEGENERATE))
    assert cli(["report", str(folder)]) == 2
    one_line_error(capsys, "results.json", "[0].verdict", "s1_pretrain")


def test_report_compare_shows_no_difference_of_degenerate_rows(tmp_path, capsys):
    from tests.test_report import _run

    right = {f"q{i}-{j}": f"a{i}" for i in range(8) for j in range(3)}
    wrong = {k: "zzz" for k in right}
    rows = [{"system": "good", "language": "sov", "exact_match": 100.0, "f1": 100.0, "verdict": "ok"},
            {"system": "bad", "language": "sov", "exact_match": 0.0, "f1": 0.0, "verdict": "degenerate",
             "degenerate_stages": ["s1_bad"]}]
    _run(tmp_path / "r", rows, {"good": right, "bad": wrong})
    (tmp_path / "r" / "verdicts.json").write_text(json.dumps({"s1_bad": {"verdict": "degenerate", "kind": "mlm"}}))
    assert cli(["report", str(tmp_path / "r"), "--compare", "good", "bad"]) == 2
    one_line_error(capsys, "degenerate")


# --- inputs refused before anything is made ----------------------------------------------------------

def _transfer_args(*argv: str) -> argparse.Namespace:
    from xlviz.cli import build_parser

    return build_parser().parse_args(["transfer", *argv])


CASES["inputs refused before anything is made"] += ["--languages ''", "--log-with ','", "sweep --parallel 0"]


def test_empty_languages_are_refused_not_the_default():
    from xlviz.commands.transfer import build_config

    with pytest.raises(XlvizError) as e:
        build_config(_transfer_args("--languages", ""))
    assert e.value.field == "languages"


def test_a_log_with_of_only_commas_is_refused():
    from xlviz.commands.transfer import build_config

    with pytest.raises(XlvizError) as e:
        build_config(_transfer_args("--log-with", ","))
    assert e.value.field == "log_with" and "empty tracker name" in str(e.value)


def test_sweep_refuses_parallel_zero(tmp_path, capsys, monkeypatch):
    import xlviz.transfer.sweep as sweep

    monkeypatch.setattr(sweep, "run_sweep", lambda *a, **k: pytest.fail("a sweep with --parallel 0 ran"))
    assert cli(["sweep", "--grid", "seed=0,1", "--parallel", "0", "--out", str(tmp_path / "sw")]) == 2
    one_line_error(capsys, "--parallel")
    assert not (tmp_path / "sw").exists()
    with pytest.raises(XlvizError, match="at least 1"):
        sweep.Sweep(tmp_path / "sw").run("local", 0)


APP_BAD = {"--out missing": (["--out", "{tmp}/nowhere"], "--out"), "--host 'bad addr'": (["--host", "bad addr"], "--host"),
           "--port 99999": (["--port", "99999"], "--port"), "--port 0": (["--port", "0"], "--port")}
CASES["inputs refused before anything is made"] += [f"app {k}" for k in APP_BAD]


@pytest.mark.parametrize("case", list(APP_BAD))
def test_app_refuses_a_bad_address_or_root_before_starting(tmp_path, capsys, monkeypatch, case):
    monkeypatch.setattr(os, "execve", lambda *a, **k: pytest.fail("Streamlit started"))
    argv, needle = APP_BAD[case]
    assert cli(["app", "--headless", *[a.format(tmp=tmp_path) for a in argv]]) == 2
    one_line_error(capsys, needle)


def _corpus(tmp_path: Path, kind: str) -> str:
    if kind == "missing":
        return str(tmp_path / "missing.txt")
    if kind == "FIFO":
        os.mkfifo(tmp_path / "fifo.txt")
        return str(tmp_path / "fifo.txt")
    if kind == "/dev/zero":
        return "/dev/zero"
    if kind == "folder":
        (tmp_path / "folder").mkdir()
        return str(tmp_path / "folder")
    (tmp_path / "nul.txt").write_bytes(b"hello world\nwor\x00ld\n")
    return str(tmp_path / "nul.txt")


CORPORA = {"missing": "no l2_corpus file matches", "FIFO": "a FIFO", "/dev/zero": "a character device", "folder": "a folder",
           "NUL bytes": "line 2: contains a NUL byte"}
CASES["inputs refused before anything is made"] += [f"corpus file {k}" for k in CORPORA]


@pytest.mark.parametrize("kind", list(CORPORA))
def test_corpus_files_are_checked_before_a_run_folder_is_made(tmp_path, capsys, kind):
    (tmp_path / "en.txt").write_text("the cat sat\n" * 20)
    root = tmp_path / "ck"
    assert cli(["transfer", "--source", "files", "--l1-corpus", str(tmp_path / "en.txt"), "--l2-corpus", _corpus(tmp_path, kind),
                "--out", str(root), "--model-size", "tiny", "--pretrain-steps", "2"]) == 2
    one_line_error(capsys, CORPORA[kind])
    assert not root.exists() or not list(root.iterdir())  # no empty failed run left behind


CASES["inputs refused before anything is made"] += ["NUL byte in a corpus line", "metrics loss 1e400 and NaN"]


def test_nul_bytes_never_reach_the_vocabulary(tmp_path):
    from xlviz.data.real import read_text_corpus

    (tmp_path / "c.txt").write_bytes(b"a b\nc\x00d\n")
    with pytest.raises(XlvizError) as e:
        list(read_text_corpus(tmp_path / "c.txt"))
    assert "line 2" in str(e.value) and "c.txt" in str(e.value)


def test_metrics_rows_that_are_not_finite_are_skipped_and_counted(tmp_path):
    from xlviz.runs import Run

    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "metrics.jsonl").write_text('{"stage": "s1", "step": 1, "loss": 1e400}\n{"stage": "s1", "step": 2, "loss": NaN}\n'
                                            '{"stage": "s1", "step": 3, "loss": 2.5}\n')
    run = Run(tmp_path)
    assert [r["loss"] for r in run.metrics(all_attempts=True)] == [2.5]
    assert len(run.skipped_metrics) == 2 and all("finite" in s for s in run.skipped_metrics)


CASES["inputs refused before anything is made"] += ["head_view layer 99", "projection layer 99"]


def test_head_view_refuses_a_layer_the_model_lacks(tmp_path):
    import xlviz.views as xv
    from tests.tiny_models import make_tiny

    folder = make_tiny("bert", tmp_path / "m", words=["the", "cat", "dog"])  # 2 layers
    with pytest.raises(XlvizError, match="no layer 99"):
        xv.head_view(folder, "the cat", layer=99)
    assert xv.head_view(folder, "the cat", layer=-1)._repr_html_().startswith("<svg")


def test_projection_refuses_a_layer_the_vectors_lack(monkeypatch):
    from types import SimpleNamespace

    import numpy as np

    import xlviz.analysis.reports as reports
    import xlviz.analysis.representations as representations
    import xlviz.views as xv
    import xlviz.views.alignment as alignment

    system = SimpleNamespace(name="r · m", a="A", b="B")
    monkeypatch.setattr(alignment, "pick_systems", lambda run, l2, systems: [system])
    monkeypatch.setattr(alignment, "spec_model", lambda spec, task="base": (None, None))
    monkeypatch.setattr(reports, "parallel_data", lambda *a, **k: SimpleNamespace(
        src=["a", "b", "c", "d"], tgt=["w", "x", "y", "z"], lang_a="en", lang_b="sov"))
    rng = np.random.default_rng(0)  # embeddings and 2 layers
    monkeypatch.setattr(representations, "sentence_embeddings", lambda m, t, texts, **k: rng.normal(size=(3, len(texts), 4)))
    with pytest.raises(XlvizError, match="no layer 99"):
        xv.projection("run", "sov", layer=99)


# --- one line, bounded ---------------------------------------------------------------------------------

CASES["one line"] += ["predict-qa hidden_size 1e308", "predict-qa hidden_act nope"]


@pytest.mark.parametrize("change", [{"hidden_size": 1e308}, {"hidden_act": "nope"}], ids=["hidden_size", "hidden_act"])
def test_predict_qa_names_the_bad_model_config_field(tmp_path, capsys, change):
    from tests.tiny_models import make_tiny

    folder = make_tiny("bert", tmp_path / "qa", task="qa", words=["the", "cat", "sat"])
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, **change}))
    data = {"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": "the cat sat", "qas": [
        {"id": "q1", "question": "who sat", "answers": [{"text": "the cat", "answer_start": 0}]}]}]}]}
    (tmp_path / "d.json").write_text(json.dumps(data))
    assert cli(["predict-qa", "--model", str(folder), "--data", str(tmp_path / "d.json"), "--out", str(tmp_path / "p.json")]) == 2
    key = next(iter(change))
    one_line_error(capsys, "config.json", f"field '{key}'")
    assert not (tmp_path / "p.json").exists()


CASES["one line"] += ["35,000-character unknown key", "--out with a newline", "report --help"]


def test_an_error_for_a_huge_unknown_key_is_short(tmp_path, capsys):
    (tmp_path / "c.json").write_text(json.dumps({"k" * 35_000: 1}))
    assert cli(["transfer", "--config", str(tmp_path / "c.json"), "--out", str(tmp_path / "ck")]) == 2
    line = one_line_error(capsys, "unknown setting", "…")
    assert len(line) < 2000 and "k" * 100 not in line
    assert len(str(XlvizError("bad", field="f" * 35_000))) < 100  # bounded wherever it is raised


def test_out_with_a_newline_is_refused_without_making_it(tmp_path, capsys):
    (tmp_path / "en.txt").write_text("the cat sat\n")
    out = tmp_path / "a\nb"
    assert cli(["transfer", "--source", "files", "--l1-corpus", str(tmp_path / "en.txt"), "--l2-corpus", str(tmp_path / "de.txt"),
                "--out", str(out)]) == 2
    one_line_error(capsys, "--out", "newline")
    assert not out.exists()


def test_report_help_ends_with_a_whole_sentence(capsys):
    with pytest.raises(SystemExit):
        cli(["report", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "every score with its 95% interval;" in text and "the seeds a difference needs." in text


def test_the_count_of_cases_tried():
    """Every case above, by group (the closing note's table): each is handled (its test passes)."""
    assert {k: len(v) for k, v in CASES.items()} == {"silent misreads": 22, "inputs refused before anything is made": 16,
                                                      "one line": 5}
