"""Metrics by slice: EM/F1 of groups of test questions, each with its paragraph interval, and the
paired difference between two systems per group.

Why: a transferred model's L2 score is one number; where it loses (questions about the object,
answers late in the context, paragraphs of many facts) says which cost it pays. On the generated
world the groups come from the generator itself (:meth:`xlviz.data.world.World.qa_facts`: the
asked role, the answer's kind, the paragraph's facts), so no group depends on parsing text; on
real SQuAD-format data (XQuAD) from the text: question word, answer length, answer position and
question-context overlap.

Every interval resamples whole paragraphs within the slice
(:func:`xlviz.evaluation.uncertainty.cluster_bootstrap`), paired differences use
:func:`~xlviz.evaluation.uncertainty.paired_test`; both are one seed's (say so beside them).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from dataclasses import dataclass
from typing import Any, Protocol

from xlviz.errors import XlvizError
from xlviz.evaluation.uncertainty import N_RESAMPLES, cluster_bootstrap, paired_test

# the slice dimensions, in display order, and each one's values in display order
WORLD_DIMENSIONS: dict[str, tuple[str, ...]] = {
    "question word": ("who", "what", "where"),
    "answer type": ("person", "animal", "thing", "place"),
    "answer role": ("subject", "object", "location"),
    "answer position": ("first third", "middle third", "last third"),
    "facts in paragraph": tuple(str(i) for i in range(1, 9)),
    "question words in answer sentence": ("all", "half or more", "under half"),
}
REAL_DIMENSIONS: dict[str, tuple[str, ...]] = {
    "question word": ("what", "which", "who", "whom", "whose", "when", "where", "why", "how", "other"),
    "answer length": ("1 word", "2-3 words", "4+ words"),
    "answer position": ("first third", "middle third", "last third"),
    "question-context overlap": ("under a third", "a third to two thirds", "two thirds or more"),
}
ALL = "all"  # the row of every question, beside the slices
ROLE_NAMES = {"subj": "subject", "obj": "object", "loc": "location"}
WH_WORDS = REAL_DIMENSIONS["question word"][:-1]
_TOKEN = re.compile(r"\w+", re.UNICODE)
# table columns (CSV) of :func:`slice_table` and :func:`slice_differences`
SCORE_COLUMNS = ("dimension", "value", "system", "n_questions", "n_paragraphs", "exact_match", "exact_match_low",
                 "exact_match_high", "f1", "f1_low", "f1_high")
DIFF_COLUMNS = ("dimension", "value", "system_a", "system_b", "metric", "difference", "low", "high", "p_value",
                "n_questions", "n_paragraphs")


class Scored(Protocol):
    """One system's per-question scores on one test set (``QuestionScores`` of a run)."""

    ids: list[str]
    paragraphs: list[str]
    exact_match: list[float]
    f1: list[float]


@dataclass(frozen=True)
class Scores:
    """Per-question scores in file order: percent, paragraph id per question."""

    ids: list[str]
    paragraphs: list[str]
    exact_match: list[float]
    f1: list[float]


# --------------------------------------------------------------------------- which slice
def position_bucket(start: int, context_length: int) -> str:
    """Thirds of the context by the answer's first character."""
    share = start / max(context_length, 1)
    return "first third" if share < 1 / 3 else "middle third" if share < 2 / 3 else "last third"


def share_bucket(found: int, total: int) -> str:
    """The world's overlap buckets: every question content word in the answer's sentence, at
    least half, or fewer."""
    if total == 0 or found == total:
        return "all"
    return "half or more" if 2 * found >= total else "under half"


def overlap_bucket(share: float) -> str:
    return "under a third" if share < 1 / 3 else "a third to two thirds" if share < 2 / 3 else "two thirds or more"


def length_bucket(n_words: int) -> str:
    return "1 word" if n_words <= 1 else "2-3 words" if n_words <= 3 else "4+ words"


def _content(words: Sequence[tuple[str, str]]) -> list[str]:
    """Content words of a rendering: heads, adjectives and the verb (not articles, adpositions,
    wh words, auxiliaries or punctuation)."""
    return [w.lower() for w, slot in words if slot == "verb" or slot.endswith("/head") or "/adj" in slot]


