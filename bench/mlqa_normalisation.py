"""What MLQA's normalisation changes on real XQuAD: the same predictions scored with the
official SQuAD v1.1 normalisation (ASCII punctuation, English articles, whitespace tokens) and
with MLQA's script (Unicode punctuation, each language's articles, Chinese split into
characters), per language.

The predictions need no model, so the comparison is of the metric alone:

- ``widened``: the first gold answer with the context's neighbouring characters added on both
  sides (``--widen`` characters each side; a reader that finds the right place but misses the
  span's boundaries, the usual error near the floor), cut at the context's ends;
- ``first-k``: the first ``k`` whitespace tokens of the context (the trivial baseline a QA
  stage's verdict measures against; for a Chinese or Thai context of fewer than 4 whitespace
  tokens, its first ``k`` characters).

    python bench/mlqa_normalisation.py --xquad ../shared/data/xquad
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from xlviz.evaluation.squad_metric import evaluate_squad, mlqa_languages
from xlviz.io import read_json


def predictions(data: list, kind: str, widen: int, k: int, language: str) -> dict[str, str]:
    out = {}
    for article in data:
        for para in article["paragraphs"]:
            ctx = para["context"]
            for qa in para["qas"]:
                if kind == "widened":
                    a = qa["answers"][0]
                    start, end = a["answer_start"], a["answer_start"] + len(a["text"])
                    out[qa["id"]] = ctx[max(0, start - widen):min(len(ctx), end + widen)]
                elif language in ("zh", "th") and len(ctx.split()) < 4:
                    out[qa["id"]] = ctx[:k]
                else:
                    out[qa["id"]] = " ".join(ctx.split()[:k])
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--xquad", type=Path, required=True, help="folder of xquad.<lang>.json")
    ap.add_argument("--widen", type=int, default=3, help="characters added on each side of the gold answer")
    ap.add_argument("--k", type=int, default=6, help="tokens of the first-k baseline")
    ap.add_argument("--json", type=Path, help="also write the rows here")
    args = ap.parse_args(argv)
    rows = []
    print("| language | predictions | v1.1 EM | v1.1 F1 | MLQA EM | MLQA F1 |")
    print("|---|---|---|---|---|---|")
    for path in sorted(args.xquad.glob("xquad.*.json")):
        lang = path.name.split(".")[1]
        if lang not in mlqa_languages():
            continue
        data = read_json(path, what="XQuAD file")["data"]
        for kind in ("widened", "first-k"):
            preds = predictions(data, kind, args.widen, args.k, lang)
            v11 = evaluate_squad(data, preds)
            mlqa = evaluate_squad(data, preds, language=lang)
            rows.append({"language": lang, "predictions": kind, "v11": v11, "mlqa": mlqa})
            print(f"| {lang} | {kind} | {v11['exact_match']:.1f} | {v11['f1']:.1f} | {mlqa['exact_match']:.1f} | {mlqa['f1']:.1f} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
