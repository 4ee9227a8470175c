"""Words versus order: each system's exported QA models scored on counterfactual renderings of
the run's test questions (:mod:`xlviz.data.counterfactual`), without retraining.

For an L2 ``x`` and each system: English (its English export on English), ``x``'s words in
English's order and ``x`` itself (its ``x`` export), English words in ``x``'s order (its English
export). On the same questions:

- words not aligned = F1(English) − F1(x's words, English order): only the words differ;
- order not read = F1(English) − F1(English words, x's order): only the order differs;
- total = F1(English) − F1(x);
- ``<feature> alone`` = F1(English) − F1(English with only that feature set to x's value),
  one per typological feature in which x's grammar differs from English's
  (:func:`xlviz.data.counterfactual.renderings_of`): which part of the order costs;

each with a paired paragraph-bootstrap interval and permutation p-value (one seed: the run's).
A rendering whose words the model's tokenizer reads as [UNK] too often is flagged, not hidden.
The table is stored in the run (:mod:`xlviz.analysis.stored`, ``analyses/renderings-<key>``).
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

from xlviz.errors import XlvizError

FORMAT = "xlviz-renderings/2"  # 2: the one-feature renderings
NAME = "renderings"
UNK_LIMIT = 0.05
SCORE_COLUMNS = ("system", "language", "rendering", "label", "words", "order", "model", "exact_match", "exact_match_low",
                 "exact_match_high", "f1", "f1_low", "f1_high", "unk_rate", "n_questions", "n_paragraphs")
SPLIT_COLUMNS = ("system", "language", "cost", "metric", "difference", "low", "high", "p_value", "n_questions", "n_paragraphs")
def costs(names) -> dict[str, str]:
    """``{cost: rendering}`` for the renderings ``names`` (in :func:`renderings_of`'s order):
    the two crossings, one ``"<feature> alone"`` per one-feature rendering, then the total."""
    fixed = ("en", "words", "order", "l2")
    return {"words not aligned": "words", "order not read": "order",
            **{f"{n} alone": n for n in names if n not in fixed}, "total": "l2"}


def unk_rate(tok, data: dict) -> float:
    """Share of the contexts' and questions' tokens the tokenizer reads as unknown."""
    unk = getattr(tok, "unk_token_id", None)
    texts = [p["context"] for a in data["data"] for p in a["paragraphs"]] + [
        q["question"] for a in data["data"] for p in a["paragraphs"] for q in p["qas"]]
    ids = [i for t in texts for i in tok(t, add_special_tokens=False)["input_ids"]]
    return sum(i == unk for i in ids) / len(ids) if ids and unk is not None else 0.0


def predict_rendering(model, tok, data: dict, decoding: dict) -> dict[str, dict]:
    """``{id: {"text", "start", "end"}}``: ``model``'s answers on a rendered test set, decoded as
    the run decodes (``decoding``: ``max_length``, ``doc_stride``, ``max_answer_length``)."""
    from xlviz.data.squad import squad_examples
    from xlviz.evaluation.qa_predict import predict_qa

    return predict_qa(model, tok, squad_examples(data), batch_size=64, **decoding)


def score_predictions(data: dict, texts: dict[str, str]) -> list[dict]:
    """Per-question EM/F1 (percent) of answers ``{id: text}`` on a rendered test set, its
    articles stripped: the table's scoring, also of one question (the XQuAD page's)."""
    from xlviz.evaluation.squad_metric import per_question_scores

    return per_question_scores(data, texts, articles=data.get("articles"))


def score_rendering(model, tok, data: dict, decoding: dict) -> list[dict]:
    """Per-question EM/F1 (percent) of ``model`` on a rendered test set, its articles stripped."""
    from xlviz.evaluation.qa_predict import predictions_to_text

    return score_predictions(data, predictions_to_text(predict_rendering(model, tok, data, decoding)))


def _limit(data: dict, paragraphs: int | None) -> dict:
    if paragraphs is None:
        return data
    out, left = [], paragraphs
    for a in data["data"]:
        if left <= 0:
            break
        out.append({**a, "paragraphs": a["paragraphs"][:left]})
        left -= len(out[-1]["paragraphs"])
    return {**data, "data": out}


def request(run_dir: str | os.PathLike, lang: str, systems: list[str] | None, paragraphs: int | None) -> tuple[dict, dict]:
    from xlviz.analysis.patching_report import _exports
    from xlviz.analysis.stored import file_digest
    from xlviz.io import folder_digest
    from xlviz.runs import world_path

    run = Path(run_dir)
    world = world_path(run, "world")
    if not world.is_file():
        raise XlvizError("counterfactual renderings need the run's generated world; this run has none", path=world)
    chosen = _exports(run, lang, systems)
    if not chosen:
        raise XlvizError(f"no system of the run has both an English and a {lang} QA export", path=run, field="language")
    inputs = {"world": file_digest(world, run), "config": file_digest(run / "config.json", run)}
    for s, (a, b) in chosen.items():
        inputs[f"{s}:en"], inputs[f"{s}:{lang}"] = folder_digest(a), folder_digest(b)
    return {"format": FORMAT, "language": lang, "systems": list(chosen), "paragraphs": paragraphs, "inputs": inputs}, chosen


def compute(run_dir: str | os.PathLike, lang: str, systems: list[str] | None = None, paragraphs: int | None = None,
            log=None) -> dict:
    """The table (``{"format", "request", "scores", "split", "unchanged"}``; ``unchanged``: the
    one-feature renderings that render English's test set, not scored), computed and not stored."""
    from xlviz.data.counterfactual import render_qa, renderings_of
    from xlviz.data.world import load_world
    from xlviz.evaluation.uncertainty import cluster_bootstrap, paired_test, paragraph_ids
    from xlviz.models.loading import load_model
    from xlviz.runs import Run, world_folder

    req, chosen = request(run_dir, lang, systems, paragraphs)
    world = load_world(world_folder(run_dir))
    if lang not in world.l2s:
        raise XlvizError(f"the run's world has no L2 {lang!r}; it has {world.l2s}", field="language")
    cfg = Run(Path(run_dir)).config()
    decoding = {"max_length": int(cfg.get("qa_max_length", 384)), "doc_stride": int(cfg.get("doc_stride", 128)),
                "max_answer_length": int(cfg.get("max_answer_length", 30))}
    kinds = renderings_of(world, lang)
    sets = {name: _limit(render_qa(world, r.language), paragraphs) for name, r in kinds.items()}
    # a feature the test facts never show (an NP modifier's order) renders English's test set:
    # named as unchanged, not scored (its loss would be 0 by construction)
    unchanged = [name for name, r in kinds.items() if r.feature is not None and sets[name] == sets["en"]]
    kinds = {name: r for name, r in kinds.items() if name not in unchanged}
    para = paragraph_ids(sets["en"])
    scores, split = [], []
    for system, folders in chosen.items():
        models = {world.l1: folders[0], lang: folders[1]}
        loaded = {k: load_model(v, task="qa") for k, v in models.items()}
        per: dict[str, list[dict]] = {}
        for name, kind in kinds.items():
            model, tok = loaded[kind.reader]
            per[name] = score_rendering(model.eval(), tok, sets[name], decoding)
            clusters = [para[r["id"]] for r in per[name]]
            row = {"system": system, "language": lang, "rendering": name, "label": kind.label, "words": kind.words,
                   "order": kind.order, "model": kind.reader,
                   "unk_rate": round(unk_rate(tok, sets[name]), 4), "n_questions": len(clusters), "n_paragraphs": len(set(clusters))}
            for metric in ("exact_match", "f1"):
                ci = cluster_bootstrap([r[metric] for r in per[name]], clusters)
                row.update({metric: round(ci.mean, 4), f"{metric}_low": round(ci.low, 4), f"{metric}_high": round(ci.high, 4)})
            scores.append(row)
        for cost, name in costs(kinds).items():
            for metric in ("f1", "exact_match"):
                a, b = per["en"], per[name]
                if [r["id"] for r in a] != [r["id"] for r in b]:
                    raise XlvizError(f"renderings of {lang} hold different questions", field="renderings")
                t = paired_test([r[metric] for r in a], [r[metric] for r in b], [para[r["id"]] for r in a])
                split.append({"system": system, "language": lang, "cost": cost, "metric": metric,
                              "difference": round(t.difference, 4), "low": round(t.low, 4), "high": round(t.high, 4),
                              "p_value": round(t.p_value, 4), "n_questions": t.n_questions, "n_paragraphs": t.n_paragraphs})
        if log:
            log(f"  {system}: {len(per['en'])} questions in {len(kinds)} renderings")
    return {"format": FORMAT, "request": req, "scores": scores, "split": split, "unchanged": unchanged}


def csv_text(table: dict) -> str:
    buf = io.StringIO()
    cols = ["table", *dict.fromkeys(SCORE_COLUMNS + SPLIT_COLUMNS)]
    w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
    w.writeheader()
    w.writerows([{"table": "scores", **r} for r in table["scores"]] + [{"table": "split", **r} for r in table["split"]])
    return buf.getvalue()


def format_table(table: dict) -> str:
    out = [f"{'system':<22} {'rendering':<40} {'EM':>6} {'F1':>6} {'F1 95%':>15} {'unk':>6}"]
    for r in table["scores"]:
        flag = "  (words not in vocabulary)" if r["unk_rate"] > UNK_LIMIT else ""
        out.append(f"{r['system']:<22} {r['label']:<40} {r['exact_match']:6.1f} {r['f1']:6.1f} "
                   f"[{r['f1_low']:5.1f}, {r['f1_high']:5.1f}] {100 * r['unk_rate']:5.1f}%{flag}")
    out += ["", "F1 lost against English on the same questions (paired paragraph bootstrap, permutation p):",
            f"{'system':<22} {'cost':<24} {'F1 diff':>8} {'95%':>17} {'p':>7}"]
    for r in table["split"]:
        if r["metric"] == "f1":
            out.append(f"{r['system']:<22} {r['cost']:<24} {r['difference']:+8.1f} [{r['low']:+6.1f}, {r['high']:+6.1f}] {r['p_value']:7.4f}")
    if table.get("unchanged"):
        out.append(f"not scored, English's test set unchanged by: {', '.join(table['unchanged'])} (no such phrase in it)")
    return "\n".join(out)


def find(run_dir, req):
    from xlviz.analysis.stored import find as find_stored

    return find_stored(run_dir, NAME, FORMAT, req)


def write(run_dir, table: dict, record) -> Path:
    from xlviz.analysis.stored import write as write_stored

    return write_stored(run_dir, NAME, table, csv_text(table), table["request"]["language"], record)


def run_renderings(run_dir, lang: str, systems: list[str] | None = None, paragraphs: int | None = None) -> dict:
    """The stored table when it matches, computed (not stored) otherwise."""
    req, _ = request(run_dir, lang, systems, paragraphs)
    got = find(run_dir, req)
    return got[0] if got else compute(run_dir, lang, systems, paragraphs)


__all__ = ["costs", "unk_rate", "predict_rendering", "score_predictions", "score_rendering", "request", "compute", "find",
           "write", "run_renderings", "format_table", "csv_text", "FORMAT"]
