"""Sweeps page logic without Streamlit: the ``xlviz sweep`` command line from the form (checked
by the CLI's own parser and grid parser), a sweep's state for the app, and its tables.

Why the CLI: a sweep runs for hours; the app starts ``xlviz sweep`` detached through
:mod:`xlviz.jobs` (its ``job.json`` in the sweep's record folder ``<sweep>/sweep/``), exactly as
the Runs page starts ``xlviz transfer``, and only reads the folder afterwards.
"""

from __future__ import annotations

import functools
import json
from dataclasses import field
from pathlib import Path

import pandas as pd

from xlviz import jobs
from xlviz.errors import XlvizError
from xlviz.transfer.sweep import SWEEP_DIR, SweepSummary, list_sweeps, make_cells, parse_grid, sweep_summary
from xlviz.transfer.sweep_report import excluded_lines, ratio_figure, sweep_timing
from xlviz.transfer.sweep_report import sweep_rows as _sweep_rows

__all__ = ["SweepForm", "prepare_sweep", "all_sweeps", "start", "resume", "state", "list_sweeps", "sweep_summary", "sweep_rows",
           "ratio_figure", "results_table", "excluded_lines", "timing_line", "paired_table", "sweeps_table", "cells_table",
           "cell_l2s", "cell_models"]
from xlviz.views.forms import FORM_BUDGET, check_sizes, form_class, form_flags
from xlviz.views.runs import MODEL_SIZES

MAX_CELLS = 500  # a typo in a grid must not start thousands of runs


def grid_lines(text: str) -> list[str]:
    """The form's grid: one ``KEY=V1,V2,...`` per line (blank lines and ``#`` comments skipped)."""
    return [line.strip() for line in str(text).splitlines() if line.strip() and not line.strip().startswith("#")]


# The settings every cell of a sweep started from the app shares (each left out when the grid
# sets it), in its command line's order.
SWEEP_FORM = ("methods", "model_size", "pretrain_steps", "transfer_steps", "finetune_steps", "batch_size", "mlm_batch_size",
              "corpus_documents", "qa_train_paragraphs", "qa_test_paragraphs", "workers")


class _SweepForm:
    """What the Sweeps page's form collects: the grid as text rows, the settings of
    :data:`SWEEP_FORM` every cell shares (starting from the forms' small budget,
    :data:`xlviz.views.forms.FORM_BUDGET`: minutes per cell, and two systems) and the cells at once."""

    def flags(self) -> list[tuple[str, str, str]]:
        """(flag, setting it sets, value) for every shared flag."""
        return [(s.flag, s.path, value) for s, value in form_flags(self, SWEEP_FORM)]

    def validate(self) -> None:
        if self.model_size not in MODEL_SIZES:
            raise XlvizError(f"model size must be one of {', '.join(MODEL_SIZES)}", field="model_size")
        check_sizes(self, SWEEP_FORM)
        if not 0 <= int(self.workers) <= 64:
            raise XlvizError("must be between 0 (one per core) and 64", field="workers")
        if not 1 <= int(self.parallel) <= 64:
            raise XlvizError("must be between 1 and 64", field="parallel")
        if not self.methods:
            raise XlvizError("pick at least one system", field="methods")
        if not grid_lines(self.grid):
            raise XlvizError("give at least one grid row KEY=V1,V2,... (e.g. seed=0,1,2)", field="grid")

    def argv(self, folder: str | Path) -> list[str]:
        """``xlviz sweep`` arguments (without the program name)."""
        self.validate()
        lines = grid_lines(self.grid)
        keys = {line.partition("=")[0].strip() for line in lines}
        argv = ["sweep", "--out", str(folder)]
        for line in lines:
            argv += ["--grid", line]
        for flag, key, value in self.flags():
            if key not in keys:  # a setting in the grid is given once (the CLI refuses both)
                argv += [flag, value]
        return argv + ["--parallel", str(int(self.parallel))]


