"""XQuAD page logic without Streamlit: parallel questions, per-question scores, the
model × language matrix (Artetxe et al. 2020, Table 3) and disagreement filters.

Scores use the official SQuAD v1.1 metric from :mod:`xlviz.evaluation.squad_metric`
(percent, max over gold answers).
"""

from __future__ import annotations

# the resamples of results.json's intervals, so the page and the run's rows give the same interval
from xlviz.evaluation.uncertainty import N_RESAMPLES

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Mapping

import pandas as pd

from xlviz.data.squad import QAExample, load_squad
from xlviz.errors import XlvizError

ROW_COLUMNS = ["id", "language", "model", "question", "prediction", "start", "end", "score", "gold", "exact_match", "f1",
               "paragraph"]


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


def score(prediction: str | None, answers: list[dict], articles: list[str] | None = None,
          language: str | None = None) -> tuple[float, float]:
    """(EM, F1) in percent of one prediction against the gold answers (0, 0 when missing);
    ``articles``: the language's own article words (MLQA-style), ``language``: MLQA's script
    for a real language, else official v1.1."""
    if prediction is None:
        return 0.0, 0.0
    golds = tuple(a["text"] for a in answers) or ("",)
    return _score(prediction, golds, None if articles is None else tuple(articles), language)


@lru_cache(maxsize=1 << 16)
def _score(prediction: str, golds: tuple[str, ...], articles: tuple[str, ...] | None, language: str | None) -> tuple[float, float]:
    """:func:`score` of hashable arguments, remembered: a page scores every (question, model,
    language) on each render (2,800 answers took 1.5 s), and a score depends on these only."""
    from xlviz.evaluation.squad_metric import metric_max_over_ground_truths, scorers

    em_fn, f1_fn = scorers(None if articles is None else list(articles), language)
    em = metric_max_over_ground_truths(em_fn, prediction, list(golds))
    f1 = metric_max_over_ground_truths(f1_fn, prediction, list(golds))
    return 100.0 * float(em), 100.0 * float(f1)


def prediction_rows(
    examples: Mapping[str, list[QAExample]],
    predictions: Mapping[tuple[str, str], Mapping[str, dict]],
    ids: list[str] | None = None,
    articles: Mapping[str, list[str] | None] | None = None,
    mlqa: Mapping[str, str | None] | None = None,
) -> pd.DataFrame:
    """One row per (question, language, model) with the prediction and its EM/F1
    (``articles[lang]``: that language's article words for MLQA-style scoring; ``mlqa[lang]``:
    score that language with MLQA's script, for real data).

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
            em, f1 = score(text, ex.answers, (articles or {}).get(lang), (mlqa or {}).get(lang))
            rows.append({
                "id": qid, "language": lang, "model": model, "question": ex.question,
                "prediction": text, "start": p.get("start") if p else None, "end": p.get("end") if p else None,
                "score": p.get("score") if p else None,
                "gold": " | ".join(a["text"] for a in ex.answers),
                "exact_match": em, "f1": f1,
                # questions sharing a context are one cluster of the paragraph bootstrap
                "paragraph": f"{ex.title}\n{ex.context}",
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
            from xlviz.runs import Run

            cfg = Run(run).config()  # confined, regular, bounded (xlviz.confined)
        except XlvizError:
            cfg = {}
    if isinstance(cfg, dict) and isinstance(cfg.get("qa_max_length"), int):
        length = int(cfg["qa_max_length"])
        stride = int(cfg.get("doc_stride") or max(16, length // 3))
        answer = int(cfg.get("max_answer_length") or 30)
        return Decoding(length, stride, answer, f"run {run.name}'s settings")
    length = min(384, max_positions or 512)
    return Decoding(length, max(16, min(128, length // 3)), 30, "SQuAD defaults")


def capped(dec: Decoding, max_positions: int) -> Decoding:
    """``dec`` with its window cut to the model's positions (a run's window longer than a typed
    model can read), the stride at most half the window."""
    if dec.max_length <= max_positions:
        return dec
    return Decoding(max_positions, min(dec.doc_stride, max_positions // 2), dec.max_answer_length, dec.source + " (capped)")


def saved_predictions_file(model_path: str | Path, data_file: str | Path) -> Path | None:
    """The run's saved predictions (its manifest's ``predictions`` entry) when the model is the
    run's export for a language and the data is that run's own ``world/qa/test.<lang>.json``:
    the run's answers."""
    from xlviz.runs import artefact, owner_of, world_path

    model, data = Path(model_path).expanduser().resolve(), Path(data_file).expanduser().resolve()
    owner = owner_of(model)
    if owner is None or owner[1].kind != "export":
        return None
    run, exported = owner
    if data != world_path(run, "qa", split="test", language=exported.language).resolve():
        return None
    try:
        saved = artefact(run, "predictions", system=exported.system, language=exported.language)
    except XlvizError:
        return None
    return saved.folder if saved is not None and saved.folder.is_file() else None


