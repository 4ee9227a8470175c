"""Intervals and paired tests from a bench run's folder: per-question scores rebuilt from the
run's saved predictions (``predictions/<system>-<lang>.json``) and its test sets
(``world/qa/test.<lang>.json``), so ``xlviz report`` can show intervals for runs written before
results rows carried them, combine seeds question by question, and compare two systems on
the same questions.

Scores are the run's own: each language's articles stripped (the test file's ``"articles"``),
as :meth:`xlviz.transfer.pipeline.Pipeline.score` computes them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from xlviz.errors import XlvizError
from xlviz.evaluation.uncertainty import (Interval, PairedTest, cluster_bootstrap, paired_test_seeds, paragraph_ids,
                                          score_intervals, two_level_bootstrap)
from xlviz.methods import combine_labels, resources_label, row_resources, row_setting

_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9+@._-]{0,127}")


@dataclass(frozen=True)
class QuestionScores:
    """One system's per-question scores on one language's test set, in file order."""

    ids: list[str]
    paragraphs: list[str]
    exact_match: list[float]
    f1: list[float]


def _part(value: object, field: str) -> str:
    """A system or language name used in a file name: one plain path component."""
    if not isinstance(value, str) or not _PART.fullmatch(value) or ".." in value:
        raise XlvizError(f"not a plain system or language name: {value!r}", field=field)
    return value


def question_scores(run_dir: str | Path, system: str, lang: str) -> QuestionScores | None:
    """The run's per-question EM/F1 of ``system`` on ``lang`` (None when the run kept no
    predictions or test set for it)."""
    from xlviz.data.squad import language_articles, read_squad_json
    from xlviz.evaluation.squad_metric import per_question_scores, read_predictions_json

    from xlviz.runs import artefact

    run = Path(run_dir)
    data_file = run / "world" / "qa" / f"test.{_part(lang, 'language')}.json"
    saved = artefact(run, "predictions", system=_part(system, "system"), language=lang)  # the run's manifest says where
    if saved is None or not data_file.is_file() or not saved.folder.is_file():
        return None
    pred_file = saved.folder
    data = read_squad_json(data_file)
    rows = per_question_scores(data, read_predictions_json(pred_file), articles=language_articles(data, data_file))
    para = paragraph_ids(data)
    return QuestionScores([r["id"] for r in rows], [para[r["id"]] for r in rows], [r["exact_match"] for r in rows],
                          [r["f1"] for r in rows])


def fill_intervals(run_dir: str | Path, rows: list[dict]) -> list[dict]:
    """``rows`` with paragraph-bootstrap interval fields added where a row lacks them and the
    run kept its predictions (rows written before results carried intervals)."""
    out = []
    for r in rows:
        if "f1_ci_low" not in r:
            try:
                qs = question_scores(run_dir, r.get("system"), r.get("language"))
            except XlvizError:
                qs = None
            if qs is not None and qs.ids:
                r = {**r, **score_intervals([{"id": i, "exact_match": e, "f1": f} for i, e, f in
                                             zip(qs.ids, qs.exact_match, qs.f1)], dict(zip(qs.ids, qs.paragraphs)))}
        out.append(r)
    return out


def combined_intervals(run_dirs: list[Path], runs: list[list[dict]], metric: str = "f1") -> dict[tuple[str, str], Interval]:
    """(system, language) -> the two-level (seeds, then paragraphs) interval of ``metric`` over
    every run that kept that system's predictions in that language (two runs or more)."""
    out: dict[tuple[str, str], Interval] = {}
    keys = dict.fromkeys((r["system"], r["language"]) for rows in runs for r in rows)
    for system, lang in keys:
        per_seed = per_seed_scores(run_dirs, system, lang, metric)
        if len(per_seed) >= 2:
            out[(system, lang)] = two_level_bootstrap(per_seed)
    return out


def per_seed_scores(run_dirs: list[Path], system: str, lang: str, metric: str = "f1") -> list[tuple[list[float], list[str]]]:
    """``(per-question metric, paragraph ids)`` of ``system`` on ``lang`` in each run that kept
    its predictions there (runs that did not, or whose files cannot be read, are skipped)."""
    per_seed = []
    for d in run_dirs:
        try:
            qs = question_scores(d, system, lang)
        except XlvizError:
            qs = None
        if qs is not None and qs.ids:
            per_seed.append((getattr(qs, metric), qs.paragraphs))
    return per_seed


def seeds_paragraphs_interval(run_dirs: list[Path], system: str, lang: str, metric: str = "f1") -> Interval | None:
    """The two-level (seeds, then paragraphs) interval of ``metric`` over the runs that kept
    ``system``'s predictions in ``lang``; the paragraph bootstrap with one run; None with none."""
    per_seed = per_seed_scores(run_dirs, system, lang, metric)
    if not per_seed:
        return None
    return two_level_bootstrap(per_seed) if len(per_seed) > 1 else cluster_bootstrap(*per_seed[0])


def compare_systems(run_dirs: list[Path], runs: list[list[dict]], a: str, b: str) -> list[dict]:
    """System ``a`` against ``b`` per language on the same questions, in every run that scored
    both: one row per language and metric with the mean difference, its interval (paragraph
    bootstrap; over several runs seeds then paragraphs) and the permutation p-value. Systems of
    different settings are not compared."""
    settings = {}
    for rows in runs:
        for r in rows:
            if r.get("system") in (a, b):
                settings.setdefault(r["system"], set()).add(row_setting(r))
    for name in (a, b):
        if name not in settings:
            raise XlvizError(f"no results row of system {name!r} in these runs", field="compare")
    if settings[a] != settings[b]:
        raise XlvizError(f"{a} ({', '.join(sorted(settings[a]))}) and {b} ({', '.join(sorted(settings[b]))}) are in different "
                         "settings: their scores are not comparable", field="compare")
    # what each side read beyond L1 labels: a comparison across resources is allowed, and labelled
    resources = {name: combine_labels(resources_label(row_resources(r)) for rows in runs for r in rows
                                      if r.get("system") == name) for name in (a, b)}
    langs = list(dict.fromkeys(r["language"] for rows in runs for r in rows if r.get("system") == a))
    out = []
    for lang in langs:
        pairs: list[tuple[QuestionScores, QuestionScores]] = []
        for d in run_dirs:
            qa, qb = question_scores(d, a, lang), question_scores(d, b, lang)
            if qa is not None and qb is not None:
                if qa.ids != qb.ids:
                    raise XlvizError(f"{a} and {b} were scored on different {lang} questions", path=d, field="compare")
                pairs.append((qa, qb))
        if not pairs:
            continue
        for metric in ("f1", "exact_match"):
            test: PairedTest = paired_test_seeds([(getattr(x, metric), getattr(y, metric), x.paragraphs) for x, y in pairs])
            out.append({"language": lang, "metric": metric, "setting": next(iter(settings[a])), **test.as_dict(),
                        "resources": resources})
    if not out:
        raise XlvizError(f"no run kept the predictions of both {a} and {b} on a shared language", field="compare")
    return out


__all__ = ["QuestionScores", "question_scores", "fill_intervals", "combined_intervals", "per_seed_scores",
           "seeds_paragraphs_interval", "compare_systems"]
