"""SQuAD v1.1 exact match and F1, computed exactly like the official evaluation script.

Results in papers (and in our results rows) are the numbers printed by ``evaluate-v1.1.py``;
any deviation in normalisation or averaging makes them incomparable. So this module follows
the official script step by step: the same normalisation (lower case, drop
``string.punctuation``, drop the words a/an/the, collapse whitespace), the same token-bag F1,
the maximum over gold answers, a missing prediction counting 0, and 100 x the mean over every
question of the data set, summed in file order so even the floating-point result is identical.

One option departs from v1.1 on request: ``articles``, the article words of the answer's
language, replace English's a/an/the, as MLQA's evaluation does per language (Lewis et al.
2020). English F1 forgives a missing "the"; an L2 F1 under English normalisation does not
forgive its own article, so the L2/L1 ratio would compare unlike scores. Without ``articles``
every function is the official script.
"""

from __future__ import annotations

import re
import string
import sys
import unicodedata
from collections import Counter
from functools import lru_cache, partial
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from xlviz.errors import XlvizError
from xlviz.io import read_json

EXPECTED_VERSION = "1.1"

_PUNCTUATION = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def _article_pattern(articles: Sequence[str] | None) -> re.Pattern:
    if articles is None:
        return _ARTICLES
    return _compiled_articles(tuple(articles))


@lru_cache(maxsize=64)
def _compiled_articles(articles: tuple[str, ...]) -> re.Pattern:
    words = sorted({a.lower() for a in articles if a}, key=len, reverse=True)
    return re.compile(r"\b(" + "|".join(map(re.escape, words)) + r")\b") if words else re.compile(r"(?!x)x")


def normalize_answer(s: str, articles: Sequence[str] | None = None) -> str:
    """Lower text and remove punctuation, articles and extra whitespace (official order).
    ``articles``: the language's article words instead of a/an/the (MLQA-style)."""
    pattern = _article_pattern(articles)

    def remove_articles(text: str) -> str:
        return pattern.sub(" ", text)

    def white_space_fix(text: str) -> str:
        return " ".join(text.split())

    def remove_punc(text: str) -> str:
        return "".join(ch for ch in text if ch not in _PUNCTUATION)

    def lower(text: str) -> str:
        return text.lower()

    return white_space_fix(remove_articles(remove_punc(lower(s))))


# --- MLQA's evaluation (Lewis et al. 2020, facebookresearch/MLQA mlqa_evaluation_v1.py) -----------
# Real XQuAD languages are scored as MLQA's script scores its languages: every Unicode
# punctuation character is dropped (not only ASCII's), each language strips its own articles,
# and Chinese is segmented into characters (CJK characters and punctuation become tokens), so
# F1 gives partial credit per character. The script knows en, es, hi, vi, de, ar, zh; the other
# XQuAD languages follow the same steps with no article list (el, ru, tr, ro: whitespace tokens)
# and Thai, written without spaces, is segmented like Chinese (over the Thai block). Those
# additions are xlviz's, marked as such in ``MLQA_EXTENSIONS``.
@lru_cache(maxsize=1)
def _unicode_punct() -> frozenset[str]:
    """MLQA's PUNCT: every Unicode character of a punctuation category, and ASCII's (built on
    first use: it walks every code point)."""
    return frozenset(chr(i) for i in range(sys.maxunicode) if unicodedata.category(chr(i)).startswith("P")) | _PUNCTUATION
MLQA_ARTICLES = {
    "en": r"\b(a|an|the)\b",
    "es": r"\b(un|una|unos|unas|el|la|los|las)\b",
    "hi": None,  # Hindi has no formal articles
    "vi": r"\b(của|là|cái|chiếc|những)\b",
    "de": r"\b(ein|eine|einen|einem|eines|einer|der|die|das|den|dem|des)\b",
    "ar": "\\sال^|ال",
    "zh": None,
}
MLQA_EXTENSIONS = {"el": None, "ru": None, "tr": None, "ro": None, "th": None}
_SEGMENTED = {"zh": re.compile(r"[\u4e00-\u9fa5]"), "th": re.compile(r"[\u0e00-\u0e7f]")}


