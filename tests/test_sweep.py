"""``xlviz sweep``: the grid, the cells as normal runs through submitit's local mode (the same
results.json bytes as each cell run alone), resuming after a kill, the English stages run once
per group, one writer, and the report over seeds."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from xlviz.errors import XlvizError
from xlviz.transfer.sweep import Sweep, make_cells, parse_grid, run_sweep

ROOT = Path(__file__).resolve().parents[1]
# tests/test_methods.py's TINY world and budget
TINY = {
    "model_size": "tiny", "vocab_size": 200, "batch_size": 8, "mlm_batch_size": 8, "pretrain_steps": 4, "transfer_steps": 2,
    "finetune_steps": 2, "log_every": 2, "mixed_precision": "no",
    # a tiny model learns nothing in 4 steps: judged degenerate, its rows would be no results;
    # these tests are about the sweep's machinery (tests/test_verdicts.py judges stages)
    "verdict_mlm_margin": -100.0, "verdict_qa_margin": -100.0,
    "world": {"corpus_documents": 120, "qa_train_paragraphs": 20, "qa_dev_paragraphs": 3, "qa_test_paragraphs": 4,
              "parallel_pairs": 20, "agreement_pairs": 9, "sense_pairs": 6, "parallel_train_pairs": 40},
}
METHODS = "monotrans,floor,clwe"


def xlviz(*args: str, **kw) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "xlviz", *args], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True, **kw)


def finish(p: subprocess.Popen) -> str:
    out, _ = p.communicate(timeout=900)
    assert p.returncode == 0, out
    return out


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """A 2-cell sweep (svo, tr) killed once its first cell finished, then re-run with the same
    command to the end; and each cell run alone with ``xlviz transfer``."""
    pytest.importorskip("submitit")
    tmp = tmp_path_factory.mktemp("sweep")
    config = tmp / "tiny.json"
    config.write_text(json.dumps(TINY))
    folder = tmp / "sw"
    cmd = ["sweep", "--config", str(config), "--grid", "world.languages=svo,tr", "--methods", METHODS, "--out", str(folder)]
    p = xlviz(*cmd)
    first = folder / "000-languages-svo" / "status.json"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and p.poll() is None:
        if first.exists() and json.loads(first.read_text() or "{}").get("state") == "completed":
            break
        time.sleep(0.2)
    killed = p.poll() is None
    if killed:
        os.killpg(p.pid, signal.SIGKILL)  # the sweep and its submitit jobs
        p.wait()
    out = finish(xlviz(*cmd))
    alone = {}
    for lang in ("svo", "tr"):
        run_dir = tmp / "alone" / lang
        finish(xlviz("transfer", "--config", str(config), "--languages", lang, "--methods", METHODS,
                     "--out", str(tmp / "alone"), "--run-dir", str(run_dir)))
        alone[lang] = run_dir
    return {"folder": folder, "alone": alone, "out": out, "killed": killed, "config": config, "cmd": cmd}


@pytest.mark.slow
def test_cells_give_the_bytes_of_runs_alone(swept):
    folder = swept["folder"]
    for cell, lang in (("000-languages-svo", "svo"), ("001-languages-tr", "tr")):
        ours = (folder / cell / "results.json").read_bytes()
        assert ours == (swept["alone"][lang] / "results.json").read_bytes()
        assert {r["language"] for r in json.loads(ours)} == {"en", lang}
        for f in ("s1_pretrain/model.safetensors", "s3_finetune/model.safetensors", f"export/monotrans-{lang}/model.safetensors",
                  "clwe/en.safetensors", "s1_clwe/model.safetensors", "s3_clwe/model.safetensors"):
            assert (folder / cell / f).read_bytes() == (swept["alone"][lang] / f).read_bytes(), f
        # a copied shared stage comes with its manifest entry: the cell's manifest is the run's alone
        assert (folder / cell / "manifest.json").read_bytes() == (swept["alone"][lang] / "manifest.json").read_bytes()


@pytest.mark.slow
def test_a_killed_sweep_resumes(swept):
    log = (swept["folder"] / "sweep" / "log.txt").read_text()
    assert swept["killed"], "the sweep finished before it could be killed"
    assert "sweep of 2 cells (local); 1 already completed" in log
    runs = log.split("sweep of 2 cells")
    assert len(runs) == 3  # the killed run and the resumed one
    assert "000-languages-svo: started" not in runs[2], "a completed cell ran again"
    for cell in ("000-languages-svo", "001-languages-tr"):
        assert json.loads((swept["folder"] / cell / "status.json").read_text())["state"] == "completed"


@pytest.mark.slow
def test_english_stages_run_once_per_group(swept):
    """The English pre-training and fine-tuning ran in one cell; the other got copies (a sweep
    over G grammars x S seeds pre-trains S times, not G x S)."""
    trained = copied = 0
    for cell in ("000-languages-svo", "001-languages-tr"):
        log = (swept["folder"] / cell / "log.txt").read_text()
        trained += log.count(": s1_pretrain\n")
        copied += log.count("stage s1_pretrain: copied from cell 000-languages-svo")
        assert log.count(": s3_finetune\n") + log.count("stage s3_finetune: copied") >= 1
    assert (trained, copied) == (1, 1)
    # CLWE's body and QA model read only the English skip-gram rows: trained once, copied once
    logs = [(swept["folder"] / c / "log.txt").read_text() for c in ("000-languages-svo", "001-languages-tr")]
    for stage in ("s1_clwe", "s3_clwe"):
        assert sum(log.count(f": {stage}\n") for log in logs) == 1, stage
        assert sum(log.count(f"stage {stage}: copied from cell 000-languages-svo") for log in logs) == 1, stage
    metrics = [json.loads(l) for l in (swept["folder"] / "001-languages-tr" / "metrics.jsonl").read_text().splitlines()]
    assert any(m["stage"] == "s1_pretrain" for m in metrics), "the copied stage's training curve comes with it"


@pytest.mark.slow
def test_report_over_the_sweep(swept, capsys):
    from xlviz.cli import main
    from xlviz.transfer.sweep_report import ratio_figure, sweep_rows, sweep_timing

    rows = sweep_rows(swept["folder"])
    by = {(r["setting"], r["system"], r["language"]): r for r in rows}
    assert by[("languages=tr", "monotrans", "tr")]["distance"] == 5
    assert by[("languages=svo", "floor", "svo")]["distance"] == 0
    en = json.loads((swept["folder"] / "001-languages-tr" / "results.json").read_text())
    f1 = {(r["system"], r["language"]): r["f1"] for r in en}
    assert by[("languages=tr", "monotrans", "tr")]["f1"] == f1[("monotrans", "tr")]
    # one seed: the paragraph bootstrap of the cell's kept predictions, around its F1
    tr = by[("languages=tr", "monotrans", "tr")]
    assert tr["f1_sp_low"] <= tr["f1"] <= tr["f1_sp_high"] and tr["exact_match_sp_low"] <= tr["exact_match"]
    timing = sweep_timing(swept["folder"])  # the tr cell received the English stages as copies
    assert timing["cells"] == 2 and timing["copied"] >= 2 and timing["alone_s"] > timing["ran_s"] > 0
    assert main(["report", str(swept["folder"])]) == 0
    out = capsys.readouterr().out
    assert "| languages=tr | monotrans | tr | zero-shot | 5 | 1 |" in out  # the cell, and the transfer setting
    assert "Stage time:" in out and "the same cells run alone" in out
    # --compare on a sweep folder: one paired table per grid cell (it used to print the means and ignore it)
    assert main(["report", str(swept["folder"]), "--compare", "monotrans", "floor"]) == 0
    out = capsys.readouterr().out
    assert "cell: languages=svo (1 seed)" in out and "cell: languages=tr (1 seed)" in out
    assert out.count("**monotrans** against **floor** (zero-shot)") == 2 and "| tr | F1 |" in out and "| svo | F1 |" in out
    fig = ratio_figure(rows)
    assert {t.name for t in fig.data if t.showlegend} == {"monotrans", "floor", "clwe"}
    assert sorted({x for t in fig.data for x in t.x}) == [0, 5]


def test_ratio_figure_draws_one_line_per_system_and_other_setting():
    """A grid over grammars and another setting (names shared or not): two lines per system,
    told apart by dash, never one zigzag through both settings' points at one distance."""
    from xlviz.transfer.sweep_report import ratio_figure

    rows = [{"setting": f"languages={lang}, shared_names={sh}", "series": f"shared_names={sh}", "system": s,
             "language": lang, "distance": d, "n": 3, "ratio": r, "ratio_low": r - 0.05, "ratio_high": r + 0.05,
             "em_ratio": r / 2, "em_ratio_low": None, "em_ratio_high": None}
            for s in ("joint", "floor") for sh in ("false", "true") for lang, d, r in (("svo", 0, 0.3), ("tr", 5, 0.1))]
    fig = ratio_figure(rows)
    lines = [t for t in fig.data if t.mode == "lines+markers"]
    assert len(lines) == 8, "2 systems x 2 settings x (F1, EM)"
    assert all(sorted(t.x) == [0, 5] for t in lines), "one point per distance on a line"
    legend = {t.name: (t.line.color, t.line.dash) for t in lines if t.showlegend}
    assert set(legend) == {"joint · shared_names=false", "joint · shared_names=true", "floor · shared_names=false",
                           "floor · shared_names=true"}
    assert len(set(legend.values())) == 4 and legend["joint · shared_names=false"][0] == legend["joint · shared_names=true"][0]
    # a grid of grammars and seeds only: one line per system, named by the system alone
    plain = ratio_figure([dict(r, series="") for r in rows if r["series"].endswith("false")])
    assert {t.name for t in plain.data if t.showlegend} == {"joint", "floor"}


