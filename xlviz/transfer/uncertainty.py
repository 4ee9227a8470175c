"""Intervals and paired tests from a bench run's folder: per-question scores rebuilt from the
run's saved predictions (``predictions/<system>-<lang>.json``) and its test sets
(``world/qa/test.<lang>.json``), so ``xlviz report`` can show intervals for runs written before
results rows carried them, combine seeds question by question, and compare two systems on
the same questions.

Scores are the run's own: each language's articles stripped (the test file's ``"articles"``),
as the QA task scores the world; a corpus run's QA evaluation files (``data.qa_eval``, e.g.
XQuAD) under MLQA's normalisation of a real language, on the questions it scored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from xlviz.errors import XlvizError
from xlviz.evaluation.seeds import ONE_SEED, compare_seeds, decide, holm, seeds_for_power
from xlviz.evaluation.seeds import seeds_paragraphs_interval as _seeds_paragraphs
from xlviz.evaluation.uncertainty import Interval, cluster_bootstrap, paired_test, paragraph_ids, score_intervals
from xlviz.methods import combine_labels, resources_label, row_resources, row_setting
from xlviz.training.verdicts import is_degenerate

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


@dataclass(frozen=True)
class TestSet:
    """The test file a run scored ``lang`` on: the world's generated set (``world``), or a
    corpus run's QA evaluation file (``data.qa_eval``, e.g. XQuAD; read where the config names
    it, ``root`` its folder), the English file of the same ids when there is one, and the real
    language whose MLQA normalisation a corpus run scored with (None: the world's articles)."""

    file: Path
    root: Path
    english: Path | None
    world: bool
    language: str | None = None

    def read(self, ids: set[str] | None = None) -> dict:
        """The SQuAD dict; a corpus file only with the questions ``ids`` (those the run scored:
        the ones it trained on are left out)."""
        from xlviz.data.squad import read_squad_json
        from xlviz.transfer.qa import squad_subset

        data = read_squad_json(self.file)
        return data if self.world or ids is None else squad_subset(data, lambda qid: qid in ids)


def scored_test_set(run_dir: str | Path, lang: str) -> TestSet | None:
    """Where the run's ``lang`` test questions are (None when it scored no QA in ``lang``)."""
    from xlviz.runs import Run, world_path

    run = Path(run_dir)
    data_file = world_path(run, "qa", split="test", language=_part(lang, "language"))
    if data_file.is_file():
        english = world_path(run, "qa", split="test", language="en")
        return TestSet(data_file, run, english if english.is_file() else None, True)
    try:
        cfg = Run(run).config()
    except XlvizError:
        return None
    data = cfg.get("data")
    specs = data.get("qa_eval") if isinstance(data, dict) and cfg.get("source", "world") != "world" else None
    if not specs:
        return None
    from xlviz.data.sources.files import shared_path
    from xlviz.evaluation.squad_metric import mlqa_languages
    from xlviz.transfer.qa import qa_files

    files = qa_files([shared_path(f, "qa_eval") for f in ([specs] if isinstance(specs, str) else specs)])
    if lang not in files:
        return None
    return TestSet(files[lang], files[lang].resolve().parent, files.get("en"), False,
                   lang if lang in mlqa_languages() else None)


def question_scores(run_dir: str | Path, system: str, lang: str) -> QuestionScores | None:
    """The run's per-question EM/F1 of ``system`` on ``lang`` (None when the run kept no
    predictions or test set for it)."""
    from xlviz.data.squad import language_articles
    from xlviz.evaluation.squad_metric import per_question_scores, read_predictions_json

    from xlviz.runs import artefact

    run = Path(run_dir)
    saved = artefact(run, "predictions", system=_part(system, "system"), language=_part(lang, "language"))  # the manifest says where
    test = scored_test_set(run, lang) if saved is not None and saved.folder.is_file() else None
    if test is None:
        return None
    preds = read_predictions_json(saved.folder)
    data = test.read(set(preds))
    if test.world:
        rows = per_question_scores(data, preds, articles=language_articles(data, test.file))
    else:
        rows = per_question_scores(data, preds, language=test.language)
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
    """(system, language) -> the seeds + test-set interval of ``metric``
    (:func:`xlviz.evaluation.seeds.seeds_paragraphs_interval`) over every run that kept that
    system's predictions in that language and whose row there is a result (two runs or more)."""
    out: dict[tuple[str, str], Interval] = {}
    keys = dict.fromkeys((r["system"], r["language"]) for rows in runs for r in rows)
    for system, lang in keys:
        dirs = [d for d, rows in zip(run_dirs, runs) if _live(rows, system, lang)]
        per_seed = per_seed_scores(dirs, system, lang, metric)
        if len(per_seed) >= 2:
            out[(system, lang)] = _seeds_paragraphs(per_seed)
    return out


def _live(rows: list[dict], system: str, lang: str) -> dict | None:
    """The run's row of ``system`` in ``lang`` when it is a result (not degenerate), else None."""
    row = next((r for r in rows if r.get("system") == system and r.get("language") == lang), None)
    return None if row is None or is_degenerate(row) else row


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
    """The seeds + test-set interval of ``metric`` over the runs that kept ``system``'s
    predictions in ``lang``; the paragraph bootstrap with one run (test-set noise only); None
    with none. The caller passes only runs whose row is a result."""
    per_seed = per_seed_scores(run_dirs, system, lang, metric)
    if not per_seed:
        return None
    return _seeds_paragraphs(per_seed) if len(per_seed) > 1 else cluster_bootstrap(*per_seed[0])


def _comparison(pairs: list[tuple[QuestionScores, QuestionScores]], metric: str) -> dict:
    """A − B of one language and metric: over seeds (one mean difference per seed) with two
    or more, on the test paragraphs of the one seed otherwise."""
    first = pairs[0][0]
    base = {"n_questions": len(first.ids), "n_paragraphs": len(set(first.paragraphs)), "n_seeds": len(pairs)}
    if len(pairs) == 1:
        x, y = pairs[0]
        t = paired_test(getattr(x, metric), getattr(y, metric), x.paragraphs)
        return {**base, "difference": t.difference, "low": t.low, "high": t.high, "p_value": t.p_value,
                "method": t.method, "p_method": t.p_method, "n_resamples": t.n_resamples, "p_sign_flip": None,
                "sign_flip_floor": None, "sd": None, "verdict": ONE_SEED}
    diffs = [sum(getattr(x, metric)) / len(x.ids) - sum(getattr(y, metric)) / len(y.ids) for x, y in pairs]
    c = compare_seeds(diffs)
    return {**base, "difference": c.difference, "low": c.low, "high": c.high, "p_value": c.p_value,
            "method": "t over seeds (per-seed differences)", "p_method": c.p_method, "n_resamples": 0,
            "p_sign_flip": c.p_sign_flip, "sign_flip_floor": c.sign_flip_floor, "sd": c.sd, "verdict": c.verdict}


def family(rows: list[dict]) -> list[dict]:
    """The rows of one comparison table as a family: each row's Holm-adjusted p over all of
    them (``p_holm``), its verdict re-decided on that p (:func:`xlviz.evaluation.seeds.decide`),
    and ``seeds_needed``: how many seeds a paired t test needs to detect a difference of the
    observed size (80% power, alpha 0.05) given the observed between-seed sd."""
    adjusted = holm([r["p_value"] for r in rows])
    out = []
    for r, p in zip(rows, adjusted):
        need = seeds_for_power(r["difference"], r["sd"]) if r["n_seeds"] >= 2 and r["sd"] is not None else None
        out.append({**r, "p_holm": p, "verdict": decide(r["n_seeds"], p, r["difference"]), "seeds_needed": need})
    return out


def compare_systems(run_dirs: list[Path], runs: list[list[dict]], a: str, b: str, *, adjust: bool = True) -> list[dict]:
    """System ``a`` against ``b`` per language on the same questions: one row per language and
    metric. A run enters a language only when both rows there are results (a degenerate row is
    no result: ``excluded`` counts the runs left out) and kept both systems' predictions. Over
    several runs the unit is the seed (:func:`xlviz.evaluation.seeds.compare_seeds`); one run
    gives the paragraph-level test, which says nothing about the method. With ``adjust`` the
    rows are one family (:func:`family`: Holm, verdict, seeds needed). Systems of different
    settings are never paired."""
    settings: dict[str, set] = {}
    for rows in runs:
        for r in rows:
            if r.get("system") in (a, b):
                settings.setdefault(r["system"], set()).add(row_setting(r))
    for name in (a, b):
        if name not in settings:
            raise XlvizError(f"no results row of system {name!r} in these runs", field="compare")
    if settings[a] != settings[b] or len(settings[a]) > 1:
        raise XlvizError(f"{a} ({', '.join(sorted(settings[a]))}) and {b} ({', '.join(sorted(settings[b]))}) are in different "
                         "settings: their scores are not comparable", field="compare")
    # what each side read beyond L1 labels: a comparison across resources is allowed, and labelled
    resources = {name: combine_labels(resources_label(row_resources(r)) for rows in runs for r in rows
                                      if r.get("system") == name) for name in (a, b)}
    langs = list(dict.fromkeys(r["language"] for rows in runs for r in rows if r.get("system") == a))
    out = []
    for lang in langs:
        pairs: list[tuple[QuestionScores, QuestionScores]] = []
        excluded = 0
        for d, rows in zip(run_dirs, runs):
            ra, rb = _live(rows, a, lang), _live(rows, b, lang)
            if ra is None or rb is None:
                excluded += any(r.get("system") in (a, b) and r.get("language") == lang and is_degenerate(r) for r in rows)
                continue
            qa, qb = question_scores(d, a, lang), question_scores(d, b, lang)
            if qa is not None and qb is not None:
                if qa.ids != qb.ids:
                    raise XlvizError(f"{a} and {b} were scored on different {lang} questions", path=d, field="compare")
                pairs.append((qa, qb))
        if not pairs:
            continue
        for metric in ("f1", "exact_match"):
            out.append({"language": lang, "metric": metric, "setting": next(iter(settings[a])), "excluded": excluded,
                        **_comparison(pairs, metric), "resources": resources})
    if not out:
        raise XlvizError(f"no run kept the predictions of both {a} and {b} as results on a shared language "
                         "(degenerate rows are no result)", field="compare")
    return family(out) if adjust else out


__all__ = ["QuestionScores", "question_scores", "fill_intervals", "combined_intervals", "per_seed_scores",
           "seeds_paragraphs_interval", "compare_systems", "family"]