def mlqa_languages() -> list[str]:
    """Languages :func:`mlqa_normalize` scores: MLQA's seven and the other XQuAD languages."""
    return sorted({**MLQA_ARTICLES, **MLQA_EXTENSIONS})


def _mixed_segmentation(text: str, script: re.Pattern) -> list[str]:
    """MLQA's ``mixed_segmentation``: characters of the script and punctuation are tokens of
    their own, runs of other characters are split at whitespace."""
    out, run = [], ""
    punct = _unicode_punct()
    for ch in text:
        if script.search(ch) or ch in punct:
            if run:
                out.extend(run.split())
                run = ""
            out.append(ch)
        else:
            run += ch
    if run:
        out.extend(run.split())
    return out


def mlqa_normalize(s: str, language: str) -> str:
    """MLQA's ``normalize_answer(s, lang)``: lower, drop Unicode punctuation, drop the
    language's articles, then whitespace- or character-segment and join with spaces."""
    if language not in MLQA_ARTICLES and language not in MLQA_EXTENSIONS:
        raise XlvizError(f"no MLQA normalisation for language {language!r}; known: {', '.join(mlqa_languages())}", field="language")
    punct = _unicode_punct()
    text = "".join(ch for ch in s.lower() if ch not in punct)
    pattern = MLQA_ARTICLES.get(language)
    if pattern:
        text = re.sub(pattern, " ", text)
    tokens = _mixed_segmentation(text, _SEGMENTED[language]) if language in _SEGMENTED else text.split()
    return " ".join(t for t in tokens if t.strip() != "")


def _normalizer(articles: Sequence[str] | None, language: str | None) -> Callable[[str], str]:
    if language is not None:
        return partial(mlqa_normalize, language=language)
    return partial(normalize_answer, articles=articles)


def f1_score(prediction: str, ground_truth: str, articles: Sequence[str] | None = None, language: str | None = None) -> float:
    """Token-bag F1 between normalised strings; 0 when no token is shared (as official).
    ``language``: MLQA's normalisation for that language (``articles`` is then ignored)."""
    norm = _normalizer(articles, language)
    prediction_tokens = norm(prediction).split()
    ground_truth_tokens = norm(ground_truth).split()
    common = Counter(prediction_tokens) & Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    f1 = (2 * precision * recall) / (precision + recall)
    return f1


def exact_match_score(prediction: str, ground_truth: str, articles: Sequence[str] | None = None, language: str | None = None) -> bool:
    """True when the normalised strings are identical."""
    norm = _normalizer(articles, language)
    return norm(prediction) == norm(ground_truth)


def scorers(articles: Sequence[str] | None = None, language: str | None = None) -> tuple[Callable[[str, str], bool], Callable[[str, str], float]]:
    """(exact match, F1) functions of (prediction, ground truth): official v1.1, v1.1 with one
    language's ``articles`` (the generated world), or MLQA's script for a real ``language``."""
    return partial(exact_match_score, articles=articles, language=language), partial(f1_score, articles=articles, language=language)


def metric_max_over_ground_truths(metric_fn: Callable[[str, str], Any], prediction: str, ground_truths: Sequence[str]):
    """Best score of ``prediction`` against any of the gold answers."""
    scores_for_ground_truths = []
    for ground_truth in ground_truths:
        score = metric_fn(prediction, ground_truth)
        scores_for_ground_truths.append(score)
    return max(scores_for_ground_truths)


def _articles(dataset: Any) -> list:
    """Accept the JSON's ``data`` list (official) or the whole SQuAD dict, and validate it."""
    from xlviz.data.squad import validate_articles

    if isinstance(dataset, Mapping) and "data" in dataset:
        dataset = dataset["data"]
    validate_articles(dataset)
    return dataset