def test_ratio_figure_at_one_distance_draws_error_bars_side_by_side():
    """A grid over another setting on one grammar (e.g. mlm_random_share=0.1,0 on svo): no band
    can be drawn at one distance, so each point carries its interval as an error bar, and the
    four lines sit side by side around the distance instead of on top of each other."""
    from xlviz.transfer.sweep_report import ratio_figure

    rows = [{"setting": f"languages=svo, share={sh}", "series": f"share={sh}", "system": s, "language": "svo",
             "distance": 0, "n": 3, "ratio": r, "ratio_low": r - 0.04, "ratio_high": r + 0.06,
             "em_ratio": r / 2, "em_ratio_low": r / 2 - 0.01, "em_ratio_high": r / 2 + 0.02}
            for s, r in (("joint", 0.24), ("floor", 0.16)) for sh in ("0.1", "0")]
    fig = ratio_figure(rows)
    points = [t for t in fig.data if t.mode == "lines+markers"]
    assert len(points) == 8 and not [t for t in fig.data if t.fill == "toself"], "no band at one distance"
    f1 = [t for t in points if t.xaxis == "x"]
    assert len({t.x[0] for t in f1}) == 4 and all(-0.5 < t.x[0] < 0.5 for t in f1), "dodged around distance 0"
    bar = next(t for t in f1 if t.name == "joint · share=0.1").error_y
    assert list(bar.array) == pytest.approx([0.06]) and list(bar.arrayminus) == pytest.approx([0.04])
    em = next(t for t in points if t.xaxis == "x2" and t.name == "floor · share=0").error_y
    assert list(em.array) == pytest.approx([0.02]) and list(em.arrayminus) == pytest.approx([0.01])
    # a sweep over grammars keeps its bands and its exact distances
    assert all(t.error_y.array is None for t in ratio_figure([dict(r, distance=d) for r in rows for d in (0, 5)]).data)


