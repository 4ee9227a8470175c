"""XQuAD page logic without Streamlit: parallel questions, per-question scores, the
model × language matrix (Artetxe et al. 2020, Table 3) and disagreement filters.

Scores use the official SQuAD v1.1 metric from :mod:`xlviz.evaluation.squad_metric`
(percent, max over gold answers).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

import pandas as pd

from xlviz.data.squad import QAExample, load_squad
from xlviz.errors import XlvizError

ROW_COLUMNS = ["id", "language", "model", "question", "prediction", "start", "end", "score", "gold", "exact_match", "f1"]


def load_languages(files: Mapping[str, str]) -> dict[str, list[QAExample]]:
    """``{lang: examples}`` for ``{lang: SQuAD file}``."""
    return {lang: load_squad(path) for lang, path in files.items()}


def shared_ids(examples: Mapping[str, list[QAExample]]) -> list[str]:
    """Question ids present in every language, in the first language's order."""
    if not examples:
        return []
    langs = list(examples)
    common = set.intersection(*({ex.id for ex in examples[l]} for l in langs))
    return [ex.id for ex in examples[langs[0]] if ex.id in common]


def index_by_id(examples: Iterable[QAExample]) -> dict[str, QAExample]:
    return {ex.id: ex for ex in examples}


def score(prediction: str | None, answers: list[dict], articles: list[str] | None = None) -> tuple[float, float]:
    """(EM, F1) in percent of one prediction against the gold answers (0, 0 when missing);
    ``articles``: the language's own article words (MLQA-style), else official v1.1."""
    from xlviz.evaluation.squad_metric import metric_max_over_ground_truths, scorers

    golds = [a["text"] for a in answers] or [""]
    if prediction is None:
        return 0.0, 0.0
    em_fn, f1_fn = scorers(articles)
    em = metric_max_over_ground_truths(em_fn, prediction, golds)
    f1 = metric_max_over_ground_truths(f1_fn, prediction, golds)
    return 100.0 * float(em), 100.0 * float(f1)


def prediction_rows(
    examples: Mapping[str, list[QAExample]],
    predictions: Mapping[tuple[str, str], Mapping[str, dict]],
    ids: list[str] | None = None,
    articles: Mapping[str, list[str] | None] | None = None,
) -> pd.DataFrame:
    """One row per (question, language, model) with the prediction and its EM/F1
    (``articles[lang]``: that language's article words for MLQA-style scoring).

    ``predictions[(model_label, lang)]`` is ``predict_qa``'s ``{id: {"text","start","end","score"}}``.
    """
    by_lang = {lang: index_by_id(exs) for lang, exs in examples.items()}
    keep = set(ids) if ids is not None else None
    rows = []
    for (model, lang), preds in predictions.items():
        for qid, ex in by_lang.get(lang, {}).items():
            if keep is not None and qid not in keep:
                continue
            p = preds.get(qid)
            text = p.get("text") if p else None
            em, f1 = score(text, ex.answers, (articles or {}).get(lang))
            rows.append({
                "id": qid, "language": lang, "model": model, "question": ex.question,
                "prediction": text, "start": p.get("start") if p else None, "end": p.get("end") if p else None,
                "score": p.get("score") if p else None,
                "gold": " | ".join(a["text"] for a in ex.answers),
                "exact_match": em, "f1": f1,
            })
    return pd.DataFrame(rows, columns=ROW_COLUMNS)


def score_matrix(rows: pd.DataFrame, metric: str, models: list[str] | None = None, languages: list[str] | None = None) -> pd.DataFrame:
    """Mean ``metric`` as model × language, plus an ``avg`` column (the paper's Table 3 layout)."""
    if rows.empty:
        return pd.DataFrame()
    m = rows.pivot_table(index="model", columns="language", values=metric, aggfunc="mean")
    if languages:
        m = m.reindex(columns=[l for l in languages if l in m.columns])
    if models:
        m = m.reindex(index=[x for x in models if x in m.index])
    m["avg"] = m.mean(axis=1)
    m.columns.name = None
    return m.round(1)


DISAGREEMENT_FILTERS = {
    "all questions": None,
    "models disagree (in some language)": "models",
    "languages disagree (for some model)": "languages",
    "any cell differs": "any",
}


