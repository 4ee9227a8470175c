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


def f1_score(prediction: str, ground_truth: str, articles: Sequence[str] | None = None) -> float:
    """Token-bag F1 between normalised strings; 0 when no token is shared (as official)."""
    prediction_tokens = normalize_answer(prediction, articles).split()
    ground_truth_tokens = normalize_answer(ground_truth, articles).split()
    common = Counter(prediction_tokens) & Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    f1 = (2 * precision * recall) / (precision + recall)
    return f1


def exact_match_score(prediction: str, ground_truth: str, articles: Sequence[str] | None = None) -> bool:
    """True when the normalised strings are identical."""
    return normalize_answer(prediction, articles) == normalize_answer(ground_truth, articles)


def scorers(articles: Sequence[str] | None = None) -> tuple[Callable[[str, str], bool], Callable[[str, str], float]]:
    """(exact match, F1) functions of (prediction, ground truth) for one language's articles."""
    return partial(exact_match_score, articles=articles), partial(f1_score, articles=articles)


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
) -> dict[str, float]:
    """Official v1.1 ``evaluate``: {"exact_match", "f1"} in percent over all questions.

    ``dataset`` is the JSON's ``data`` list (a whole SQuAD dict is accepted too). A question
    with no prediction scores 0; the official script prints ``Unanswered question <id> will
    receive score 0.`` for each, which ``on_unanswered`` receives when given. ``articles``
    switches to MLQA-style normalisation with the language's own article words.
    """
    em_fn, f1_fn = scorers(articles)
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


def per_question_scores(dataset: Any, predictions: Mapping[str, str], articles: Sequence[str] | None = None) -> list[dict]:
    """One row per question, for browsing errors: scores in percent (0 or 100 for EM).

    The mean of the rows' ``exact_match`` / ``f1`` equals :func:`evaluate_squad`. A missing
    prediction shows as ``prediction: None`` and scores 0.
    """
    squad_data = _articles(dataset)
    _check_predictions(predictions)
    em_fn, f1_fn = scorers(articles)
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