@pytest.mark.slow
def test_another_grid_in_the_same_folder_is_refused(swept, capsys):
    from xlviz.cli import main

    assert main(swept["cmd"][:4] + ["world.languages=svo,cy", "--methods", METHODS, "--out", str(swept["folder"])]) == 2
    err = capsys.readouterr().err
    assert "another grid" in err and err.count("\n") == 1


@pytest.mark.slow
def test_the_sweep_has_one_writer(tmp_path):
    from xlviz.runs import Run

    config = tmp_path / "tiny.json"
    config.write_text(json.dumps(TINY))
    with Run(tmp_path / "sw" / "sweep").writer_lock():
        p = xlviz("sweep", "--config", str(config), "--grid", "seed=0,1", "--methods", "floor", "--out", str(tmp_path / "sw"))
        out, _ = p.communicate(timeout=300)
    assert p.returncode == 2 and "another process" in out
    assert not (tmp_path / "sw" / "sweep" / "sweep.json").exists() and not (tmp_path / "sw" / "000-seed-0").exists()


def test_grid_parsing_and_cells(tmp_path):
    from xlviz.commands.transfer import build_config

    grid = parse_grid(["world.languages=svo,tr,x:cy+adjective=before", "seed=0,1"])
    assert [k for k, _ in grid] == ["world.languages", "seed"]
    assert grid[1][1] == [0, 1]
    args = argparse.Namespace(methods="monotrans", languages=None, seed=None)
    cells = make_cells(grid, args, None, build_config)
    assert [c.name for c in cells] == ["000-languages-svo_seed-0", "001-languages-svo_seed-1", "002-languages-tr_seed-0",
                                       "003-languages-tr_seed-1", "004-languages-x_seed-0", "005-languages-x_seed-1"]
    assert cells[3].config["seed"] == 1 and cells[3].config["world"]["seed"] == 1
    assert cells[3].config["world"]["languages"] == [{"code": "tr", "order": "tr", "script": "latin"}]
    # cells differing only in their L2s share a group (their English stages); seeds do not
    assert cells[0].group() == cells[2].group() == cells[4].group() != cells[1].group()
    # names spelled as in English change only the L2s: shared too; the English corpus's size is not
    named = make_cells(parse_grid(["world.shared_names=false,true", "world.corpus_documents=100,200"]), args, None, build_config)
    assert named[0].group() == named[2].group() != named[1].group()
    file = tmp_path / "grid.json"
    file.write_text(json.dumps({"world.languages": ["svo,sov", [{"code": "tr", "order": "tr"}]], "world.preference": [1.0, 2.0]}))
    grid = parse_grid(None, str(file))
    cells = make_cells(grid, argparse.Namespace(), None, build_config)
    assert len(cells) == 4 and [l["code"] for l in cells[0].config["world"]["languages"]] == ["svo", "sov"]
    assert cells[1].config["world"]["preference"] == 2.0