SweepForm = form_class("SweepForm", _SweepForm, SWEEP_FORM, {**FORM_BUDGET, "methods": ("monotrans", "floor")},
                       extra=(("grid", str, field(default="world.languages=svo,tr,sov\nseed=0,1,2")), ("parallel", int, field(default=1))))


def prepare_sweep(form: SweepForm, root: str | Path, name: str = "") -> tuple[Path, list[str], int]:
    """The sweep folder, ``xlviz sweep`` arguments and number of cells, after every check the
    CLI makes (its parser, :func:`xlviz.transfer.sweep.parse_grid`, each cell's whole config as
    ``xlviz transfer`` builds it): a bad grid row is one line naming it, and nothing is created
    unless everything passes; then a fresh folder for an unnamed sweep."""
    from xlviz.commands.transfer import build_config
    from xlviz.runs import new_run_path
    from xlviz.views.runs import parse_form

    root = Path(root)
    args, name = parse_form(form, root, name, command="sweep", thing="sweep", taken="folder")
    grid = parse_grid(args.grid)
    n = 1
    for _, values in grid:
        n *= len(values)
    if n > MAX_CELLS:
        raise XlvizError(f"the grid has {n} cells; at most {MAX_CELLS} from the app (use the CLI for more)", field="grid")
    if n == 0:
        raise XlvizError("a grid row has no values", field="grid")
    cells = make_cells(grid, args, None, build_config)  # each cell's config, as the CLI builds it
    folder = root / name if name else new_run_path(root, "sweep")
    return folder, form.argv(folder), len(cells)


def record_dir(folder: str | Path) -> Path:
    """Where the app's job for a sweep keeps ``job.json`` and its output: the sweep's record
    folder (not the sweep folder: that is no run, and the Runs page lists folders with a job)."""
    return Path(folder) / SWEEP_DIR


def start(folder: str | Path, argv: list[str]) -> int:
    """Start ``xlviz sweep`` detached (xlviz.jobs): it survives reruns and app restarts."""
    return jobs.start_job(argv, record_dir(folder))


def restart_argv(folder: str | Path) -> list[str] | None:
    """The recorded ``xlviz sweep`` arguments of the app's job for this very folder (re-running
    the same command continues a sweep), or None (started from a terminal, still running)."""
    info = jobs.job_info(record_dir(folder))
    argv = info.get("argv") if isinstance(info, dict) else None
    if jobs.is_alive(record_dir(folder)) or not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        return None
    rest = argv[3:]
    if argv[1:3] != ["-m", "xlviz"] or rest[:1] != ["sweep"] or "--out" not in rest:
        return None
    try:
        out = rest[rest.index("--out") + 1]
    except IndexError:
        return None
    return rest if Path(out).resolve() == Path(folder).resolve() else None


def resume(folder: str | Path) -> int:
    argv = restart_argv(folder)
    if argv is None:
        raise XlvizError("no recorded app command to continue this sweep; re-run its xlviz sweep command", path=folder)
    return jobs.start_job(argv, record_dir(folder))


def state(summary: SweepSummary) -> str:
    """The sweep as the app shows it: starting (its job began, no lock yet), running (its
    process holds the lock), completed, failed (a cell failed), cancelled (from the app),
    stopped (cells left and no process: resume), unreadable."""
    record = record_dir(summary.path)
    if summary.writing:
        return "running"
    if jobs.is_alive(record):  # before it takes the lock (starting), or printing its report after the cells
        return "starting" if summary.problem else "running"
    info = jobs.job_info(record)
    if summary.problem:
        if not (record / "sweep.json").exists() and info:  # the app's job ended before it recorded the sweep
            return "cancelled" if info.get("cancelled") else "failed"
        return "unreadable"
    states = [c.state for c in summary.cells]
    if states and all(s == "completed" for s in states):
        return "completed"
    if info and info.get("cancelled"):
        return "cancelled"
    if any(s in ("failed", "unreadable") for s in states):
        return "failed"
    if any(s == "cancelled" for s in states):
        return "cancelled"
    return "stopped"


