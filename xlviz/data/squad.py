"""SQuAD / XQuAD JSON: strict reading, examples, answer-offset checks, parallel language files.

Every later stage (features, training, scoring) indexes into this structure, so a malformed
file must fail here, once, with a message naming the file and the exact field path
(``data[3].paragraphs[0].qas[2].answers[0].answer_start``) instead of a KeyError deep inside
training. Answer offsets that do not point at the answer text are a property of real data sets
(translated XQuAD files), not a crash: :func:`check_answer_starts` lists them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from xlviz.errors import XlvizError
from xlviz.io import read_json


@dataclass
class QAExample:
    """One question with its paragraph; ``answers`` holds ``{"text", "answer_start"}`` dicts."""

    id: str
    title: str
    context: str
    question: str
    answers: list[dict] = field(default_factory=list)


@dataclass(frozen=True)
class AnswerMismatch:
    """An answer whose ``answer_start`` does not point at its text in the context."""

    id: str
    field: str  # e.g. data[3].paragraphs[0].qas[2].answers[0].answer_start
    expected: str  # the answer text
    found: str  # context[answer_start : answer_start + len(text)]
    nearest_start: int | None = None  # closest offset where the text does occur, if anywhere


# ---------------------------------------------------------------- validation

_TYPE_NAMES = {str: "a string", int: "an integer", list: "a list", dict: "an object"}


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    for t, name in _TYPE_NAMES.items():
        if isinstance(value, t):
            return name
    if isinstance(value, float):
        return "a number"
    return type(value).__name__


def _require(obj: dict, key: str, kind: type, where: str, path: str | Path | None, *, optional: bool = False):
    """Return obj[key] checked to be of ``kind``; raise an XlvizError naming the field otherwise."""
    fld = f"{where}.{key}" if where else key
    if key not in obj:
        if optional:
            return None
        raise XlvizError(f"missing field '{key}'", path=path, field=fld)
    value = obj[key]
    ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
    if not ok:
        shown = repr(value)
        if len(shown) > 60:
            shown = shown[:57] + "..."
        raise XlvizError(f"expected {_TYPE_NAMES[kind]}, got {_type_name(value)} ({shown})", path=path, field=fld)
    return value


def _require_object(value: Any, fld: str, path: str | Path | None) -> dict:
    if not isinstance(value, dict):
        raise XlvizError(f"expected an object, got {_type_name(value)}", path=path, field=fld)
    return value


def validate_articles(articles: Any, path: str | Path | None = None) -> None:
    """Check the ``data`` list of a SQuAD file: types of every field used, unique question ids.

    ``title`` may be absent (generated data sets); ``answers`` may be empty (the question then
    has no span to learn; v1.1 scoring refuses it). Question ids must be strings because
    prediction files are JSON objects keyed by id.
    """
    if not isinstance(articles, list):
        raise XlvizError(f"expected a list of articles, got {_type_name(articles)}", path=path, field="data")
    seen: dict[str, str] = {}
    for i, article in enumerate(articles):
        a_where = f"data[{i}]"
        _require_object(article, a_where, path)
        _require(article, "title", str, a_where, path, optional=True)
        paragraphs = _require(article, "paragraphs", list, a_where, path)
        for j, paragraph in enumerate(paragraphs):
            p_where = f"{a_where}.paragraphs[{j}]"
            _require_object(paragraph, p_where, path)
            _require(paragraph, "context", str, p_where, path)
            qas = _require(paragraph, "qas", list, p_where, path)
            for k, qa in enumerate(qas):
                q_where = f"{p_where}.qas[{k}]"
                _require_object(qa, q_where, path)
                qid = _require(qa, "id", str, q_where, path)
                _require(qa, "question", str, q_where, path)
                answers = _require(qa, "answers", list, q_where, path)
                for m, answer in enumerate(answers):
                    an_where = f"{q_where}.answers[{m}]"
                    _require_object(answer, an_where, path)
                    _require(answer, "text", str, an_where, path)
                    _require(answer, "answer_start", int, an_where, path)
                if qid in seen:
                    raise XlvizError(
                        f"duplicate question id {qid!r} (first seen at {seen[qid]})", path=path, field=f"{q_where}.id"
                    )
                seen[qid] = q_where


def validate_squad(obj: Any, path: str | Path | None = None) -> None:
    """Check a whole SQuAD JSON object (``{"version", "data": [...]}``)."""
    if not isinstance(obj, dict):
        raise XlvizError(f"expected a JSON object with a 'data' list at the top, got {_type_name(obj)}", path=path)
    _require(obj, "data", list, "", path)
    validate_articles(obj["data"], path)


def read_squad_json(path: str | Path) -> dict:
    """The raw SQuAD dict of ``path``, validated; every problem names the file and field."""
    obj = read_json(path, what="SQuAD file")
    validate_squad(obj, path)
    return obj


def language_articles(obj: dict, path: str | Path | None = None) -> list[str] | None:
    """The optional top-level ``"articles"`` of a SQuAD dict: the answer language's article
    words for MLQA-style scoring (the generated world writes them into its L2 test sets).
    None when absent: score with the official v1.1 normalisation."""
    value = obj.get("articles") if isinstance(obj, dict) else None
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(w, str) for w in value):
        raise XlvizError("must be a list of words", path=path, field="articles")
    return value


# ---------------------------------------------------------------- examples


def _articles_of(data: Any) -> list:
    if isinstance(data, dict):
        return data.get("data", [])
    return data


def squad_examples(data: Any, path: str | Path | None = None) -> list[QAExample]:
    """Flatten an in-memory SQuAD dict (or its ``data`` list) into examples, in file order."""
    if isinstance(data, dict):
        validate_squad(data, path)
    else:
        validate_articles(data, path)
    examples = []
    for article in _articles_of(data):
        title = article.get("title", "")
        for paragraph in article["paragraphs"]:
            context = paragraph["context"]
            for qa in paragraph["qas"]:
                examples.append(
                    QAExample(
                        id=qa["id"],
                        title=title,
                        context=context,
                        question=qa["question"],
                        answers=[{"text": a["text"], "answer_start": a["answer_start"]} for a in qa["answers"]],
                    )
                )
    return examples


def load_squad(path: str | Path) -> list[QAExample]:
    """Read a SQuAD/XQuAD file into one :class:`QAExample` per question."""
    return squad_examples(read_squad_json(path), path)


def check_answer_starts(data: Any) -> list[AnswerMismatch]:
    """Every answer whose ``answer_start`` does not point at its text (never raises for that).

    ``data`` is a SQuAD dict or its ``data`` list. Offsets outside the context count as
    mismatches with ``found == ""``.
    """
    if isinstance(data, dict):
        validate_squad(data)
    else:
        validate_articles(data)
    mismatches = []
    for i, article in enumerate(_articles_of(data)):
        for j, paragraph in enumerate(article["paragraphs"]):
            context = paragraph["context"]
            for k, qa in enumerate(paragraph["qas"]):
                for m, answer in enumerate(qa["answers"]):
                    text, start = answer["text"], answer["answer_start"]
                    found = context[start : start + len(text)] if 0 <= start <= len(context) else ""
                    if found == text:
                        continue
                    mismatches.append(
                        AnswerMismatch(
                            id=qa["id"],
                            field=f"data[{i}].paragraphs[{j}].qas[{k}].answers[{m}].answer_start",
                            expected=text,
                            found=found,
                            nearest_start=_nearest_occurrence(context, text, start),
                        )
                    )
    return mismatches


def _nearest_occurrence(context: str, text: str, start: int) -> int | None:
    if not text:
        return None
    best = None
    pos = context.find(text)
    while pos != -1:
        if best is None or abs(pos - start) < abs(best - start):
            best = pos
        pos = context.find(text, pos + 1)
    return best


# ---------------------------------------------------------------- parallel files

_LANG = re.compile(r"^[A-Za-z]{2,8}(?:[-_][A-Za-z0-9]{1,8})*$")


class ParallelSquad(dict):
    """``{lang: list[QAExample]}`` plus what the id check found.

    ``missing[lang]`` lists the question ids present in some other language file but not in
    this one (empty lists when all files share their ids); ``files[lang]`` is the file read.
    """

    def __init__(self, examples: dict[str, list[QAExample]], files: dict[str, Path], missing: dict[str, list[str]]):
        super().__init__(examples)
        self.files = files
        self.missing = missing

    @property
    def shared_ids(self) -> list[str]:
        """Question ids present in every language, in the order of the first language."""
        if not self:
            return []
        first = next(iter(self.values()))
        absent = {qid for ids in self.missing.values() for qid in ids}
        return [ex.id for ex in first if ex.id not in absent]

    def restricted_to_shared(self) -> dict[str, list[QAExample]]:
        """Each language's examples limited to the ids every language has (same order per file)."""
        keep = set(self.shared_ids)
        return {lang: [ex for ex in exs if ex.id in keep] for lang, exs in self.items()}


