"""What ``xlviz report`` averages, checked before a number is shown.

Why: a report over several runs reads them as seeds of one configuration; it once counted one
run given twice (or through a link) as two seeds, averaged runs of different settings (40 and
300 pre-training steps) as seeds, showed a row whose ``verdict`` field was edited to "ok" as a
result although ``verdicts.json`` judged its stage degenerate, printed F1 1e308 and EM 300 as
scores and filed an unknown setting under zero-shot. Here:

- :func:`checked_results`: a run's rows with their scores checked
  (:func:`xlviz.transfer.report.check_score_rows`) and their verdicts taken from the run's
  ``verdicts.json``, never from the row (:func:`apply_verdicts`);
- :func:`check_seed_runs`: several runs are distinct folders (compared resolved), of one
  configuration (``config.json`` flattened, seeds and the run's identity aside) and of
  distinct seeds; runs of other settings are refused naming the settings, or, when the user
  asks for it, listed under the table as what differs.
"""

from __future__ import annotations

import os
from pathlib import Path

from xlviz.errors import XlvizError, bounded
from xlviz.runs import Run, artefacts, differing_settings
from xlviz.training.verdicts import DEGENERATE, OK, UNJUDGED, degenerate_stages

# Verdicts a row may carry; anything else in the field is refused unless verdicts.json already
# makes the row degenerate.
ROW_VERDICTS = (OK, DEGENERATE, UNJUDGED)
# A config key whose last part is one of these is a seed: seeds of one configuration differ in them.
SEED_KEYS = ("seed",)
# Config keys (first part) that name or date a run rather than set it up.
IDENTITY_KEYS = ("name", "out", "run_dir", "versions", "created", "started", "finished", "timestamp", "notes", "tags")
SHOWN_DIFFERENCES = 6


def _row_stages(value: object, path: Path, i: int) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        raise XlvizError(f"row {i}: must be a list of stage names, got {bounded(value, 40)}", path=path, field=f"[{i}].degenerate_stages")
    return list(value)


def apply_verdicts(rows: list[dict], run: Run) -> list[dict]:
    """``rows`` with each row's verdict from the run's ``verdicts.json``: a row is degenerate
    when a stage it depends on is judged degenerate there, whatever its own ``verdict`` says
    (an "ok" or "banana" written over "degenerate" is overridden, never shown as a result).
    The stages a row depends on are those its QA export records in the run's manifest
    (``depends_on``) and those the row names itself (``degenerate_stages``); a row whose stages
    are recorded nowhere, in a run with a degenerate stage, counts as degenerate (it may depend
    on it). A row that says "degenerate" stays so. A verdict that is none of ok, degenerate,
    unjudged, on a row that verdicts.json does not make degenerate, is refused naming the field."""
    verdicts = run.verdicts()
    judged_bad = [s for s, v in verdicts.items() if v.get("verdict") == DEGENERATE]
    recorded: dict[tuple[str, str], tuple[str, ...]] = {}
    if judged_bad:  # only then does it matter which stages a row depends on
        for a in artefacts(run, "export", present=False):
            if a.depends_on is not None and a.system is not None and a.language is not None:
                recorded[(a.system, a.language)] = a.depends_on
    out = []
    for i, r in enumerate(rows):
        claimed = r.get("verdict")
        named = _row_stages(r.get("degenerate_stages"), run.results_path, i)
        key = (str(r.get("system")), str(r.get("language")))
        stages = list(dict.fromkeys([*recorded.get(key, ()), *named]))
        bad = degenerate_stages(stages, verdicts)
        if not bad and judged_bad and key not in recorded and claimed != DEGENERATE:
            bad = judged_bad  # its stages are not recorded: it may depend on any of them
        if bad:
            out.append({**r, "verdict": DEGENERATE, "degenerate_stages": bad})
            continue
        if claimed is not None and claimed not in ROW_VERDICTS:
            raise XlvizError(f"row {i} ({key[0]} {key[1]}): unknown verdict {bounded(repr(claimed), 40)}; a row's verdict is one "
                             f"of {', '.join(ROW_VERDICTS)} (verdicts.json decides it)", path=run.results_path, field=f"[{i}].verdict")
        out.append(r)
    return out