def all_sweeps(root: str | Path) -> list[Path]:
    """Sweep folders under the checkpoints root, newest first, including one the app just
    started whose process has not recorded ``sweep.json`` yet (its job record is there)."""
    root = Path(root)
    found = list_sweeps(root)
    if root.is_dir():
        for p in root.iterdir():
            rec = record_dir(p)
            if (p not in found and p.is_dir() and not p.is_symlink() and not p.name.startswith(".")
                    and not (p / "config.json").exists() and (rec / jobs.JOB_FILE).is_file()):
                found.insert(0, p)
    return found


def sweeps_table(summaries: list[SweepSummary]) -> pd.DataFrame:
    rows = []
    for s in summaries:
        counts = s.counts()
        rows.append({"sweep": s.name, "state": state(s), "cells": len(s.cells), "completed": counts.get("completed", 0),
                     "running": counts.get("running", 0), "failed": counts.get("failed", 0),
                     "grid": "; ".join(f"{k}={','.join(_value(v) for v in vs)}" for k, vs in s.grid
                                       if isinstance(vs, list)) if all(isinstance(g, list) and len(g) == 2 for g in s.grid) else "",
                     "created": s.created})
    return pd.DataFrame(rows, columns=["sweep", "state", "cells", "completed", "running", "failed", "grid", "created"])


def _value(v: object) -> str:
    if isinstance(v, list) and all(isinstance(x, dict) and "code" in x for x in v):
        return "+".join(str(x["code"]) for x in v)
    return v if isinstance(v, str) else json.dumps(v)


def cells_table(summary: SweepSummary) -> pd.DataFrame:
    return pd.DataFrame([{"cell": c.name, "setting": c.setting, "state": c.state, "stage": c.stage, "problem": c.problem}
                         for c in summary.cells], columns=["cell", "setting", "state", "stage", "problem"])


def _text(row: dict, metric: str, fmt: str) -> str | None:
    if row.get(metric) is None:
        return None
    out = format(row[metric], fmt)
    if row.get(f"{metric}_low") is not None:
        out += f" [{format(row[f'{metric}_low'], fmt)}, {format(row[f'{metric}_high'], fmt)}]"
    return out


RESULT_COLUMNS = ["setting", "system", "language", "transfer", "distance", "seeds", "F1", "EM", "F1 L2/L1", "EM L2/L1",
                  "F1 [seeds+paragraphs]", "EM [seeds+paragraphs]"]


def _results_stamp(folder: Path) -> tuple:
    """What the rows depend on: each cell's results.json (a cell that finishes changes it)."""
    out = []
    for f in sorted(folder.glob("*/results.json")):
        try:
            st = f.stat()
        except OSError:
            continue
        out.append((f.parent.name, st.st_mtime_ns, st.st_size))
    return tuple(out)


@functools.lru_cache(maxsize=16)
def _rows(folder: str, stamp: tuple) -> list[dict]:
    return _sweep_rows(folder)


def sweep_rows(folder: str | Path) -> list[dict]:
    """:func:`xlviz.transfer.sweep_report.sweep_rows`, kept while no cell's results change:
    the seeds-then-paragraphs intervals re-read every cell's predictions, too slow for a page
    that re-draws every few seconds while a sweep runs."""
    folder = Path(folder)
    return _rows(str(folder.resolve()), _results_stamp(folder))


def live_rows(rows: list[dict]) -> list[dict]:
    """The sweep rows a chart or a paired difference may use: those with at least one seed
    that is a result (``n`` counts the seeds left after degenerate rows were left out). A row
    whose every seed is degenerate stays in the table, with its exclusions."""
    return [r for r in rows if r.get("n")]


def timing_line(folder: str | Path) -> str:
    """The sweep's stage time beside its completed cells run alone (what sharing saved)."""
    t = sweep_timing(folder)
    if not t["cells"]:
        return ""
    return (f"Stage time: {t['ran_s'] / 60:.1f} min over {t['cells']} completed cells; the same cells run alone: "
            f"{t['alone_s'] / 60:.1f} min ({t['copied']} shared stages received as copies).")