def language_of_file(path: str | Path) -> str | None:
    """``xquad.de.json`` / ``dev.zh-Hans.json`` -> the language part; None when not of that shape."""
    name = Path(path).name
    parts = name.split(".")
    if len(parts) < 3 or parts[-1].lower() != "json":
        return None
    lang = parts[-2]
    return lang if _LANG.match(lang) else None


def load_parallel_squad(
    folder: str | Path,
    languages: Iterable[str] | None = None,
    *,
    strict: bool = False,
) -> ParallelSquad:
    """Load every ``<anything>.<lang>.json`` in ``folder`` as ``{lang: examples}``.

    Files of one data set translated into several languages share question ids; ids missing
    from some languages are reported in ``result.missing`` (and raise when ``strict``), since
    comparing languages on different questions would be misleading.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise XlvizError("folder of per-language SQuAD files not found", path=folder)
    files: dict[str, Path] = {}
    for p in sorted(folder.glob("*.json")):
        lang = language_of_file(p)
        if lang is None:
            continue
        if lang in files:
            raise XlvizError(f"two files for language '{lang}': {files[lang].name} and {p.name}", path=folder)
        files[lang] = p
    if languages is not None:
        wanted = list(languages)
        absent = [lang for lang in wanted if lang not in files]
        if absent:
            raise XlvizError(
                f"no file for language(s) {', '.join(absent)}; found {', '.join(sorted(files)) or 'none'}", path=folder
            )
        files = {lang: files[lang] for lang in wanted}
    if not files:
        raise XlvizError("no <name>.<lang>.json files in this folder", path=folder)

    examples = {lang: load_squad(p) for lang, p in files.items()}
    ids = {lang: {ex.id for ex in exs} for lang, exs in examples.items()}
    all_ids: set[str] = set().union(*ids.values())
    order = [ex.id for exs in examples.values() for ex in exs]
    seen: set[str] = set()
    ordered_all = [i for i in order if i in all_ids and not (i in seen or seen.add(i))]
    missing = {lang: [i for i in ordered_all if i not in ids[lang]] for lang in examples}
    if strict and any(missing.values()):
        details = "; ".join(
            f"{files[lang].name} lacks {len(m)} (e.g. {', '.join(m[:3])})" for lang, m in missing.items() if m
        )
        raise XlvizError(f"question ids differ between languages: {details}", path=folder)
    return ParallelSquad(examples, files, missing)