@pytest.mark.parametrize("items,field,message", [
    (["seed"], "--grid", "is not KEY=V1,V2"),
    (["seed=0", "seed=1"], "--grid", "appears twice"),
    ([], "--grid", "at least one"),
    (["world.languages=x:tr+determiner=suffix"], "languages.determiner", "unknown value 'suffix'"),
])
def test_bad_grids_name_the_field(items, field, message):
    with pytest.raises(XlvizError) as e:
        parse_grid(items)
    assert e.value.field == field and message in str(e.value)


def test_unknown_settings_and_flag_conflicts_are_refused():
    from xlviz.commands.transfer import build_config

    with pytest.raises(XlvizError) as e:
        make_cells(parse_grid(["no_such_setting=1,2"]), argparse.Namespace(), None, build_config)
    assert e.value.field == "no_such_setting"
    with pytest.raises(XlvizError, match="both in the grid and given as a flag"):
        make_cells(parse_grid(["seed=0,1"]), argparse.Namespace(seed=3), None, build_config)
    with pytest.raises(XlvizError, match="both in the grid"):
        make_cells(parse_grid(["world.languages=svo,tr"]), argparse.Namespace(languages="sov"), None, build_config)


def test_not_a_sweep_folder(tmp_path):
    from xlviz.transfer.sweep_report import sweep_rows

    with pytest.raises(XlvizError, match="not a sweep folder"):
        sweep_rows(tmp_path)
    assert not Sweep(tmp_path).exists()
    with pytest.raises(XlvizError, match="unknown backend"):
        Sweep(tmp_path).run("kubernetes")