def _sp(row: dict, metric: str) -> str | None:
    if row.get(f"{metric}_sp_low") is None:
        return None
    return f"[{row[f'{metric}_sp_low']:.1f}, {row[f'{metric}_sp_high']:.1f}]"


def results_table(rows: list[dict], systems: list[str] | None = None) -> pd.DataFrame:
    """:func:`xlviz.transfer.sweep_report.sweep_rows` as shown: per setting, system and
    language the mean over seeds and its 95% interval, EM beside F1."""
    keep = [r for r in rows if not systems or r["system"] in systems]
    keep.sort(key=lambda r: (r["system"], r["distance"] if r["distance"] is not None else 99, r["setting"], r["language"]))
    return pd.DataFrame([{"setting": r["setting"], "system": r["system"], "language": r["language"],
                          "transfer": r["transfer"], "distance": r["distance"],
                          "seeds": r["n"], "F1": _text(r, "f1", ".1f"), "EM": _text(r, "exact_match", ".1f"),
                          "F1 L2/L1": _text(r, "ratio", ".2f"), "EM L2/L1": _text(r, "em_ratio", ".2f"),
                          "F1 [seeds+paragraphs]": _sp(r, "f1"), "EM [seeds+paragraphs]": _sp(r, "exact_match")} for r in keep],
                        columns=RESULT_COLUMNS)


PAIRED_COLUMNS = ["95% t interval", "p", "p Holm", "p sign-flip (exact)", "verdict", "seeds", "seeds for 80% power"]


def paired_table(folder: str | Path, a: str, b: str, metric: str) -> pd.DataFrame:
    """``a`` minus ``b`` per setting and L2, paired by cell, as
    :func:`xlviz.transfer.sweep_report.paired_differences` decides it: the mean over seeds, its
    t interval (with 2 seeds: labelled, one degree of freedom), raw and Holm-adjusted p, the
    exact sign-flip p with its floor, the verdict text and the seeds 80% power would need. The
    page adds nothing: it shows these columns."""
    from xlviz.evaluation.seeds import ALPHA, verdict_text
    from xlviz.transfer.sweep_report import paired_differences

    def p_text(value: float | None) -> str | None:
        return None if value is None else ("<0.001" if value < 0.001 else f"{value:.3f}")

    rows = []
    for d in paired_differences(folder, a, b, metric):
        interval = None
        if d["low"] is not None:
            interval = f"[{d['low']:+.2f}, {d['high']:+.2f}]" + (" (2 seeds: 1 df, wide)" if d["n"] == 2 else "")
        flip = p_text(d["p_sign_flip"])
        if flip is not None and d["sign_flip_floor"] >= ALPHA:
            flip += f" (min {d['sign_flip_floor']:.3f})"
        rows.append({"setting": d["setting"], "language": d["language"], f"{a} − {b}": f"{d['difference']:+.2f}",
                     "95% t interval": interval, "p": p_text(d["p"]), "p Holm": p_text(d["p_holm"]), "p sign-flip (exact)": flip,
                     "verdict": verdict_text(d["verdict"], a, b, d["n"]), "seeds": d["n"],
                     "seeds for 80% power": d["seeds_needed"]})
    return pd.DataFrame(rows, columns=["setting", "language", f"{a} − {b}", *PAIRED_COLUMNS])


def cell_l2s(run_name: str, root: str | Path | None = None) -> list[str]:
    """A cell's L2s (its config's languages after the L1)."""
    from xlviz.runs import Run, checkpoints_root
    from xlviz.views.choices import run_languages

    return run_languages(Run(checkpoints_root(root) / run_name))[1:]


def cell_models(run_name: str, root: str | Path | None = None) -> list[str]:
    """The sidebar's keys of a cell's exported QA systems (what XQuAD and Attention read)."""
    from xlviz.runs import Run, checkpoints_root
    from xlviz.views.choices import run_model_choices

    return [c.key for c in run_model_choices(Run(checkpoints_root(root) / run_name)) if c.group == "export"]
