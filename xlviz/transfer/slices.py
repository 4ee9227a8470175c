"""A run's metrics by slice: each system's EM/F1 per group of test questions, from the run's saved
predictions, and the paired difference of two systems per group, stored in the run.

Why: the slice table of a run is a set-level table (every system, every slice, 2000 bootstrap
resamples each), cheap enough to compute but a product worth keeping beside the run's results:
``xlviz report --slices`` writes it once as ``analyses/slices-<key>.json`` and ``.csv`` (listed in
the run's manifest as kind ``analysis``) and reads it back when nothing it was computed from has
changed. The JSON's ``request`` says what that is (the language, systems, resamples and a digest
of the test file, the world's description and each predictions file), so a stored table is used
only when every field matches; the file name is a digest of the request.

Scores are the run's own (:func:`xlviz.transfer.uncertainty.question_scores`: each language's
articles stripped), so the ``all`` row equals the system's results row.
"""

from __future__ import annotations

import csv
import io
import os
from dataclasses import dataclass, field
from pathlib import Path

from xlviz.errors import XlvizError
from xlviz.evaluation.slices import DIFF_COLUMNS, SCORE_COLUMNS, members, slice_differences, slice_table, test_set_slices
from xlviz.evaluation.uncertainty import N_RESAMPLES

FORMAT = "xlviz-slices/1"
NAME = "slices"


@dataclass
class SliceReport:
    """The slice table of one run and language: ``rows`` (one per slice and system), ``differences``
    (``pair``'s A − B per slice and metric), ``members`` (``{dimension: {value: question ids}}``),
    what the slices come from (``source``: "world" or "squad") and ``request``."""

    request: dict
    source: str
    rows: list[dict]
    differences: list[dict] = field(default_factory=list)
    members: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    stored: Path | None = None  # the file it was read from or written to

    def to_json(self) -> dict:
        return {"format": FORMAT, "request": self.request, "source": self.source, "rows": self.rows,
                "differences": self.differences, "members": self.members}

    def csv_text(self) -> str:
        """Scores and differences in one CSV: a ``table`` column says which."""
        buf = io.StringIO()
        cols = ["table", *dict.fromkeys(SCORE_COLUMNS + DIFF_COLUMNS)]
        w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
        w.writeheader()
        for r in self.rows:
            w.writerow({"table": "scores", **r})
        for r in self.differences:
            w.writerow({"table": "difference", **r})
        return buf.getvalue()


def _digest(path: Path, root: Path) -> str:
    from xlviz.analysis.stored import file_digest

    return file_digest(path, root)


def _systems(run, lang: str, systems: list[str] | None) -> dict[str, Path]:
    from xlviz.runs import artefacts

    saved = {a.system: a.folder for a in artefacts(run, "predictions", language=lang) if a.system and a.folder.is_file()}
    if systems is None:
        return dict(sorted(saved.items()))
    missing = [s for s in systems if s not in saved]
    if missing:
        raise XlvizError(f"the run kept no {lang} predictions of {', '.join(missing)} (it has: {', '.join(sorted(saved)) or 'none'})",
                         path=run.path, field="systems")
    return {s: saved[s] for s in systems}