def test_report_means_intervals_and_paired_differences(tmp_path):
    """A sweep folder written by hand (two grammars x two seeds): the means, the intervals
    over seeds and the paired differences are computed from the cells' results."""
    from xlviz.io import atomic_write_json
    from xlviz.transfer.sweep_report import paired_differences, sweep_rows, sweep_table

    f1 = {("svo", 0): (80.0, 70.0, 10.0), ("svo", 1): (60.0, 60.0, 12.0), ("tr", 0): (80.0, 40.0, 8.0), ("tr", 1): (60.0, 12.0, 6.0)}
    cells = []
    for i, ((lang, seed), (en, mono, floor)) in enumerate(f1.items()):
        name = f"{i:03d}-languages-{lang}_seed-{seed}"
        cells.append({"name": name, "overrides": {"world.languages": [{"code": lang, "order": lang}], "seed": seed},
                      "config": {"seed": seed, "world": {"languages": [{"code": lang, "order": lang, "script": "latin"}]}}})
        rows = [{"system": s, "language": "en", "f1": en, "exact_match": en / 2} for s in ("monotrans", "floor")]
        rows += [{"system": "monotrans", "language": lang, "f1": mono, "exact_match": mono / 4},
                 {"system": "floor", "language": lang, "f1": floor, "exact_match": 0.0}]
        own = {"l1_f1": 50.0 - 10 * seed, "l1_exact_match": 25.0 - 5 * seed} if lang == "tr" else {"l1_f1": 50.0}
        rows += [{"system": "pair", "language": "en", "f1": 99.0, "exact_match": 99.0},
                 {"system": "pair", "language": lang, "f1": 20.0, "exact_match": 5.0, **own}]
        atomic_write_json(tmp_path / name / "results.json", rows)
    atomic_write_json(tmp_path / "sweep" / "sweep.json", {"cells": cells})
    rows = {(r["setting"], r["system"], r["language"]): r for r in sweep_rows(tmp_path)}
    tr = rows[("languages=tr", "monotrans", "tr")]
    assert tr["n"] == 2 and tr["distance"] == 5
    assert tr["f1"] == pytest.approx(26.0) and tr["ratio"] == pytest.approx((40 / 80 + 12 / 60) / 2)
    # two seeds: the t interval (1 df), 0.35 ± 12.706 x 0.15, not the two values' range
    assert tr["ratio_low"] == pytest.approx(0.35 - 12.7062 * 0.15, abs=1e-3) and tr["ratio_high"] == pytest.approx(0.35 + 12.7062 * 0.15, abs=1e-3)
    assert tr["em_ratio"] == pytest.approx(((10 / 40) + (3 / 30)) / 2)
    # a pair model divides by its own English scores (l1_f1, l1_exact_match), not the system's en row
    pair = rows[("languages=tr", "pair", "tr")]
    assert pair["ratio"] == pytest.approx((20 / 50 + 20 / 40) / 2) and pair["em_ratio"] == pytest.approx((5 / 25 + 5 / 20) / 2)
    assert "em_ratio" not in rows[("languages=svo", "pair", "svo")]  # recorded before its own EM was kept: no EM ratio
    assert rows[("languages=svo", "floor", "svo")]["distance"] == 0
    (d,) = [d for d in paired_differences(tmp_path, "monotrans", "floor") if d["language"] == "tr"]
    assert d["n"] == 2 and d["difference"] == pytest.approx(((40 - 8) / 80 + (12 - 6) / 60) / 2)
    # per-seed differences 0.4, 0.1: 0.25 ± 12.706 x 0.15; two seeds: no verdict
    assert d["low"] == pytest.approx(0.25 - 12.7062 * 0.15, abs=1e-3) and d["high"] == pytest.approx(0.25 + 12.7062 * 0.15, abs=1e-3)
    assert d["verdict"] == "too_few"
    table = sweep_table(tmp_path)
    assert "| languages=tr | monotrans | tr | zero-shot | 5 | 2 | 26.0 [-151.9, 203.9] |" in table
    assert "| languages=tr | tr | monotrans: +0.25 [-1.66, +2.16] |" in table
    assert "too few seeds for a verdict (2; needs 3) | 2 |" in table
    assert "| — | — |" in table  # no kept predictions: no seeds-x-paragraphs interval