def _check_predictions(predictions: Any, path: str | Path | None = None) -> None:
    if not isinstance(predictions, Mapping):
        raise XlvizError(
            f"predictions must be an object mapping question id to answer text, got {type(predictions).__name__}",
            path=path,
        )
    for qid, text in predictions.items():
        if not isinstance(text, str):
            raise XlvizError(
                f"prediction for question {qid!r} must be a string, got {type(text).__name__}",
                path=path,
                field=f"predictions[{qid!r}]",
            )


def _iter_questions(articles: list):
    for i, article in enumerate(articles):
        for j, paragraph in enumerate(article["paragraphs"]):
            for k, qa in enumerate(paragraph["qas"]):
                field = f"data[{i}].paragraphs[{j}].qas[{k}]"
                ground_truths = [a["text"] for a in qa["answers"]]
                if not ground_truths:
                    raise XlvizError(
                        f"question {qa['id']!r} has no gold answers; SQuAD v1.1 scoring needs at least one",
                        field=f"{field}.answers",
                    )
                yield qa, ground_truths


def evaluate_squad(
    dataset: Any,
    predictions: Mapping[str, str],
    *,
    on_unanswered: Callable[[str], None] | None = None,
    articles: Sequence[str] | None = None,
    language: str | None = None,
) -> dict[str, float]:
    """Official v1.1 ``evaluate``: {"exact_match", "f1"} in percent over all questions.

    ``dataset`` is the JSON's ``data`` list (a whole SQuAD dict is accepted too). A question
    with no prediction scores 0; the official script prints ``Unanswered question <id> will
    receive score 0.`` for each, which ``on_unanswered`` receives when given. ``articles``
    switches to MLQA-style normalisation with the language's own article words; ``language``
    to MLQA's own script for that (real) language.
    """
    em_fn, f1_fn = scorers(articles, language)
    squad_data = _articles(dataset)
    _check_predictions(predictions)
    f1 = exact_match = total = 0
    for qa, ground_truths in _iter_questions(squad_data):
        total += 1
        if qa["id"] not in predictions:
            if on_unanswered is not None:
                on_unanswered("Unanswered question " + qa["id"] + " will receive score 0.")
            continue
        prediction = predictions[qa["id"]]
        exact_match += metric_max_over_ground_truths(em_fn, prediction, ground_truths)
        f1 += metric_max_over_ground_truths(f1_fn, prediction, ground_truths)
    if total == 0:
        raise XlvizError("the data set has no questions to score", field="data")
    exact_match = 100.0 * exact_match / total
    f1 = 100.0 * f1 / total
    return {"exact_match": exact_match, "f1": f1}


def per_question_scores(dataset: Any, predictions: Mapping[str, str], articles: Sequence[str] | None = None,
                        language: str | None = None) -> list[dict]:
    """One row per question, for browsing errors: scores in percent (0 or 100 for EM).

    The mean of the rows' ``exact_match`` / ``f1`` equals :func:`evaluate_squad`. A missing
    prediction shows as ``prediction: None`` and scores 0.
    """
    squad_data = _articles(dataset)
    _check_predictions(predictions)
    em_fn, f1_fn = scorers(articles, language)
    rows = []
    for qa, ground_truths in _iter_questions(squad_data):
        prediction = predictions.get(qa["id"])
        if prediction is None:
            em, f1 = 0.0, 0.0
        else:
            em = 100.0 * metric_max_over_ground_truths(em_fn, prediction, ground_truths)
            f1 = 100.0 * metric_max_over_ground_truths(f1_fn, prediction, ground_truths)
        rows.append(
            {
                "id": qa["id"],
                "question": qa["question"],
                "prediction": prediction,
                "gold": ground_truths,
                "exact_match": em,
                "f1": f1,
            }
        )
    return rows


def read_predictions_json(path: str | Path) -> dict[str, str]:
    """Read an official-format predictions file ({id: text}); errors name the file."""
    predictions = read_json(path, what="predictions file")
    _check_predictions(predictions, path=path)
    return dict(predictions)