def checked_results(run: Run) -> list[dict]:
    """The run's result rows, scores checked and verdicts from ``verdicts.json``; an XlvizError
    when it has none."""
    from xlviz.transfer.report import check_score_rows

    rows = run.results()
    if not rows:
        raise XlvizError("no results yet (the run has not scored any system)", path=run.results_path)
    return apply_verdicts(check_score_rows(rows, run.results_path), run)


def _setup(config: dict) -> dict:
    """The settings of a config that make a configuration: seeds and identity keys left out."""
    def keep(d: object, top: bool) -> object:
        if not isinstance(d, dict):
            return d
        return {k: keep(v, False) for k, v in d.items() if k not in SEED_KEYS and not (top and k in IDENTITY_KEYS)}

    return keep(config, True)  # type: ignore[return-value]


def _seeds(config: dict) -> list[tuple[str, object]]:
    """Every seed-like setting of a config, dotted, in order."""
    out: list[tuple[str, object]] = []

    def walk(d: object, prefix: str) -> None:
        if isinstance(d, dict):
            for k, v in d.items():
                if k in SEED_KEYS and not isinstance(v, dict):
                    out.append((prefix + k, v))
                else:
                    walk(v, f"{prefix}{k}.")

    walk(config, "")
    return sorted(out)


def check_seed_runs(runs: list[Run], *, allow_different: bool = False) -> list[str]:
    """Refuse runs that are not distinct seeds of one configuration; returns, with
    ``allow_different``, one line per run whose settings differ from the first's (for the
    report to print under its table), else ``[]``.

    Refused always: one folder given twice (paths compared resolved, so ``R``, ``./R`` and a
    link to it are one run), and two runs with the same configuration and the same seed (one
    seed counted twice). Refused unless ``allow_different``: runs whose ``config.json`` differ
    in any setting but the seeds and the run's name, folder, dates and package versions."""
    seen: dict[str, Path] = {}
    for run in runs:
        real = os.path.realpath(run.path)
        if real in seen:
            raise XlvizError(f"the same run is given twice (also as {seen[real]}): one run would count as two seeds",
                             path=run.path, field="RUN")
        seen[real] = run.path
    if len(runs) < 2:
        return []
    configs = [run.config() for run in runs]
    first = _setup(configs[0])
    labels = []
    for i, (run, config) in enumerate(zip(runs, configs)):
        diff = differing_settings(first, _setup(config)) if i else []
        if diff and not allow_different:
            shown = "; ".join(diff[:SHOWN_DIFFERENCES]) + (f"; and {len(diff) - SHOWN_DIFFERENCES} more"
                                                             if len(diff) > SHOWN_DIFFERENCES else "")
            raise XlvizError(f"differs from {runs[0].path} in more than the seed ({shown}): runs of different settings are not "
                             "seeds of one configuration; report them one by one, or pass --allow-different-settings to "
                             "show them together, labelled", path=run.path, field="config.json")
        if diff:
            labels.append(f"run {i + 1} ({run.path}) differs from run 1 in: {'; '.join(diff)}")
        seeds = _seeds(config)
        for j in range(i):
            if seeds and seeds == _seeds(configs[j]) and not differing_settings(_setup(configs[j]), _setup(config)):
                shown_seed = ", ".join(f"{k} {v!r}" for k, v in seeds)
                raise XlvizError(f"has the settings and the seed ({shown_seed}) of {runs[j].path}: one seed would count twice",
                                 path=run.path, field="config.json")
    return labels


__all__ = ["apply_verdicts", "checked_results", "check_seed_runs", "SEED_KEYS", "IDENTITY_KEYS"]