def test_report_leaves_out_degenerate_rows(tmp_path):
    """A row that depends on a degenerate stage is no result in a sweep's report: not in the
    means, the ratios or the paired differences, and listed as excluded with its reason; an
    English row that is degenerate takes its system's ratios with it."""
    from xlviz.io import atomic_write_json
    from xlviz.transfer.sweep_report import paired_differences, sweep_rows, sweep_table

    cells = []
    for seed, (mono, bad_l2, bad_en) in enumerate([(40.0, False, False), (10.0, True, False), (30.0, False, True)]):
        name = f"{seed:03d}-languages-tr_seed-{seed}"
        cells.append({"name": name, "overrides": {"world.languages": [{"code": "tr", "order": "tr"}], "seed": seed},
                      "config": {"seed": seed, "world": {"languages": [{"code": "tr", "order": "tr", "script": "latin"}]}}})
        rows = [{"system": "monotrans", "language": "en", "f1": 80.0, "exact_match": 40.0},
                {"system": "floor", "language": "en", "f1": 80.0, "exact_match": 40.0},
                {"system": "monotrans", "language": "tr", "f1": mono, "exact_match": mono / 2},
                {"system": "floor", "language": "tr", "f1": 8.0, "exact_match": 2.0}]
        if bad_l2:
            rows[2].update(verdict="degenerate", degenerate_stages=["s2_transfer-tr"])
        if bad_en:
            rows[0].update(verdict="degenerate", degenerate_stages=["s1_pretrain"])
        atomic_write_json(tmp_path / name / "results.json", rows)
    atomic_write_json(tmp_path / "sweep" / "sweep.json", {"cells": cells})
    by = {(r["system"], r["language"]): r for r in sweep_rows(tmp_path)}
    tr = by[("monotrans", "tr")]
    assert tr["n"] == 2 and tr["f1"] == pytest.approx(35.0)  # seeds 0 and 2; seed 1's row is no result
    assert tr["ratio"] == pytest.approx(40 / 80)  # seed 2's English row is degenerate: no ratio there
    assert tr["excluded"] == [("001-languages-tr_seed-1", "degenerate stage s2_transfer-tr")]
    assert by[("monotrans", "en")]["n"] == 2 and by[("floor", "tr")]["n"] == 3
    (d,) = paired_differences(tmp_path, "monotrans", "floor")
    assert d["n"] == 1 and d["difference"] == pytest.approx((40 - 8) / 80)
    table = sweep_table(tmp_path)
    assert "- 001-languages-tr_seed-1: monotrans tr (degenerate stage s2_transfer-tr)" in table
    assert "- 002-languages-tr_seed-2: monotrans en (degenerate stage s1_pretrain)" in table


def test_slurm_off_a_cluster_is_one_line(tmp_path):
    import shutil

    pytest.importorskip("submitit")
    if shutil.which("srun"):
        pytest.skip("this machine has Slurm")
    from xlviz.transfer.sweep import make_executor

    with pytest.raises(XlvizError) as e:
        make_executor(tmp_path, "slurm", {"partition": "cpu"})
    assert e.value.field == "--backend" and "Slurm" in str(e.value)


@pytest.mark.slow
def test_cells_are_runs_of_the_sweep_folder(swept):
    """With the app's checkpoints root at the sweep folder, every cell is a run (the sweep's own
    record is not), named ``<sweep>/<cell>`` wherever the root is, so two sweeps' cells differ."""
    from xlviz.runs import list_runs

    sweep = Path(swept["folder"]).name
    expected = [f"{sweep}/000-languages-svo", f"{sweep}/001-languages-tr"]
    assert sorted(r.name for r in list_runs(swept["folder"])) == expected
    assert sorted(r.name for r in list_runs(Path(swept["folder"]).parent)) == expected