def read_saved_predictions(path: str | Path, ids: Iterable[str]) -> dict[str, dict]:
    """The run's ``{id: text}`` predictions in ``predict_qa``'s shape (spans found by text)."""
    from xlviz import confined, limits

    path = Path(path)
    raw = confined.read_json(path, root=path.parent.parent, max_bytes=limits.METRICS_MAX_BYTES, what="saved predictions")
    if not isinstance(raw, dict):
        raise XlvizError("saved predictions must be a JSON object {id: answer text}", path=path)
    return {qid: {"text": str(raw[qid]), "start": None, "end": None, "score": None} for qid in ids if qid in raw}


def model_digest(folder: str | Path) -> str | None:
    """A digest of a model folder's files (:func:`xlviz.io.folder_digest`): two exports holding
    the same model (a run's English systems share one model) get the same digest. None for a hub
    id, an empty or unreadable folder."""
    from xlviz.io import folder_digest

    return folder_digest(folder)


# --- uncertainty and error analysis --------------------------------------------------------------

def _clusters(g: pd.DataFrame) -> list:
    """Each row's paragraph (its cluster); rows without one are their own cluster."""
    if "paragraph" in g:
        return [p if isinstance(p, str) else f"id:{i}" for p, i in zip(g["paragraph"], g["id"])]
    return [f"id:{i}" for i in g["id"]]


def _live(rows: pd.DataFrame, degenerate: Mapping[str, Iterable[str]] | None) -> pd.DataFrame:
    """``rows`` without the (model, language) cells whose run row is degenerate (no result):
    never in an interval, average or paired test."""
    if not degenerate:
        return rows
    bad = {(m, l) for m, langs in degenerate.items() for l in langs}
    keep = [(m, l) not in bad for m, l in zip(rows["model"], rows["language"])]
    return rows[keep]


def cell_intervals(rows: pd.DataFrame, n_resamples: int = N_RESAMPLES,
                   degenerate: Mapping[str, Iterable[str]] | None = None) -> pd.DataFrame:
    """Per model × language: EM and F1 with 95% intervals resampling whole paragraphs (the
    questions of one context go together). Each model is one seed: the intervals are the test
    set's noise only. ``degenerate``: ``{model: languages}`` whose rows are no result, left out."""
    from xlviz.evaluation.uncertainty import cluster_bootstrap

    out = []
    for (model, lang), g in _live(rows, degenerate).groupby(["model", "language"], sort=False):
        clusters = _clusters(g)
        em = cluster_bootstrap(g["exact_match"].to_numpy(), clusters, n_resamples=n_resamples)
        f1 = cluster_bootstrap(g["f1"].to_numpy(), clusters, n_resamples=n_resamples)
        out.append({"model": model, "language": lang, "n": len(g), "paragraphs": f1.n_paragraphs, "EM": em.mean,
                    "EM low": em.low, "EM high": em.high, "F1": f1.mean, "F1 low": f1.low, "F1 high": f1.high})
    return pd.DataFrame(out, columns=["model", "language", "n", "paragraphs", "EM", "EM low", "EM high", "F1", "F1 low",
                                      "F1 high"]).round(1)


