"""Answer spans from a QA model: windows -> start/end logits -> best character span.

The standard HF post-processing: for every window of an example, pair the ``n_best`` highest
start and end logits, keep pairs that lie inside the context (offset not None), have
start <= end and at most ``max_answer_length`` tokens, score them by start + end logit, and take
the best over all windows; the text is cut from the context with the offset mapping so it is
exactly a substring of the context. If the n-best pairs hold no valid span, every valid span of
the windows is searched, so an example with any context always gets an answer.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch

from xlviz.data.qa_features import MODEL_INPUT_KEYS, prepare_eval_features
from xlviz.errors import XlvizError


def _field(example: Any, name: str) -> Any:
    return example[name] if isinstance(example, Mapping) else getattr(example, name)


def _logits(output: Any) -> tuple[torch.Tensor, torch.Tensor]:
    if hasattr(output, "start_logits"):
        return output.start_logits, output.end_logits
    if isinstance(output, dict):
        return output["start_logits"], output["end_logits"]
    return output[0], output[1]


def _model_device(model: Any) -> torch.device:
    device = getattr(model, "device", None)
    if device is not None:
        return torch.device(device)
    for p in model.parameters():
        return p.device
    return torch.device("cpu")


def _best_in_window(
    start: np.ndarray, end: np.ndarray, offsets: list, n_best: int, max_answer_length: int
) -> tuple[float, int, int] | None:
    """(score, start token, end token) of the best valid span of one window, or None."""
    best = None
    start_idx = np.argsort(start)[-1 : -n_best - 1 : -1]
    end_idx = np.argsort(end)[-1 : -n_best - 1 : -1]
    for s in start_idx:
        for e in end_idx:
            if s >= len(offsets) or e >= len(offsets) or offsets[s] is None or offsets[e] is None:
                continue
            if e < s or e - s + 1 > max_answer_length:
                continue
            score = float(start[s] + end[e])
            if best is None or score > best[0]:
                best = (score, int(s), int(e))
    return best


def _best_in_windows(
    start: np.ndarray, end: np.ndarray, context: np.ndarray, n_best: int, max_answer_length: int, block: int = 2048
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_best_in_window` for every window at once: ``(found, score, start token, end
    token)`` arrays over the windows (``found`` False where no n-best pair is valid).

    The same pairs in the same order as the loop (each row's ``argsort``, the first maximum
    wins), so the answers are the loop's; a Python loop over 400 pairs per window was most of
    the XQuAD page's time on real contexts (tens of windows per question). ``context[w, t]``:
    token t of window w belongs to the context. Windows are taken ``block`` at a time to bound
    memory.
    """
    n_windows, length = start.shape
    n = min(n_best, length)
    found = np.zeros(n_windows, dtype=bool)
    score = np.full(n_windows, -np.inf)
    s_out = np.zeros(n_windows, dtype=np.int64)
    e_out = np.zeros(n_windows, dtype=np.int64)
    for lo in range(0, n_windows, block):
        st, en, ctx = start[lo : lo + block], end[lo : lo + block], context[lo : lo + block]
        rows = np.arange(len(st))[:, None]
        s_idx = np.argsort(st, axis=1)[:, ::-1][:, :n]  # per row as the loop's 1-D argsort
        e_idx = np.argsort(en, axis=1)[:, ::-1][:, :n]
        S, E = s_idx[:, :, None], e_idx[:, None, :]
        valid = ctx[rows, s_idx][:, :, None] & ctx[rows, e_idx][:, None, :] & (E >= S) & (E - S + 1 <= max_answer_length)
        pair = st[rows, s_idx][:, :, None] + en[rows, e_idx][:, None, :]  # float32, as the loop adds
        pair = np.where(valid, pair, -np.inf).reshape(len(st), -1)
        best = np.argmax(pair, axis=1)  # first maximum: the loop keeps the first of equal scores
        any_valid = valid.reshape(len(st), -1).any(axis=1)
        found[lo : lo + block] = any_valid
        score[lo : lo + block] = pair[np.arange(len(st)), best]
        s_out[lo : lo + block] = s_idx[np.arange(len(st)), best // n]
        e_out[lo : lo + block] = e_idx[np.arange(len(st)), best % n]
    return found, score, s_out, e_out


def _exhaustive_in_window(
    start: np.ndarray, end: np.ndarray, offsets: list, max_answer_length: int
) -> tuple[float, int, int] | None:
    """Best valid span by full search: the fallback when the n-best pairs are all invalid."""
    ctx = np.array([t for t, o in enumerate(offsets) if o is not None], dtype=np.int64)
    if len(ctx) == 0:
        return None
    s = ctx[:, None]
    e = ctx[None, :]
    valid = (e >= s) & (e - s + 1 <= max_answer_length)
    scores = np.where(valid, start[s] + end[e], -np.inf)
    flat = int(np.argmax(scores))
    i, j = divmod(flat, len(ctx))
    if not np.isfinite(scores[i, j]):
        return None
    return float(scores[i, j]), int(ctx[i]), int(ctx[j])


def predict_qa(
    model: Any,
    tokenizer: Any,
    examples: Sequence[Any],
    max_length: int = 384,
    doc_stride: int = 128,
    batch_size: int = 32,
    n_best: int = 20,
    max_answer_length: int = 30,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, dict]:
    """``{example_id: {"text", "start", "end", "score"}}`` for every example.

    ``start``/``end`` are character offsets into the example's context (``text ==
    context[start:end]``); ``score`` is the best start + end logit. An example whose windows
    hold no context token gets ``text ""``, ``start = end = 0`` and score ``-inf``. ``progress``
    is called as ``progress(windows_done, windows_total)`` after each batch. The model runs in
    eval mode under ``torch.no_grad`` on its own device; its training mode is restored after.
    """
    if batch_size < 1 or n_best < 1 or max_answer_length < 1:
        raise XlvizError(
            f"batch_size ({batch_size}), n_best ({n_best}) and max_answer_length ({max_answer_length}) must be >= 1"
        )
    ids = [_field(ex, "id") for ex in examples]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise XlvizError(f"duplicate example id {dup!r}: predictions are keyed by id")
    contexts = [_field(ex, "context") for ex in examples]

    features = prepare_eval_features(tokenizer, examples, max_length=max_length, doc_stride=doc_stride)
    n_features = len(features["input_ids"])
    accepted = set(getattr(tokenizer, "model_input_names", MODEL_INPUT_KEYS))
    input_keys = [k for k in MODEL_INPUT_KEYS if k in features and k in accepted]
    device = _model_device(model)

    all_start: list[np.ndarray] = []
    all_end: list[np.ndarray] = []
    was_training = getattr(model, "training", False)
    model.eval()
    try:
        with torch.no_grad():
            for lo in range(0, n_features, batch_size):
                batch = {
                    k: torch.tensor(features[k][lo : lo + batch_size], dtype=torch.long, device=device)
                    for k in input_keys
                }
                start_logits, end_logits = _logits(model(**batch))
                all_start.append(start_logits.detach().float().cpu().numpy())
                all_end.append(end_logits.detach().float().cpu().numpy())
                if progress is not None:
                    progress(min(lo + batch_size, n_features), n_features)
    finally:
        if was_training:
            model.train()

    offsets_of = features["offset_mapping"]
    if n_features:
        starts, ends = np.concatenate(all_start), np.concatenate(all_end)
        context = np.zeros(starts.shape, dtype=bool)
        for f, offsets in enumerate(offsets_of):
            context[f, [t for t, o in enumerate(offsets[: starts.shape[1]]) if o is not None]] = True
        found, scores, s_tok, e_tok = _best_in_windows(starts, ends, context, n_best, max_answer_length)

    by_example: dict[int, list[int]] = {}
    for f, ex_index in enumerate(features["example_index"]):
        by_example.setdefault(ex_index, []).append(f)

    predictions: dict[str, dict] = {}
    for ex_index, (qid, context_text) in enumerate(zip(ids, contexts)):
        best = None  # (score, feature, start token, end token)
        windows = by_example.get(ex_index, [])
        for f in windows:  # the first window wins a tie, as before
            if found[f] and (best is None or scores[f] > best[0]):
                best = (float(scores[f]), f, int(s_tok[f]), int(e_tok[f]))
        if best is None:
            for f in windows:
                found_ex = _exhaustive_in_window(starts[f], ends[f], offsets_of[f], max_answer_length)
                if found_ex is not None and (best is None or found_ex[0] > best[0]):
                    best = (found_ex[0], f, found_ex[1], found_ex[2])
        if best is None:
            predictions[qid] = {"text": "", "start": 0, "end": 0, "score": -math.inf}
            continue
        score, f, s, e = best
        offsets = offsets_of[f]
        start_char, end_char = offsets[s][0], offsets[e][1]
        predictions[qid] = {"text": context_text[start_char:end_char], "start": start_char, "end": end_char, "score": score}
    return predictions


def predictions_to_text(predictions: dict[str, dict]) -> dict[str, str]:
    """The official predictions-file shape, ``{id: text}``."""
    return {qid: p["text"] for qid, p in predictions.items()}
