"""Probing what a masked LM learned: agreement minimal pairs, word in context, contextual similarity.

Why: the paper's claim is that a transferred model (L1 body, new L2 embeddings) keeps the
L1 body's knowledge. These probes ask the model directly, per language and per layer:

- Agreement (Goldberg 2019 on Marvin & Linzen 2018): mask the one word where a minimal pair
  differs and compare the masked LM's probabilities of the grammatical and the ungrammatical
  form. Only pairs whose two forms are single tokens of the model's vocabulary can be scored
  that way (``unit="word"``, the paper's Table 10 coverage); ``unit="token"`` also scores
  pairs whose tokenizations differ in exactly one sub-word.
- Word in context: a logistic-regression probe on fixed vectors of a word in two contexts
  (same sense or not), cross-validated, per layer.
- Contextual similarity: cosine of a word's vectors across the two contexts, Spearman
  correlation with gold similarity. The generated world has no graded gold similarity, so
  gold is binary (same sense = 1, different sense = 0); Spearman is then a rank-biserial
  correlation, reported with ROC AUC.

Conventions: accuracies are fractions in [0, 1]; ``progress(done, total)`` like
:mod:`xlviz.analysis.representations`. Results are plain dicts/lists (JSON-serialisable).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from xlviz.errors import XlvizError

UNITS = ("word", "token")
Progress = Callable[[int, int], None] | None


# --------------------------------------------------------------------------- minimal pairs
def minimal_pair(good: str, bad: str, *, id: str = "", category: str = "", condition: str = "") -> dict:
    """A minimal pair in the probe format from two whitespace-tokenised sentences.

    Returns ``{"id", "category", "condition", "words", "index", "good_word", "bad_word"}``
    where ``words`` is the grammatical sentence split on whitespace and ``index`` the one
    position where the two sentences differ; when they differ in more than one word (or in
    length) ``index`` is None and ``"reason"`` says why (such pairs are counted as not covered).
    """
    gw, bw = good.split(), bad.split()
    pair = {"id": id, "category": category, "condition": condition, "words": gw, "index": None,
            "good_word": None, "bad_word": None}
    if len(gw) != len(bw):
        pair["reason"] = "the two sentences differ in length"
        return pair
    diff = [i for i, (a, b) in enumerate(zip(gw, bw)) if a != b]
    if len(diff) != 1:
        pair["reason"] = "the two sentences are identical" if not diff else f"the sentences differ in {len(diff)} words"
        return pair
    i = diff[0]
    pair.update(index=i, good_word=gw[i], bad_word=bw[i])
    return pair


def marvin_linzen_pairs(rows: Iterable[dict]) -> list[dict]:
    """Marvin & Linzen rows (``xlviz.data.real.read_marvin_linzen``) as probe pairs.

    Ids are ``ml-<category>-<n>``; rows whose sentences differ in more than one word keep
    ``index=None`` (e.g. none in the agreement categories; a few in the reflexive ones).
    """
    counts: dict[str, int] = {}
    out = []
    for row in rows:
        cat = row["category"]
        counts[cat] = counts.get(cat, 0) + 1
        out.append(minimal_pair(row["grammatical"], row["ungrammatical"], id=f"ml-{cat}-{counts[cat]:05d}",
                                category=cat, condition=row.get("condition", "")))
    return out


def _check_pair(p: dict, i: int) -> None:
    for key in ("words", "index", "good_word", "bad_word"):
        if key not in p:
            raise XlvizError(f"pair {i} has no '{key}' (expected words/index/good_word/bad_word)", field="pairs")
    if p["index"] is not None and not (0 <= int(p["index"]) < len(p["words"])):
        raise XlvizError(f"pair {i}: index {p['index']} outside its {len(p['words'])} words", field="pairs")


def _char_span(words: Sequence[str], index: int) -> tuple[str, int, int]:
    """The sentence as words joined by spaces, and the character span of word ``index``."""
    start = sum(len(w) + 1 for w in words[:index])
    return " ".join(words), start, start + len(words[index])


def _tokens_in(offsets, start: int, end: int) -> list[int]:
    """Positions of non-special tokens overlapping [start, end)."""
    return [t for t, (a, b) in enumerate(offsets) if b > a and a < end and b > start]


def _encode_pair(tokenizer, p: dict, unit: str, max_length: int) -> tuple[list[int] | None, int, int, int, str]:
    """(masked ids, mask position, good id, bad id, reason): reason is "" when the pair is scorable."""
    if p["index"] is None:
        return None, -1, -1, -1, p.get("reason", "the sentences do not differ in exactly one word")
    words = list(p["words"])
    bad_words = list(words)
    bad_words[p["index"]] = p["bad_word"]
    words[p["index"]] = p["good_word"]
    text_g, s, e_g = _char_span(words, p["index"])
    text_b, _, e_b = _char_span(bad_words, p["index"])
    enc_g = tokenizer(text_g, return_offsets_mapping=True, truncation=True, max_length=max_length)
    enc_b = tokenizer(text_b, return_offsets_mapping=True, truncation=True, max_length=max_length)
    ids_g, ids_b = list(enc_g["input_ids"]), list(enc_b["input_ids"])
    tg, tb = _tokens_in(enc_g["offset_mapping"], s, e_g), _tokens_in(enc_b["offset_mapping"], s, e_b)
    if not tg or not tb:
        return None, -1, -1, -1, f"the differing word is cut off at {max_length} tokens"
    unk = tokenizer.unk_token_id
    if unit == "word":
        if len(tg) != 1 or len(tb) != 1:
            return None, -1, -1, -1, (
                f"not single tokens: '{p['good_word']}' is {len(tg)} token(s), '{p['bad_word']}' is {len(tb)}")
        if len(ids_g) != len(ids_b) or tg != tb or any(a != b for k, (a, b) in enumerate(zip(ids_g, ids_b)) if k != tg[0]):
            return None, -1, -1, -1, "the rest of the sentence tokenizes differently"
        pos = tg[0]
    else:
        if len(ids_g) != len(ids_b):
            return None, -1, -1, -1, "the two forms have different numbers of tokens"
        diff = [k for k, (a, b) in enumerate(zip(ids_g, ids_b)) if a != b]
        if len(diff) != 1:
            return None, -1, -1, -1, f"the tokenizations differ in {len(diff)} tokens"
        pos = diff[0]
    good_id, bad_id = ids_g[pos], ids_b[pos]
    if unk is not None and unk in (good_id, bad_id):
        return None, -1, -1, -1, "a form is an unknown token"
    masked = list(ids_g)
    masked[pos] = tokenizer.mask_token_id
    return masked, pos, good_id, bad_id, ""


def _mlm_logits(model, batch_ids: list[list[int]], positions: list[int], pad_id: int):
    """Log-probabilities over the vocabulary at one position per sequence: [b, V] numpy."""
    import torch

    width = max(len(x) for x in batch_ids)
    ids = torch.full((len(batch_ids), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(batch_ids), width), dtype=torch.long)
    for r, x in enumerate(batch_ids):
        ids[r, : len(x)] = torch.tensor(x)
        mask[r, : len(x)] = 1
    with torch.no_grad():
        out = model(input_ids=ids.to(model.device), attention_mask=mask.to(model.device))
    logits = out.logits[torch.arange(len(batch_ids)), torch.tensor(positions)]
    return torch.log_softmax(logits.float(), dim=-1).cpu().numpy()


def agreement_accuracy(
    model,
    tokenizer,
    pairs: Sequence[dict],
    unit: str = "word",
    batch_size: int = 64,
    max_length: int = 128,
    progress: Progress = None,
) -> dict:
    """Goldberg's masked-LM agreement probe on minimal pairs, overall and per category.

    ``pairs``: dicts with ``words`` (the sentence, pre-split), ``index`` (the differing word),
    ``good_word``, ``bad_word`` and optionally ``id``, ``category`` - the generated world's
    ``agreement_pairs`` or :func:`marvin_linzen_pairs`. ``model`` is a masked LM (loaded with
    ``task="mlm"``) and ``tokenizer`` its fast tokenizer with a mask token.

    A pair is correct when log P(good form) > log P(bad form) at the masked position (ties
    count as wrong). Returns ``{"accuracy", "n_scored", "n_total", "coverage", "unit",
    "by_category": [{"category", "accuracy", "n_scored", "n_total", "coverage"}],
    "items": [{"id", "category", "sentence", "masked", "good_word", "bad_word", "covered",
    "reason", "logp_good", "logp_bad", "preferred", "correct", "top_prediction"}]}``.
    Accuracy is None where nothing could be scored.
    """
    if unit not in UNITS:
        raise XlvizError(f"unknown unit '{unit}'; use one of {', '.join(UNITS)}", field="unit")
    if batch_size < 1:
        raise XlvizError(f"must be at least 1, got {batch_size}", field="batch_size")
    if not getattr(tokenizer, "is_fast", False):
        raise XlvizError("the agreement probe needs a fast tokenizer (character offsets)", field="tokenizer")
    if tokenizer.mask_token_id is None:
        raise XlvizError("the tokenizer has no mask token, so the masked LM cannot be queried", field="tokenizer")
    if not hasattr(model, "get_output_embeddings") or model.get_output_embeddings() is None:
        raise XlvizError("the model has no masked-LM head; load it with task='mlm'", field="model")
    pairs = list(pairs)
    for i, p in enumerate(pairs):
        _check_pair(p, i)
    model.eval()
    items, todo = [], []
    for i, p in enumerate(pairs):
        masked, pos, gid, bid, reason = _encode_pair(tokenizer, p, unit, max_length)
        words = list(p["words"])
        item = {
            "id": p.get("id") or f"pair-{i:05d}", "category": p.get("category") or "all",
            "sentence": " ".join(words), "masked": None, "good_word": p["good_word"], "bad_word": p["bad_word"],
            "covered": not reason, "reason": reason, "logp_good": None, "logp_bad": None,
            "preferred": None, "correct": None, "top_prediction": None,
        }
        if not reason:
            mw = list(words)
            mw[p["index"]] = tokenizer.mask_token
            item["masked"] = " ".join(mw)
            todo.append((i, masked, pos, gid, bid))
        items.append(item)
    order = sorted(range(len(todo)), key=lambda k: len(todo[k][1]))
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    for start in range(0, len(order), batch_size):
        chunk = [todo[k] for k in order[start : start + batch_size]]
        logp = _mlm_logits(model, [c[1] for c in chunk], [c[2] for c in chunk], pad)
        for row, (i, _, _, gid, bid) in zip(logp, chunk):
            g, b = float(row[gid]), float(row[bid])
            it = items[i]
            it.update(logp_good=g, logp_bad=b, correct=g > b, preferred=it["good_word"] if g > b else it["bad_word"],
                      top_prediction=tokenizer.convert_ids_to_tokens(int(np.argmax(row))))
        if progress is not None:
            progress(min(start + batch_size, len(order)), len(order))
    return {**_summary(items), "unit": unit, "by_category": _by_category(items), "items": items}


def agreement_summary(items: Sequence[dict]) -> dict:
    """Overall and per-category accuracy/coverage of scored items (e.g. items of several
    ``agreement_accuracy`` calls on chunks of one data set, joined)."""
    items = list(items)
    return {**_summary(items), "by_category": _by_category(items)}


def _summary(items: list[dict]) -> dict:
    scored = [it for it in items if it["covered"]]
    n_ok = sum(1 for it in scored if it["correct"])
    return {
        "accuracy": n_ok / len(scored) if scored else None,
        "n_scored": len(scored),
        "n_total": len(items),
        "coverage": len(scored) / len(items) if items else None,
    }


def _by_category(items: list[dict]) -> list[dict]:
    cats: dict[str, list[dict]] = {}
    for it in items:
        cats.setdefault(it["category"], []).append(it)
    return [{"category": c, **_summary(v)} for c, v in cats.items()]


# --------------------------------------------------------------------------- word in context
def sense_pair_vectors(
    model,
    tokenizer,
    pairs: Sequence[dict],
    batch_size: int = 32,
    max_length: int = 128,
    progress: Progress = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[int]]:
    """Vectors of the target word in both contexts of each sense pair, per layer.

    ``pairs``: dicts with ``words1``/``index1``, ``words2``/``index2`` and ``same_sense`` (the
    generated world's ``sense_pairs``). A word's vector is the mean of its sub-word vectors
    (:func:`~xlviz.analysis.representations.word_embeddings_in_context`). Returns
    ``(U, V, labels, kept)``: U, V float32 [layers + 1, n_kept, hidden], labels int [n_kept]
    (1 = same sense) and the indices of the pairs kept (a pair whose word was cut off by
    truncation is dropped).
    """
    from xlviz.analysis.representations import word_embeddings_in_context

    pairs = list(pairs)
    if not pairs:
        raise XlvizError("no sense pairs", field="pairs")
    for i, p in enumerate(pairs):
        for key in ("words1", "index1", "words2", "index2", "same_sense"):
            if key not in p:
                raise XlvizError(f"sense pair {i} has no '{key}'", field="pairs")
    sents = [list(p["words1"]) for p in pairs] + [list(p["words2"]) for p in pairs]
    idx = [int(p["index1"]) for p in pairs] + [int(p["index2"]) for p in pairs]
    for k, (s, j) in enumerate(zip(sents, idx)):
        if not 0 <= j < len(s):
            raise XlvizError(f"sense pair {k % len(pairs)}: index {j} outside its {len(s)} words", field="pairs")
    vecs = []
    step = max(batch_size * 4, 1)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*have no tokens.*")
        for start in range(0, len(sents), step):
            layers = word_embeddings_in_context(model, tokenizer, sents[start : start + step], batch_size=batch_size,
                                                max_length=max_length)
            vecs.append(np.stack([[layer[s][idx[start + s]] for s in range(len(layer))] for layer in layers]))
            if progress is not None:
                progress(min(start + step, len(sents)), len(sents))
    allv = np.concatenate(vecs, axis=1)  # [L+1, 2n, h]
    n = len(pairs)
    U, V = allv[:, :n], allv[:, n:]
    ok = np.all(np.isfinite(U), axis=(0, 2)) & np.all(np.isfinite(V), axis=(0, 2))
    kept = [i for i in range(n) if ok[i]]
    labels = np.array([int(bool(pairs[i]["same_sense"])) for i in kept], dtype=int)
    return U[:, kept].astype(np.float32), V[:, kept].astype(np.float32), labels, kept


def _pair_features(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Symmetric pair features: elementwise product and absolute difference (+ cosine)."""
    un = u / np.maximum(np.linalg.norm(u, axis=1, keepdims=True), 1e-12)
    vn = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
    cos = np.sum(un * vn, axis=1, keepdims=True)
    return np.hstack([u * v, np.abs(u - v), cos])


def wic_probe(U, V, labels, folds: int = 5, seed: int = 0, C: float = 1.0, test_fraction: float | None = None) -> dict:
    """Logistic-regression probe "same sense?" on fixed vectors, per layer.

    Features are [u * v, |u - v|, cos(u, v)], standardised. With ``test_fraction`` None the
    probe is scored by stratified ``folds``-fold cross-validation (every pair is predicted once
    by a model that did not see it); otherwise by one stratified train/test split. Returns
    ``{"layers": [{"layer", "accuracy", "accuracy_std", "majority"}], "predictions": [L+1][n]
    (bool, the held-out prediction of each pair; None for pairs used only to train)}``.
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_predict, train_test_split
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    U, V = np.asarray(U, dtype=np.float64), np.asarray(V, dtype=np.float64)
    y = np.asarray(labels, dtype=int)
    if U.ndim != 3 or U.shape != V.shape or U.shape[1] != len(y):
        raise XlvizError(f"U {U.shape}, V {V.shape} and {len(y)} labels do not match ([layers, n, d] twice, n labels)")
    counts = np.bincount(y, minlength=2)
    if counts.min() < 2:
        raise XlvizError(f"need at least 2 pairs of each class (same / different sense), got {counts.tolist()}",
                         field="labels")
    majority = float(counts.max() / len(y))
    rows, preds = [], []
    for layer in range(U.shape[0]):
        X = _pair_features(U[layer], V[layer])
        clf = make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=2000))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # convergence / constant-feature warnings on degenerate layers
            if test_fraction is None:
                k = int(max(2, min(folds, counts.min())))
                cv = StratifiedKFold(n_splits=k, shuffle=True, random_state=seed)
                pred = cross_val_predict(clf, X, y, cv=cv)
                fold_acc = [float(np.mean(pred[te] == y[te])) for _, te in cv.split(X, y)]
                acc, std = float(np.mean(pred == y)), float(np.std(fold_acc))
                p_list = [bool(x) for x in pred]
            else:
                if not 0.0 < test_fraction < 1.0:
                    raise XlvizError(f"must be between 0 and 1, got {test_fraction}", field="test_fraction")
                tr, te = train_test_split(np.arange(len(y)), test_size=test_fraction, stratify=y, random_state=seed)
                clf.fit(X[tr], y[tr])
                pred = clf.predict(X[te])
                acc, std = float(np.mean(pred == y[te])), 0.0
                p_list = [None] * len(y)
                for j, x in zip(te, pred):
                    p_list[int(j)] = bool(x)
        rows.append({"layer": layer, "accuracy": acc, "accuracy_std": std, "majority": majority})
        preds.append(p_list)
    return {"layers": rows, "predictions": preds}


def contextual_similarity(U, V, labels) -> dict:
    """Cosine similarity of a word's vectors in two contexts vs. gold similarity, per layer.

    Gold is binary here (same sense = 1, different = 0), so Spearman's rho is a rank-biserial
    correlation; ROC AUC (chance of a same-sense pair being more similar than a different-sense
    one) and the mean cosines of each class are reported too. Returns ``{"layers": [{"layer",
    "spearman", "auc", "mean_cos_same", "mean_cos_different"}], "cosines": [L+1][n]}``.
    """
    from scipy.stats import spearmanr
    from sklearn.metrics import roc_auc_score

    U, V = np.asarray(U, dtype=np.float64), np.asarray(V, dtype=np.float64)
    y = np.asarray(labels, dtype=int)
    if U.ndim != 3 or U.shape != V.shape or U.shape[1] != len(y):
        raise XlvizError(f"U {U.shape}, V {V.shape} and {len(y)} labels do not match")
    rows, cosines = [], []
    both = len(set(y.tolist())) == 2
    for layer in range(U.shape[0]):
        u, v = U[layer], V[layer]
        cos = np.sum(u * v, axis=1) / np.maximum(np.linalg.norm(u, axis=1) * np.linalg.norm(v, axis=1), 1e-12)
        rho = float("nan")
        if both and np.ptp(cos) > 1e-9:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                rho = float(spearmanr(cos, y).statistic)
        auc = float(roc_auc_score(y, cos)) if both else float("nan")
        rows.append({
            "layer": layer,
            "spearman": None if math.isnan(rho) else rho,
            "auc": None if math.isnan(auc) else auc,
            "mean_cos_same": float(cos[y == 1].mean()) if (y == 1).any() else None,
            "mean_cos_different": float(cos[y == 0].mean()) if (y == 0).any() else None,
        })
        cosines.append([float(c) for c in cos])
    return {"layers": rows, "cosines": cosines}


def sense_pairs_test_context(pairs: Sequence[dict]) -> bool:
    """Whether word-in-context on these pairs tests the context at all: some pair must have the
    same word form in both contexts with different senses, or different forms with the same
    sense. Where "same sense" is exactly "same word" (the generated L2s, whose homonyms' senses
    are two different words), the probe only tests word identity, and the Probing page leaves
    that language out of WiC and similarity."""
    for p in pairs:
        same_form = p["words1"][p["index1"]] == p["words2"][p["index2"]]
        if same_form != bool(p["same_sense"]):
            return True
    return False


def word_in_context(
    model,
    tokenizer,
    pairs: Sequence[dict],
    folds: int = 5,
    seed: int = 0,
    test_fraction: float | None = None,
    max_length: int = 128,
    progress: Progress = None,
) -> dict:
    """Word-in-context probe and contextual similarity on sense pairs, per layer.

    Returns ``{"layers": [{"layer", "accuracy", "accuracy_std", "majority", "spearman", "auc",
    "mean_cos_same", "mean_cos_different"}], "items": [{"id", "word", "sentence1", "sentence2",
    "same_sense", "cosine": [per layer], "predicted": [per layer]}], "n_pairs", "n_dropped"}``.
    """
    pairs = list(pairs)
    U, V, y, kept = sense_pair_vectors(model, tokenizer, pairs, max_length=max_length, progress=progress)
    probe = wic_probe(U, V, y, folds=folds, seed=seed, test_fraction=test_fraction)
    sim = contextual_similarity(U, V, y)
    layers = [{**a, **{k: v for k, v in b.items() if k != "layer"}} for a, b in zip(probe["layers"], sim["layers"])]
    items = []
    for j, i in enumerate(kept):
        p = pairs[i]
        items.append({
            "id": p.get("id") or f"pair-{i:05d}",
            "word": p["words1"][p["index1"]] + ("" if p["words1"][p["index1"]] == p["words2"][p["index2"]]
                                               else f" / {p['words2'][p['index2']]}"),
            "sentence1": p.get("sentence1") or " ".join(p["words1"]),
            "sentence2": p.get("sentence2") or " ".join(p["words2"]),
            "same_sense": bool(p["same_sense"]),
            "cosine": [c[j] for c in sim["cosines"]],
            "predicted": [pr[j] for pr in probe["predictions"]],
        })
    return {"layers": layers, "items": items, "n_pairs": len(pairs), "n_dropped": len(pairs) - len(kept)}