def disagreeing_ids(rows: pd.DataFrame, how: str | None, metric: str = "exact_match") -> list[str]:
    """Question ids whose cells differ in ``metric``.

    ``models``: for some language the models' scores differ; ``languages``: for some model the
    language scores differ; ``any``: not all cells are equal; None: every id.
    """
    if rows.empty:
        return []
    ids = list(dict.fromkeys(rows["id"]))
    if how is None:
        return ids
    if how == "any":
        spread = rows.groupby("id")[metric].nunique()
    elif how == "models":
        spread = rows.groupby(["id", "language"])[metric].nunique().groupby("id").max()
    elif how == "languages":
        spread = rows.groupby(["id", "model"])[metric].nunique().groupby("id").max()
    else:
        raise XlvizError(f"unknown disagreement filter {how!r}; choose from models, languages, any")
    bad = set(spread[spread > 1].index)
    return [i for i in ids if i in bad]


def search_ids(examples: Mapping[str, list[QAExample]], ids: list[str], query: str) -> list[str]:
    """Ids whose id, question or context (in any language) contains ``query`` (case-insensitive)."""
    q = query.strip().lower()
    if not q:
        return ids
    by_lang = [index_by_id(exs) for exs in examples.values()]
    out = []
    for qid in ids:
        if q in qid.lower():
            out.append(qid)
            continue
        for idx in by_lang:
            ex = idx.get(qid)
            if ex and (q in ex.question.lower() or q in ex.context.lower()):
                out.append(qid)
                break
    return out


def gold_span(ex: QAExample) -> tuple[int, int] | None:
    """Character span of the first gold answer, if its offset points at its text."""
    for a in ex.answers:
        s = a["answer_start"]
        if ex.context[s : s + len(a["text"])] == a["text"] and a["text"]:
            return s, s + len(a["text"])
        pos = ex.context.find(a["text"]) if a["text"] else -1
        if pos >= 0:
            return pos, pos + len(a["text"])
    return None


def prediction_span(ex: QAExample, pred: Mapping | None) -> tuple[int, int] | None:
    """Character span of a prediction; falls back to finding its text in the context."""
    if not pred:
        return None
    s, e, text = pred.get("start"), pred.get("end"), pred.get("text") or ""
    if isinstance(s, int) and isinstance(e, int) and 0 <= s < e <= len(ex.context):
        return s, e
    if text:
        pos = ex.context.find(text)
        if pos >= 0:
            return pos, pos + len(text)
    return None


# --- decoding as the run did ------------------------------------------------------------------

@dataclass(frozen=True)
class Decoding:
    """How QA predictions are decoded: window length, stride and longest answer (tokens).

    The defaults are SQuAD's (Devlin et al. 2019); a run's own models are decoded with the
    run's settings, or the page's scores contradict the run's results.json.
    """

    max_length: int = 384
    doc_stride: int = 128
    max_answer_length: int = 30
    source: str = "SQuAD defaults"


def owning_run(model_path: str | Path) -> Path | None:
    """The run folder a model folder lies in (``<run>/export/<system>-<lang>``, ``<run>/s3_…``)."""
    p = Path(model_path).expanduser()
    for parent in list(p.parents)[:3]:
        if (parent / "config.json").is_file() and (parent / "status.json").is_file():
            return parent
    return None