def slice_request(run_dir: str | os.PathLike, lang: str, systems: list[str] | None = None,
                  pair: tuple[str, str] | None = None, n_resamples: int = N_RESAMPLES) -> tuple[dict, dict[str, Path]]:
    """What a slice table of the run is computed from (the stored file must say exactly this),
    and the systems' predictions files."""
    from xlviz.runs import Run, world_path
    from xlviz.transfer.uncertainty import scored_test_set

    run = Run(Path(run_dir))
    if not run.exists():
        raise XlvizError("not a run folder (no config.json)", path=run.path)
    test = scored_test_set(run.path, lang)  # the world's test set, or a corpus run's QA evaluation file
    if test is None:
        raise XlvizError(f"the run has no {lang} test set", path=world_path(run, "qa", split="test", language=lang))
    chosen = _systems(run, lang, list(dict.fromkeys([*(systems or []), *(pair or [])])) if systems or pair else None)
    if not chosen:
        raise XlvizError(f"the run kept no {lang} predictions", path=run.path, field="language")
    inputs = {"test": _digest(test.file, test.root)}
    world = world_path(run, "world")
    if world.is_file():
        inputs["world"] = _digest(world, run.path)
    for s, p in chosen.items():
        inputs[f"predictions:{s}"] = _digest(p, run.path)
    request = {"format": FORMAT, "language": lang, "systems": list(chosen), "pair": list(pair) if pair else None,
               "n_resamples": int(n_resamples), "inputs": inputs}
    return request, chosen


def find(run_dir: str | os.PathLike, request: dict) -> SliceReport | None:
    """The stored table computed from exactly ``request`` (None when there is none, or it does
    not read)."""
    from xlviz.analysis.stored import find as find_stored

    got = find_stored(run_dir, NAME, FORMAT, request)
    if got is None:
        return None
    obj, path = got
    return SliceReport(request, obj.get("source", ""), obj.get("rows", []), obj.get("differences", []), obj.get("members", {}), path)


def compute(run_dir: str | os.PathLike, lang: str, systems: list[str] | None = None, pair: tuple[str, str] | None = None,
            n_resamples: int = N_RESAMPLES) -> SliceReport:
    """The slice table of the run's ``systems`` (default: every system with saved ``lang``
    predictions) on ``lang``, and ``pair``'s paired differences; computed, not stored."""
    from xlviz.runs import world_folder
    from xlviz.transfer.uncertainty import question_scores, scored_test_set

    request, chosen = slice_request(run_dir, lang, systems, pair, n_resamples)
    run = Path(run_dir)
    test = scored_test_set(run, lang)
    slices, order, source = test_set_slices(test.file, lang, world_dir=world_folder(run) if test.world else None,
                                            english_file=test.english)
    scores = {}
    for s in chosen:
        qs = question_scores(run, s, lang)
        if qs is None:
            raise XlvizError(f"no {lang} scores of {s}", path=run, field="systems")
        scores[s] = qs
    if not test.world:  # a corpus run's file also holds the questions it trained on: only those it scored
        scored = {q for qs in scores.values() for q in qs.ids}
        slices = {q: v for q, v in slices.items() if q in scored}
    rows = slice_table(scores, slices, order=order, n_resamples=n_resamples)
    diffs = slice_differences(pair[0], scores[pair[0]], pair[1], scores[pair[1]], slices, order=order,
                              n_resamples=n_resamples) if pair else []
    groups: dict[str, dict[str, list[str]]] = {}
    for (dim, value), ids in members(slices, order).items():
        groups.setdefault(dim, {})[value] = ids
    return SliceReport(request, source, rows, diffs, groups)


def write(run, report: SliceReport, record) -> Path:
    """Store ``report`` in the run (JSON and CSV, atomically) and list both in its manifest
    through ``record(entries)``: the run's writer only (the caller holds its lock)."""
    from xlviz.analysis.stored import write as write_stored

    report.stored = write_stored(run.path, NAME, report.to_json(), report.csv_text(), report.request["language"], record)
    return report.stored


def run_slices(run_dir: str | os.PathLike, lang: str, systems: list[str] | None = None, pair: tuple[str, str] | None = None,
               n_resamples: int = N_RESAMPLES) -> SliceReport:
    """The stored table when it matches, computed (and not stored) otherwise: what a reader
    that is not the run's writer (a notebook, the app) uses."""
    request, _ = slice_request(run_dir, lang, systems, pair, n_resamples)
    return find(run_dir, request) or compute(run_dir, lang, systems, pair, n_resamples)


__all__ = ["SliceReport", "slice_request", "find", "compute", "write", "run_slices", "FORMAT"]