def world_slices(world: Any, lang: str, split: str = "test") -> dict[str, dict[str, str]]:
    """``{question id: {dimension: value}}`` of the world's ``split`` in ``lang``: the generator's
    facts (wh word, answer type and role, facts in the paragraph) and, from ``lang``'s own
    rendering, the answer's position in the context and the share of the question's content
    words found (same surface form) in the answer's sentence."""
    from xlviz.data.lexicon import noun_class
    from xlviz.data.world import render

    if lang not in world.languages:
        raise XlvizError(f"unknown language {lang!r}; this world has {world.languages}", field="language")
    language = world.lang[lang]
    contexts: dict[str, tuple[int, int]] = {}
    for article in world.qa(split, lang)["data"]:
        for para in article["paragraphs"]:
            for q in para["qas"]:
                contexts[q["id"]] = (q["answers"][0]["answer_start"], len(para["context"]))
    out: dict[str, dict[str, str]] = {}
    for p_idx, facts in enumerate(world.qa_facts(split)):
        for f_idx, (clause, questions) in enumerate(facts):
            sentence = {w.lower() for w, _ in render(language, clause).words}
            for q in questions:
                qid = f"{split}-{p_idx:04d}-{f_idx}-{q.target}"
                if q.target == "loc":
                    wh, kind = "where", "place"
                else:
                    np_ = clause.subj if q.target == "subj" else clause.obj
                    wh = np_.wh
                    cls = "person" if np_.is_name else noun_class(np_.head)
                    kind = cls if cls in ("person", "animal", "place") else "thing"
                content = _content(render(language, q).words)
                start, length = contexts[qid]
                out[qid] = {
                    "question word": wh, "answer type": kind, "answer role": ROLE_NAMES[q.target],
                    "answer position": position_bucket(start, length), "facts in paragraph": str(len(facts)),
                    "question words in answer sentence": share_bucket(sum(w in sentence for w in content), len(content)),
                }
    return out


def _tokens(text: str) -> list[str]:
    return [t.lower() for t in _TOKEN.findall(text)]


def question_word(question: str) -> str:
    """The first English wh word of ``question`` ("other" when it has none)."""
    return next((t for t in _tokens(question) if t in WH_WORDS), "other")


def squad_slices(data: Mapping, english: Mapping | None = None) -> dict[str, dict[str, str]]:
    """``{question id: {dimension: value}}`` of a SQuAD-format dict (real XQuAD): the question
    word (read from ``english``, the same ids' English file, when given: XQuAD shares ids across
    languages), the first gold answer's length in words and position in its context, and the
    share of the question's words (three letters or more) found in the context."""
    english_q = {}
    if english is not None:
        english_q = {q["id"]: q["question"] for a in english.get("data", []) for p in a.get("paragraphs", [])
                     for q in p.get("qas", [])}
    out: dict[str, dict[str, str]] = {}
    for article in data.get("data", []):
        for para in article.get("paragraphs", []):
            context = para.get("context", "")
            ctx_tokens = set(_tokens(context))
            for q in para.get("qas", []):
                answers = q.get("answers") or [{"text": "", "answer_start": 0}]
                words = [t for t in _tokens(q.get("question", "")) if len(t) >= 3]
                share = sum(t in ctx_tokens for t in words) / len(words) if words else 0.0
                out[q["id"]] = {
                    "question word": question_word(english_q.get(q["id"], q.get("question", ""))),
                    "answer length": length_bucket(len(_tokens(answers[0].get("text", "")))),
                    "answer position": position_bucket(int(answers[0].get("answer_start", 0)), len(context)),
                    "question-context overlap": overlap_bucket(share),
                }
    return out


# --------------------------------------------------------------------------- the tables
def _ordered_groups(slices: Mapping[str, Mapping[str, str]], order: Mapping[str, Sequence[str]] | None) -> list[tuple[str, str]]:
    dims: list[str] = list(order or {})
    for s in slices.values():
        dims += [d for d in s if d not in dims]
    groups = []
    for d in dims:
        present = {s[d] for s in slices.values() if d in s}
        known = [v for v in (order or {}).get(d, ()) if v in present]
        groups += [(d, v) for v in known + sorted(present - set(known))]
    return groups


