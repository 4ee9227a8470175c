"""Why this answer: integrated gradients of a QA model's answer over its input tokens.

Which tokens made the model pick its span? Integrated gradients (Sundararajan et al. 2017, as
LIT's salience and inseq) integrate the gradient of the predicted span's start logit (and,
separately, its end logit) along the straight line from a baseline input to the real one, in
the space of the word embeddings' output: the baseline replaces every question and context
token by ``[PAD]`` and keeps the special tokens (``[CLS]``, ``[SEP]``), positions, segments
and the attention mask as they are, so only the words change along the path. A token's
attribution is the sum over the hidden dimension; by completeness the attributions add up to
``logit(input) - logit(baseline)`` up to the quadrature error, which captum returns as the
convergence delta and which shrinks with ``n_steps`` (each step is one forward and backward
pass of the window).

Computed with captum's ``LayerIntegratedGradients`` on the input-embedding layer. captum
0.8.0 declares ``numpy<2.0`` and cannot be installed beside the pinned numpy 2.4.6 (pip:
ResolutionImpossible), so the pin is captum 0.9.0, which declares ``numpy`` and
``torch>=2.3`` and runs with torch 2.13.0.

The window is the one the model answered from: the question and context are cut into windows
exactly as :func:`xlviz.data.qa_features.prepare_eval_features` cuts them, and the first window
holding the whole predicted span is explained. Words (``words_salience``) sum their tokens, so
gold word alignments (the generated world's, :meth:`xlviz.data.world.World.qa_alignment`)
can link an L1 word's salience to its translation's (:func:`aligned_salience`).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from xlviz.errors import XlvizError

DEFAULT_STEPS = 32
QUESTION, CONTEXT, SPECIAL = "question", "context", "special"
TARGETS = ("total", "start", "end")


@dataclass
class Salience:
    """Per-token integrated gradients of one answer in one window.

    ``start`` / ``end``: raw attributions (sum over the hidden dimension) for the start and the
    end logit of the answer span; ``total`` their sum, the attribution of the span score
    ``start logit + end logit`` (integrated gradients is linear in the explained output).
    ``offsets``: each token's character span in the question (segment ``question``) or the
    context (``context``); None for special tokens. ``*_delta``: captum's convergence delta,
    ``sum(attributions) - (logit(input) - logit(baseline))``.
    """

    tokens: list[str]
    segments: list[str]
    offsets: list[tuple[int, int] | None]
    start: np.ndarray
    end: np.ndarray
    start_index: int
    end_index: int
    start_logit: float
    end_logit: float
    start_baseline: float
    end_baseline: float
    start_delta: float
    end_delta: float
    n_steps: int
    window: int = 0
    n_windows: int = 1
    answer: str = ""
    answer_span: tuple[int, int] | None = None  # characters in the context
    question: str = field(default="", repr=False)
    context: str = field(default="", repr=False)

    @property
    def total(self) -> np.ndarray:
        return self.start + self.end

    def values(self, target: str = "total") -> np.ndarray:
        """Raw attributions for ``target`` (``total``, ``start`` or ``end``)."""
        if target not in TARGETS:
            raise XlvizError(f"unknown salience target {target!r}; choose from {list(TARGETS)}", field="target")
        return getattr(self, target)

    def normalised(self, target: str = "total") -> np.ndarray:
        """Attributions divided by the largest magnitude (in [-1, 1]; all zeros stay zeros):
        for shading, the raw values stay in :meth:`values`."""
        v = self.values(target)
        peak = float(np.max(np.abs(v))) if v.size else 0.0
        return v / peak if peak > 0 else np.zeros_like(v)

    def words_salience(self, segment: str, spans: Sequence[tuple[int, int]], target: str = "total") -> list[float | None]:
        """Salience of words given by character spans in ``segment`` (question or context): the
        sum of the tokens overlapping each span; None for a word outside this window."""
        v = self.values(target)
        out: list[float | None] = []
        for a, b in spans:
            hits = [i for i, (s, o) in enumerate(zip(self.segments, self.offsets))
                    if s == segment and o is not None and o[0] < b and a < o[1] and o[1] > o[0]]
            out.append(float(sum(v[i] for i in hits)) if hits else None)
        return out

    def rows(self) -> list[dict]:
        """One row per token with the raw and normalised values (the page's table, a CSV)."""
        norm = self.normalised()
        return [{"token": t, "segment": s, "start": float(a), "end": float(b), "total": float(a + b), "normalised": float(n)}
                for t, s, a, b, n in zip(self.tokens, self.segments, self.start, self.end, norm)]


def _logits(output: Any):
    if hasattr(output, "start_logits"):
        return output.start_logits, output.end_logits
    if isinstance(output, dict):
        return output["start_logits"], output["end_logits"]
    return output[0], output[1]


def _windows(tokenizer: Any, question: str, context: str, max_length: int, doc_stride: int):
    """The windows the model reads, as prediction cuts them (same question fitting and
    truncation), without padding."""
    from xlviz.data.qa_features import _check_args, _fit_questions

    max_question = _check_args(tokenizer, max_length, doc_stride)
    q = _fit_questions(tokenizer, [question], max_question)[0]
    try:
        enc = tokenizer(q, context, truncation="only_second", max_length=max_length, stride=doc_stride,
                        return_overflowing_tokens=True, return_offsets_mapping=True)
    except BaseException as e:  # the Rust side raises pyo3 PanicException (a BaseException)
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        raise XlvizError(f"tokenizing the question and context failed (max_length={max_length}, "
                         f"doc_stride={doc_stride}): {str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
    return enc, len(question) - len(question.lstrip())


def _token_span(offsets: list, segments: list, span: tuple[int, int]) -> tuple[int, int] | None:
    """(first, last) context token of a character span when the window holds all of it."""
    ctx = [i for i, s in enumerate(segments) if s == CONTEXT and offsets[i] is not None]
    if not ctx:
        return None
    a, b = span
    if offsets[ctx[0]][0] > a or offsets[ctx[-1]][1] < b:
        return None
    inside = [i for i in ctx if offsets[i][0] < b and a < offsets[i][1]]
    if not inside:
        return None
    return inside[0], inside[-1]


def integrated_gradients(model: Any, tokenizer: Any, question: str, context: str, *,
                         answer: tuple[int, int] | None = None, n_steps: int = DEFAULT_STEPS,
                         max_length: int = 384, doc_stride: int = 128, max_answer_length: int = 30,
                         internal_batch_size: int | None = 8, method: str = "gausslegendre") -> Salience:
    """Integrated gradients of the answer's start and end logits over the word embeddings.

    ``answer``: the predicted span as characters of ``context`` (``predict_qa``'s ``start`` /
    ``end``); None: the model predicts it here with the same decoding. ``n_steps``: quadrature
    points (each a forward and backward pass of the window; ``internal_batch_size`` bounds how
    many run at once: memory stays bounded on long windows of big models). The model is left in
    the mode it came in.
    """
    import torch
    from captum.attr import LayerIntegratedGradients

    from xlviz.data.qa_features import MODEL_INPUT_KEYS

    if n_steps < 1:
        raise XlvizError(f"n_steps must be at least 1, not {n_steps}", field="n_steps")
    if not context:
        raise XlvizError("the context is empty: there is no answer to explain", field="context")
    if answer is None:
        from xlviz.evaluation.qa_predict import predict_qa

        pred = predict_qa(model, tokenizer, [{"id": "q", "question": question, "context": context}],
                          max_length=max_length, doc_stride=doc_stride, max_answer_length=max_answer_length)["q"]
        if pred["end"] <= pred["start"]:
            raise XlvizError("the model gave no answer span in any window: nothing to explain", field="answer")
        answer = (int(pred["start"]), int(pred["end"]))
    a, b = int(answer[0]), int(answer[1])
    if not 0 <= a < b <= len(context):
        raise XlvizError(f"answer span {answer} is not inside the context ({len(context)} characters)", field="answer")

    enc, q_shift = _windows(tokenizer, question, context, max_length, doc_stride)
    n_windows = len(enc["input_ids"])
    chosen = None
    for w in range(n_windows):
        seq = enc.sequence_ids(w)
        segments = [SPECIAL if s is None else (QUESTION if s == 0 else CONTEXT) for s in seq]
        offsets = [None if s == SPECIAL else tuple(o) for s, o in zip(segments, enc["offset_mapping"][w])]
        found = _token_span(offsets, segments, (a, b))
        if found is not None:
            chosen = (w, segments, offsets, found)
            break
    if chosen is None:
        raise XlvizError(f"no window of {max_length} tokens holds the whole answer span {answer}", field="answer")
    w, segments, offsets, (s_tok, e_tok) = chosen
    # question offsets refer to the left-stripped question the windows read: back to the original
    offsets = [(o[0] + q_shift, o[1] + q_shift) if s == QUESTION and o is not None else o for s, o in zip(segments, offsets)]

    accepted = set(getattr(tokenizer, "model_input_names", MODEL_INPUT_KEYS))
    keys = [k for k in MODEL_INPUT_KEYS if k in enc and k in accepted]
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    inputs = {k: torch.tensor([enc[k][w]], dtype=torch.long, device=device) for k in keys}
    ids = inputs.pop("input_ids")
    if "attention_mask" not in inputs:
        inputs["attention_mask"] = torch.ones_like(ids)
    if "position_ids" in inspect.signature(model.forward).parameters:
        # RoBERTa derives positions from the ids ([PAD] gets the padding position): the baseline
        # must sit at the input's positions, else logit(baseline) is not the path's start
        from xlviz.models.surgery import first_position_row

        inputs["position_ids"] = first_position_row(model) + torch.arange(ids.shape[1], device=device).unsqueeze(0)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    special = torch.tensor([[s == SPECIAL for s in segments]], device=device)
    baseline = torch.where(special, ids, torch.full_like(ids, pad))
    extra_keys = list(inputs)
    embedding = model.get_input_embeddings()

    def forward(input_ids, *args):  # args: the other model inputs, then which logit
        kwargs = dict(zip(extra_keys, args[:-1]))
        start, end = _logits(model(input_ids=input_ids, **kwargs))
        return (start if args[-1] == "start" else end).float()

    was_training = getattr(model, "training", False)
    model.eval()
    try:
        with torch.enable_grad():
            lig = LayerIntegratedGradients(forward, embedding)
            result = {}
            for which, target in (("start", s_tok), ("end", e_tok)):
                attr, delta = lig.attribute(ids, baselines=baseline, target=target,
                                            additional_forward_args=(*[inputs[k] for k in extra_keys], which),
                                            n_steps=n_steps, method=method, internal_batch_size=internal_batch_size,
                                            return_convergence_delta=True)
                result[which] = (attr.sum(dim=-1)[0].detach().float().cpu().numpy(), float(delta.reshape(-1)[0]))
        with torch.no_grad():
            s_in, e_in = _logits(model(input_ids=ids, **inputs))
            s_base, e_base = _logits(model(input_ids=baseline, **inputs))
    finally:
        if was_training:
            model.train()
    tokens = tokenizer.convert_ids_to_tokens(enc["input_ids"][w])
    return Salience(
        tokens=list(tokens), segments=segments, offsets=offsets,
        start=result["start"][0].astype(np.float64), end=result["end"][0].astype(np.float64),
        start_index=s_tok, end_index=e_tok,
        start_logit=float(s_in[0, s_tok]), end_logit=float(e_in[0, e_tok]),
        start_baseline=float(s_base[0, s_tok]), end_baseline=float(e_base[0, e_tok]),
        start_delta=result["start"][1], end_delta=result["end"][1], n_steps=n_steps, window=w, n_windows=n_windows,
        answer=context[offsets[s_tok][0]:offsets[e_tok][1]], answer_span=(a, b), question=question, context=context,
    )


# --------------------------------------------------------------------------- across languages
@dataclass(frozen=True)
class AlignedText:
    """Words of one text in two languages with character spans and gold word alignment
    (``pairs``: (word index in a, word index in b))."""

    words_a: list[str]
    spans_a: list[tuple[int, int]]
    words_b: list[str]
    spans_b: list[tuple[int, int]]
    pairs: list[tuple[int, int]]

    @classmethod
    def from_dict(cls, d: dict) -> "AlignedText":
        return cls([str(w) for w in d["words_a"]], [tuple(s) for s in d["spans_a"]], [str(w) for w in d["words_b"]],
                   [tuple(s) for s in d["spans_b"]], [tuple(p) for p in d["pairs"]])

    def fits(self, text_a: str, text_b: str) -> bool:
        """Whether the words lie at their spans in these texts (a world file rewritten by
        another version of the generator would not): a misplaced alignment links wrong words."""
        def ok(words, spans, text):
            return all(0 <= a < b <= len(text) and text[a:b] == w for w, (a, b) in zip(words, spans)) and len(words) == len(spans)
        return ok(self.words_a, self.spans_a, text_a) and ok(self.words_b, self.spans_b, text_b) and all(
            0 <= i < len(self.words_a) and 0 <= j < len(self.words_b) for i, j in self.pairs)


def _ranks(values: list[float | None]) -> list[int | None]:
    """1 for the largest magnitude; None for words without a value."""
    order = sorted((i for i, v in enumerate(values) if v is not None), key=lambda i: -abs(values[i]))
    out: list[int | None] = [None] * len(values)
    for r, i in enumerate(order, 1):
        out[i] = r
    return out


def aligned_salience(sal_a: Salience, sal_b: Salience, question: AlignedText, context: AlignedText, k: int = 5,
                     target: str = "total") -> list[dict]:
    """The ``k`` words of A's input (question and context) with the largest salience magnitude
    under A's model, each with its gold-aligned word(s) in B's input and their salience under
    B's model: does B's model read the translated evidence A's model read?

    Word salience is the sum of its tokens' attributions; ``a share`` / ``b share`` divide by the
    largest word magnitude of that side (so the two models' scales compare); ranks count words of
    question and context together by magnitude (1 = most salient). Words without a gold
    translation (function words an L2 drops) are listed with no B word.
    """
    if k < 1:
        raise XlvizError(f"k must be at least 1, not {k}", field="k")
    sides = ((QUESTION, question), (CONTEXT, context))
    va = [(seg, i, w, v) for seg, t in sides
          for i, (w, v) in enumerate(zip(t.words_a, sal_a.words_salience(seg, t.spans_a, target)))]
    vb = {(seg, j): (t.words_b[j], v) for seg, t in sides
          for j, v in enumerate(sal_b.words_salience(seg, t.spans_b, target))}
    rank_a = dict(zip([(s, i) for s, i, _, _ in va], _ranks([v for *_, v in va])))
    keys_b = list(vb)
    rank_b = dict(zip(keys_b, _ranks([vb[key][1] for key in keys_b])))
    peak_a = max((abs(v) for *_, v in va if v is not None), default=0.0) or 1.0
    peak_b = max((abs(v) for _, v in vb.values() if v is not None), default=0.0) or 1.0
    links = {seg: {} for seg, _ in sides}
    for seg, t in sides:
        for i, j in t.pairs:
            links[seg].setdefault(i, []).append(j)
    top = sorted((x for x in va if x[3] is not None), key=lambda x: -abs(x[3]))[:k]
    rows = []
    for seg, i, word, v in top:
        js = [j for j in links[seg].get(i, []) if (seg, j) in vb]
        vals = [vb[(seg, j)][1] for j in js if vb[(seg, j)][1] is not None]
        b_value = float(sum(vals)) if vals else None
        b_ranks = [rank_b[(seg, j)] for j in js if rank_b[(seg, j)] is not None]
        rows.append({
            "where": seg, "a word": word, "a rank": rank_a[(seg, i)], "a salience": v, "a share": v / peak_a,
            "b word": " ".join(vb[(seg, j)][0] for j in js) or None, "b rank": min(b_ranks) if b_ranks else None,
            "b salience": b_value, "b share": b_value / peak_b if b_value is not None else None,
        })
    return rows
