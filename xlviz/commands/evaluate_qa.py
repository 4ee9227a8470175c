"""``xlviz evaluate-qa DATASET.json PREDICTIONS.json``: the official SQuAD v1.1 evaluation.

Prints ``json.dumps({"exact_match": ..., "f1": ...})`` exactly as ``evaluate-v1.1.py`` does,
with its stderr notes (version mismatch, unanswered questions), so numbers can be checked
against papers and against the official script.
"""

from __future__ import annotations

import argparse
import json
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "evaluate-qa",
        help="SQuAD v1.1 exact match / F1 of a predictions file (official script's numbers)",
        description=__doc__.splitlines()[0],
    )
    p.add_argument("dataset_file", metavar="DATASET.json", help="SQuAD/XQuAD data file")
    p.add_argument("prediction_file", metavar="PREDICTIONS.json", help="JSON object {question id: answer text}")
    p.add_argument("--articles", default=None, metavar="WORD,WORD",
                   help="the answer language's article words, replacing a/an/the (MLQA-style); default: official v1.1")
    p.add_argument("--language", default=None, metavar="LANG",
                   help="score as MLQA's evaluation script scores LANG (Unicode punctuation, the language's articles, "
                        "characters as tokens for zh/th); the XQuAD languages are known")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from xlviz.data.squad import read_squad_json
    from xlviz.evaluation.squad_metric import EXPECTED_VERSION, evaluate_squad, read_predictions_json

    dataset_json = read_squad_json(args.dataset_file)
    version = dataset_json.get("version")
    if version is not None and version != EXPECTED_VERSION:
        print(
            "Evaluation expects v-" + EXPECTED_VERSION + ", but got dataset with v-" + str(version),
            file=sys.stderr,
        )
    predictions = read_predictions_json(args.prediction_file)
    result = evaluate_squad(
        dataset_json["data"], predictions, on_unanswered=lambda msg: print(msg, file=sys.stderr),
        articles=[w.strip() for w in args.articles.split(",") if w.strip()] if args.articles is not None else None,
        language=args.language,
    )
    print(json.dumps(result))
    return 0