def members(slices: Mapping[str, Mapping[str, str]], order: Mapping[str, Sequence[str]] | None = None) -> dict[tuple[str, str], list[str]]:
    """``{(dimension, value): question ids}`` in the slices' order (ids in ``slices``' order)."""
    out: dict[tuple[str, str], list[str]] = {}
    for d, v in _ordered_groups(slices, order):
        out[(d, v)] = [qid for qid, s in slices.items() if s.get(d) == v]
    return out


def _subset(scores: Scored, ids: set[str]) -> tuple[list[int], list[str]]:
    idx = [i for i, qid in enumerate(scores.ids) if qid in ids]
    return idx, [scores.paragraphs[i] for i in idx]


def slice_table(scores: Mapping[str, Scored], slices: Mapping[str, Mapping[str, str]], *,
                order: Mapping[str, Sequence[str]] | None = None, n_resamples: int = N_RESAMPLES, seed: int = 0) -> list[dict]:
    """One row per (slice, system): the mean EM and F1 of the system's questions in the slice
    with 95% paragraph-bootstrap intervals (an ``all`` row first). Questions without a slice
    entry are in ``all`` only."""
    groups = [((ALL, ALL), None)] + [(k, set(v)) for k, v in members(slices, order).items()]
    rows = []
    for (dim, value), ids in groups:
        for system, sc in scores.items():
            idx, paras = _subset(sc, ids) if ids is not None else (list(range(len(sc.ids))), list(sc.paragraphs))
            if not idx:
                continue
            row: dict[str, Any] = {"dimension": dim, "value": value, "system": system, "n_questions": len(idx),
                                   "n_paragraphs": len(set(paras))}
            for metric in ("exact_match", "f1"):
                values = [getattr(sc, metric)[i] for i in idx]
                ci = cluster_bootstrap(values, paras, n_resamples=n_resamples, seed=seed)
                row.update({metric: round(ci.mean, 4), f"{metric}_low": round(ci.low, 4), f"{metric}_high": round(ci.high, 4)})
            rows.append(row)
    return rows


def row_slices(per_question: Sequence[Mapping], paragraphs: Mapping[str, str], slices: Mapping[str, Mapping[str, str]], *,
               order: Mapping[str, Sequence[str]] | None = None, n_resamples: int = N_RESAMPLES, seed: int = 0) -> list[dict]:
    """A results row's ``slices`` field: :func:`slice_table`'s rows of one system (per-question
    rows ``{"id", "exact_match", "f1"}`` in percent; ``paragraphs``: question id -> paragraph id)
    without the ``all`` row (the results row itself) and without ``system`` (the row says it):
    ``{"dimension", "value", "n_questions", "n_paragraphs", "exact_match", "exact_match_low", ...}``."""
    scores = Scores([r["id"] for r in per_question], [paragraphs.get(r["id"], f"question {r['id']}") for r in per_question],
                    [float(r["exact_match"]) for r in per_question], [float(r["f1"]) for r in per_question])
    return [{k: v for k, v in r.items() if k != "system"}
            for r in slice_table({"": scores}, slices, order=order, n_resamples=n_resamples, seed=seed) if r["dimension"] != ALL]