def score_matrix_ci(rows: pd.DataFrame, metric: str, models: list[str] | None = None, languages: list[str] | None = None,
                    n_resamples: int = N_RESAMPLES) -> pd.DataFrame:
    """:func:`score_matrix` with every cell ``mean [low, high]`` (95% paragraph bootstrap); the
    ``avg`` cell resamples the paragraphs of the per-question average over the languages (the
    languages share question ids, so a question's languages go together)."""
    from xlviz.evaluation.uncertainty import cluster_bootstrap

    if rows.empty:
        return pd.DataFrame()
    langs = [l for l in (languages or list(dict.fromkeys(rows["language"]))) if l in set(rows["language"])]
    names = [m for m in (models or list(dict.fromkeys(rows["model"]))) if m in set(rows["model"])]
    text = lambda iv: f"{iv.mean:.1f} [{iv.low:.1f}, {iv.high:.1f}]"  # noqa: E731
    out = {}
    for model in names:
        g = rows[rows["model"] == model]
        cells = {}
        for lang in langs:
            part = g[g["language"] == lang]
            if not part.empty:
                cells[lang] = text(cluster_bootstrap(part[metric].to_numpy(), _clusters(part), n_resamples=n_resamples))
        have = [l for l in langs if l in cells]
        if have:
            wide = g[g["language"].isin(have)].pivot_table(index="id", columns="language", values=metric, aggfunc="first").dropna()
            first = g[g["language"] == have[0]].drop_duplicates("id").set_index("id")
            if not wide.empty:
                clusters = _clusters(first.loc[wide.index].reset_index())
                cells["avg"] = text(cluster_bootstrap(wide.mean(axis=1).to_numpy(), clusters, n_resamples=n_resamples))
        out[model] = cells
    return pd.DataFrame.from_dict(out, orient="index").reindex(columns=langs + ["avg"])


PAIRED_COLUMNS = ["language", "A", "B", "setting", "n", "paragraphs", "F1 A − B", "low", "high", "p F1", "p F1 Holm",
                  "EM A − B", "p EM", "p EM Holm", "p from", "seeds"]


def paired_tests(rows: pd.DataFrame, n_resamples: int = N_RESAMPLES, *, setting_of: Mapping[str, str | None] | None = None,
                 degenerate: Mapping[str, Iterable[str]] | None = None) -> pd.DataFrame:
    """Every pair of models of one setting on the same questions of one language: the F1
    difference with its paired paragraph-bootstrap interval and the paired permutation p
    (signs of whole paragraphs flipped) of F1 and of EM, each with Holm's adjustment over the
    whole table (every pair, language and metric: one family), and how the p was computed
    (exact enumeration or Monte Carlo). Each model is one seed: "1 seed: test-set noise only,
    no verdict about the method". Models of different settings (``setting_of``) are never
    paired; degenerate cells (``degenerate``) never enter."""
    from itertools import combinations

    from xlviz.evaluation.seeds import holm
    from xlviz.evaluation.uncertainty import paired_test

    setting_of = setting_of or {}
    out = []
    for lang, g in _live(rows, degenerate).groupby("language", sort=False):
        wide_f1 = g.pivot_table(index="id", columns="model", values="f1", aggfunc="first")
        wide_em = g.pivot_table(index="id", columns="model", values="exact_match", aggfunc="first")
        para = dict(zip(g["id"], _clusters(g)))
        for a, b in combinations(list(dict.fromkeys(g["model"])), 2):
            if setting_of.get(a) != setting_of.get(b):  # zero-shot against translate-test: not comparable
                continue
            both = wide_f1[[a, b]].dropna()
            if both.empty:
                continue
            clusters = [para[i] for i in both.index]
            r = paired_test(both[a].to_numpy(), both[b].to_numpy(), clusters, n_resamples=n_resamples)
            em = wide_em.loc[both.index, [a, b]]
            e = paired_test(em[a].to_numpy(), em[b].to_numpy(), clusters, n_resamples=1)
            how = r.p_method if r.p_method == e.p_method else f"F1: {r.p_method}; EM: {e.p_method}"
            out.append({"language": lang, "A": a, "B": b, "setting": setting_of.get(a) or "unknown", "n": r.n_questions,
                        "paragraphs": r.n_paragraphs, "F1 A − B": r.difference, "low": r.low, "high": r.high,
                        "p F1": r.p_value, "EM A − B": e.difference, "p EM": e.p_value, "p from": how, "seeds": 1})
    adjusted = holm([o["p F1"] for o in out] + [o["p EM"] for o in out])
    for i, o in enumerate(out):
        o["p F1 Holm"], o["p EM Holm"] = adjusted[i], adjusted[len(out) + i]
    return pd.DataFrame(out, columns=PAIRED_COLUMNS).round({"F1 A − B": 1, "low": 1, "high": 1, "EM A − B": 1, "p F1": 4,
                                                            "p F1 Holm": 4, "p EM": 4, "p EM Holm": 4})


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