def run_decoding(model_path: str | Path, max_positions: int | None = None) -> Decoding:
    """The run's ``qa_max_length`` / ``doc_stride`` / ``max_answer_length`` for one of its models,
    else SQuAD's defaults capped by the model's positions."""
    run = owning_run(model_path)
    cfg: dict = {}
    if run is not None:
        try:
            cfg = json.loads((run / "config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            cfg = {}
    if isinstance(cfg, dict) and isinstance(cfg.get("qa_max_length"), int):
        length = int(cfg["qa_max_length"])
        stride = int(cfg.get("doc_stride") or max(16, length // 3))
        answer = int(cfg.get("max_answer_length") or 30)
        return Decoding(length, stride, answer, f"run {run.name}'s settings")
    length = min(384, max_positions or 512)
    return Decoding(length, max(16, min(128, length // 3)), 30, "SQuAD defaults")


def saved_predictions_file(model_path: str | Path, data_file: str | Path) -> Path | None:
    """``<run>/predictions/<system>-<lang>.json`` when the model is the run's export for
    ``<lang>`` and the data is that run's own ``world/qa/test.<lang>.json``: the run's answers."""
    model, data = Path(model_path).expanduser().resolve(), Path(data_file).expanduser().resolve()
    if model.parent.name != "export" or "-" not in model.name:
        return None
    run = model.parent.parent
    lang = model.name.rsplit("-", 1)[1]
    if data != (run / "world" / "qa" / f"test.{lang}.json").resolve():
        return None
    saved = run / "predictions" / f"{model.name}.json"
    return saved if saved.is_file() else None


def read_saved_predictions(path: str | Path, ids: Iterable[str]) -> dict[str, dict]:
    """The run's ``{id: text}`` predictions in ``predict_qa``'s shape (spans found by text)."""
    from xlviz.io import DuplicateKey, loads_strict

    try:
        raw = loads_strict(Path(path).read_text(encoding="utf-8"))
    except DuplicateKey as e:
        raise XlvizError("the id appears twice (which answer is meant?)", path=path, field=e.key) from None
    except (OSError, ValueError) as e:
        raise XlvizError(f"cannot read saved predictions: {e}", path=path) from None
    if not isinstance(raw, dict):
        raise XlvizError("saved predictions must be a JSON object {id: answer text}", path=path)
    return {qid: {"text": str(raw[qid]), "start": None, "end": None, "score": None} for qid in ids if qid in raw}


def model_digest(folder: str | Path) -> str | None:
    """A digest of a model folder's weights and tokenizer files: two exports holding the same
    model (a run's English systems share one fine-tuned model) get the same digest."""
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        return None
    h = hashlib.sha1()
    found = False
    for name in ("model.safetensors", "tokenizer.json", "vocab.txt", "config.json"):
        f = folder / name
        if f.is_file():
            found = True
            h.update(name.encode())
            with open(f, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
    return h.hexdigest() if found else None


# --- uncertainty and error analysis --------------------------------------------------------------

def cell_intervals(rows: pd.DataFrame, n_resamples: int = 1000) -> pd.DataFrame:
    """Per model × language: EM and F1 with 95% bootstrap intervals over the questions."""
    from xlviz.evaluation.bootstrap import bootstrap_ci

    out = []
    for (model, lang), g in rows.groupby(["model", "language"], sort=False):
        em_lo, em_hi = bootstrap_ci(g["exact_match"].to_numpy(), n_resamples=n_resamples)
        f1_lo, f1_hi = bootstrap_ci(g["f1"].to_numpy(), n_resamples=n_resamples)
        out.append({"model": model, "language": lang, "n": len(g), "EM": g["exact_match"].mean(), "EM low": em_lo,
                    "EM high": em_hi, "F1": g["f1"].mean(), "F1 low": f1_lo, "F1 high": f1_hi})
    return pd.DataFrame(out, columns=["model", "language", "n", "EM", "EM low", "EM high", "F1", "F1 low", "F1 high"]).round(1)


def paired_tests(rows: pd.DataFrame, n_resamples: int = 1000) -> pd.DataFrame:
    """Every pair of models on the same questions of one language: F1 difference with its
    paired-bootstrap interval and p-value, and McNemar's exact test on exact match."""
    from itertools import combinations

    from xlviz.evaluation.bootstrap import mcnemar_exact, paired_bootstrap

    out = []
    for lang, g in rows.groupby("language", sort=False):
        wide_f1 = g.pivot_table(index="id", columns="model", values="f1", aggfunc="first")
        wide_em = g.pivot_table(index="id", columns="model", values="exact_match", aggfunc="first")
        for a, b in combinations(list(dict.fromkeys(g["model"])), 2):
            both = wide_f1[[a, b]].dropna()
            if both.empty:
                continue
            r = paired_bootstrap(both[a].to_numpy(), both[b].to_numpy(), n_resamples=n_resamples)
            em = wide_em.loc[both.index, [a, b]] > 0
            out.append({"language": lang, "A": a, "B": b, "n": r.n, "F1 A − B": r.difference, "low": r.low, "high": r.high,
                        "p (paired bootstrap)": r.p_value,
                        "p (McNemar, EM)": mcnemar_exact(int((em[a] & ~em[b]).sum()), int((~em[a] & em[b]).sum()))})
    cols = ["language", "A", "B", "n", "F1 A − B", "low", "high", "p (paired bootstrap)", "p (McNemar, EM)"]
    return pd.DataFrame(out, columns=cols).round({"F1 A − B": 1, "low": 1, "high": 1, "p (paired bootstrap)": 3, "p (McNemar, EM)": 3})


def question_table(rows: pd.DataFrame, examples: Mapping[str, list[QAExample]]) -> pd.DataFrame:
    """One row per question, F1 per model · language: sort a column to find where a system fails."""
    if rows.empty:
        return pd.DataFrame()
    wide = rows.pivot_table(index="id", columns=["model", "language"], values="f1", aggfunc="first")
    wide.columns = [f"{m} · {l}" for m, l in wide.columns]
    first = index_by_id(next(iter(examples.values()))) if examples else {}
    wide.insert(0, "question", [first[i].question if i in first else "" for i in wide.index])
    order = list(dict.fromkeys(rows["id"]))
    return wide.reindex(order).reset_index()