def slice_differences(a_name: str, a: Scored, b_name: str, b: Scored, slices: Mapping[str, Mapping[str, str]], *,
                      order: Mapping[str, Sequence[str]] | None = None, n_resamples: int = N_RESAMPLES,
                      seed: int = 0) -> list[dict]:
    """``a - b`` per slice on the questions both answered: the mean difference of F1 and of EM,
    its paired paragraph-bootstrap interval and the sign-flip permutation p-value."""
    b_at = {qid: i for i, qid in enumerate(b.ids)}
    shared = [(i, b_at[qid]) for i, qid in enumerate(a.ids) if qid in b_at]
    if not shared:
        raise XlvizError(f"{a_name} and {b_name} share no question", field="systems")
    if any(a.paragraphs[i] != b.paragraphs[j] for i, j in shared):
        raise XlvizError(f"{a_name} and {b_name} were scored on different paragraphs", field="systems")
    groups = [((ALL, ALL), None)] + [(k, set(v)) for k, v in members(slices, order).items()]
    rows = []
    for (dim, value), ids in groups:
        pick = [(i, j) for i, j in shared if ids is None or a.ids[i] in ids]
        if not pick:
            continue
        paras = [a.paragraphs[i] for i, _ in pick]
        for metric in ("f1", "exact_match"):
            x, y = getattr(a, metric), getattr(b, metric)
            t = paired_test([x[i] for i, _ in pick], [y[j] for _, j in pick], paras, n_resamples=n_resamples, seed=seed)
            rows.append({"dimension": dim, "value": value, "system_a": a_name, "system_b": b_name, "metric": metric,
                         "difference": round(t.difference, 4), "low": round(t.low, 4), "high": round(t.high, 4),
                         "p_value": round(t.p_value, 4), "n_questions": t.n_questions, "n_paragraphs": t.n_paragraphs})
    return rows


def format_slices(rows: Sequence[dict], differences: Sequence[dict] = ()) -> str:
    """The slice table as text: one line per slice, each system's EM and F1 with intervals, and
    the paired F1 difference when given."""
    systems = list(dict.fromkeys(r["system"] for r in rows))
    diff = {(d["dimension"], d["value"]): d for d in differences if d["metric"] == "f1"}
    keys = list(dict.fromkeys((r["dimension"], r["value"]) for r in rows))
    by = {(r["dimension"], r["value"], r["system"]): r for r in rows}
    head = f"{'slice':<44} {'n':>5}" + "".join(f"  {s[:24]:>24} EM / F1 [F1 95%]" for s in systems)
    if diff:
        d0 = next(iter(diff.values()))
        head += f"  F1 {d0['system_a']} - {d0['system_b']} [95%] p"
    lines = [head]
    for dim, value in keys:
        n = max(by[(dim, value, s)]["n_questions"] for s in systems if (dim, value, s) in by)
        line = f"{(dim + ': ' + value) if dim != ALL else ALL:<44} {n:>5}"
        for s in systems:
            r = by.get((dim, value, s))
            line += ("  " + " " * 24 + f" {r['exact_match']:5.1f} / {r['f1']:5.1f} [{r['f1_low']:5.1f}, {r['f1_high']:5.1f}]"
                     if r else "  " + " " * 24 + f" {'-':>32}")
        d = diff.get((dim, value))
        if d:
            line += f"  {d['difference']:+6.1f} [{d['low']:+6.1f}, {d['high']:+6.1f}] {d['p_value']:.3f}"
        lines.append(line)
    return "\n".join(lines)


def test_set_slices(data_file: str | Path, lang: str, *, world_dir: str | Path | None = None,
                    english_file: str | Path | None = None) -> tuple[dict[str, dict[str, str]], dict[str, tuple[str, ...]], str]:
    """The slices of one test file: ``(slices, dimension order, "world" | "squad")``. The
    world's slices when ``world_dir`` holds the generated world whose ``lang`` test set has the
    file's questions (a run's ``world/``); the text's otherwise (question words from
    ``english_file`` when given)."""
    from xlviz.data.squad import read_squad_json

    data = read_squad_json(data_file)
    ids = {q["id"] for a in data["data"] for p in a["paragraphs"] for q in p["qas"]}
    if world_dir is not None and (Path(world_dir) / "world.json").is_file():
        from xlviz.data.world import load_world

        world = load_world(world_dir)
        if lang in world.languages:
            found = world_slices(world, lang)
            if set(found) == ids:
                return found, WORLD_DIMENSIONS, "world"
    english = read_squad_json(english_file) if english_file is not None and Path(english_file).is_file() else None
    return squad_slices(data, english), REAL_DIMENSIONS, "squad"


__all__ = ["WORLD_DIMENSIONS", "REAL_DIMENSIONS", "ALL", "Scores", "world_slices", "squad_slices", "members",
           "slice_table", "row_slices", "slice_differences", "format_slices", "position_bucket", "share_bucket", "overlap_bucket",
           "length_bucket", "question_word", "test_set_slices", "SCORE_COLUMNS", "DIFF_COLUMNS"]
