"""Patching across languages: where in the model an L2 run parts from the English one.

For one test question in English and in an L2 (the same facts; the world's gold word
alignment), run the system's English QA model and its L2 QA model; then run the L2 model again
with its hidden states at layer ``l`` and some aligned token positions replaced by the English
run's (forward hooks on the Hugging Face modules: no new model code), and measure how much of the
English answer's score comes back:

    score   = start logit at the answer's first token + end logit at its last token
    clean   = the L2 run's score of the L2 gold span (the English span mapped by alignment)
    english = the English run's score of the English gold span
    restored(l, group) = (patched − clean) / (english − clean)

1 means patching those states alone gives the L2 run the English run's answer score; 0 means
they change nothing. Positions are grouped (the question's words, the answer's words, the
answer sentence's verb, the rest; ``all``: every aligned position); layer 0 is the embeddings'
output, layer ``l`` the output of encoder layer ``l``. An L2 word split into a different number
of tokens than its English word takes the English tokens proportionally (the first L2 token the
first English one, ... the last the last); [CLS] and [SEP] are aligned with themselves.

Aggregates are ratios of means over questions (``sum(patched − clean) / sum(english − clean)``)
with a 95% interval resampling whole paragraphs; one seed's (the run's).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from xlviz.errors import XlvizError

GROUPS = ("question", "answer", "verb", "rest", "all")
REST = "rest"


# --------------------------------------------------------------------------- model plumbing
def layer_modules(model) -> list:
    """The modules whose outputs are ``hidden_states[0..L]``: the embeddings, then each encoder
    layer (BERT, RoBERTa, XLM-R, ELECTRA: ``encoder.layer``; DistilBERT: ``transformer.layer``);
    ELECTRA's first is its embeddings' projection to the hidden size."""
    from xlviz.models.surgery import base_encoder, embeddings_module

    base = base_encoder(model)
    # ELECTRA projects small embeddings up to the hidden size: hidden_states[0] is the projection's output
    first = getattr(base, "embeddings_project", None) or embeddings_module(model)
    for owner in ("encoder", "transformer"):
        layers = getattr(getattr(base, owner, None), "layer", None)
        if layers is not None:
            return [first, *layers]
    raise XlvizError(f"{type(model).__name__}: no encoder layers found to patch", field="model")


def _replace(output, rows, dst, values):
    """``output`` (a tensor or a tuple whose first item is the hidden states) with
    ``[rows, dst] = values``."""
    hidden = output[0] if isinstance(output, tuple) else output
    hidden = hidden.clone()
    hidden[rows, dst] = values.to(hidden.dtype)
    return (hidden, *output[1:]) if isinstance(output, tuple) else hidden


def qa_logits(model, inputs: dict, layer: int | None = None, patches: Sequence[tuple[list[int], list[int]]] = (),
              source=None):
    """Start and end logits ``[B, T]`` of ``model`` on ``inputs`` (batch of one, repeated to
    ``len(patches)`` rows when patching). ``patches[b] = (dst, src)``: row b's positions ``dst``
    at ``layer`` take ``source[src]`` (``source``: one layer's states ``[T_src, d]``)."""
    import torch

    handle = None
    if layer is not None and patches:
        n = len(patches)
        inputs = {k: v.expand(n, *v.shape[1:]) for k, v in inputs.items()}
        rows = torch.tensor([b for b, (dst, _) in enumerate(patches) for _ in dst], dtype=torch.long)
        dst = torch.tensor([d for d, _ in patches for d in d], dtype=torch.long)
        src = torch.tensor([s for _, s in patches for s in s], dtype=torch.long)
        values = source[src]
        handle = layer_modules(model)[layer].register_forward_hook(lambda m, a, out: _replace(out, rows, dst, values))
    try:
        with torch.no_grad():
            out = model(**inputs)
    finally:
        if handle is not None:
            handle.remove()
    return out.start_logits, out.end_logits


def hidden_and_logits(model, inputs: dict):
    """``(hidden states [L + 1, T, d], start logits [T], end logits [T])`` of one input."""
    import torch

    with torch.no_grad():
        out = model(**inputs, output_hidden_states=True)
    return torch.stack([h[0] for h in out.hidden_states]), out.start_logits[0], out.end_logits[0]


# --------------------------------------------------------------------------- tokens and words
@dataclass
class Encoded:
    """One (question, context) input: model inputs, each token's sequence (0 question, 1
    context, None special) and character offsets."""

    inputs: dict
    sequence: list
    offsets: list

    def tokens_of(self, seq: int, span: tuple[int, int]) -> list[int]:
        """Token positions of ``seq`` overlapping the character span."""
        s, e = span
        return [t for t, (q, (a, b)) in enumerate(zip(self.sequence, self.offsets)) if q == seq and b > s and a < e and b > a]

    def specials(self) -> list[int]:
        return [t for t, q in enumerate(self.sequence) if q is None and int(self.inputs["attention_mask"][0, t])]


def encode(tok, question: str, context: str, max_length: int = 512) -> Encoded | None:
    """The input the QA model reads, in one window; None when the context does not fit."""
    enc = tok(question, context, truncation="only_second", max_length=max_length, return_offsets_mapping=True,
              return_tensors="pt", return_overflowing_tokens=False)
    seq = enc.sequence_ids(0)
    offsets = [tuple(int(x) for x in o) for o in enc.pop("offset_mapping")[0]]
    last = max((b for q, (a, b) in zip(seq, offsets) if q == 1), default=0)
    if last < len(context.rstrip()):
        return None
    enc.pop("overflow_to_sample_mapping", None)
    return Encoded({k: v for k, v in enc.items()}, seq, offsets)


def token_map(en: Encoded, l2: Encoded, question_pairs, context_pairs) -> dict[int, int]:
    """``{L2 position: English position}`` from word pairs ``(en word span, l2 word span)`` of
    the question (sequence 0) and the context (sequence 1), plus the special tokens in order."""
    out: dict[int, int] = {}
    for seq, pairs in ((0, question_pairs), (1, context_pairs)):
        for span_a, span_b in pairs:
            ta, tb = en.tokens_of(seq, span_a), l2.tokens_of(seq, span_b)
            if ta and tb:
                for k, t in enumerate(tb):
                    out[t] = ta[k * len(ta) // len(tb)]
    for a, b in zip(en.specials(), l2.specials()):
        out[b] = a
    return out


# --------------------------------------------------------------------------- one question
@dataclass
class QuestionPatch:
    """One question's patching: ``patched[l][g]`` the L2 answer score with layer ``l``'s states of
    group ``g`` from English; ``clean`` and ``english`` the unpatched scores."""

    qid: str
    paragraph: str
    clean: float
    english: float
    patched: np.ndarray  # [layers + 1, len(GROUPS)]
    n_positions: dict = field(default_factory=dict)  # group -> patched positions

    def restored(self) -> np.ndarray:
        gap = self.english - self.clean
        return (self.patched - self.clean) / gap if gap else np.full_like(self.patched, np.nan)


def patch_question(en_model, l2_model, en: Encoded, l2: Encoded, tmap: dict[int, int], groups: dict[int, str],
                   en_answer: tuple[int, int], l2_answer: tuple[int, int], *, qid: str = "", paragraph: str = "",
                   layers: Sequence[int] | None = None) -> QuestionPatch:
    """Patch ``l2_model``'s run with ``en_model``'s states: every layer (or ``layers``) × group
    (``groups``: L2 position -> group; positions without one are "rest"). ``*_answer``: token
    positions of the gold span's first and last token in each run."""
    hidden, s_en, e_en = hidden_and_logits(en_model, en.inputs)
    english = float(s_en[en_answer[0]] + e_en[en_answer[1]])
    s0, e0 = qa_logits(l2_model, l2.inputs)
    clean = float(s0[0, l2_answer[0]] + e0[0, l2_answer[1]])
    n_layers = hidden.shape[0]
    chosen = list(range(n_layers)) if layers is None else list(layers)
    by_group = {g: sorted(t for t in tmap if g == "all" or groups.get(t, REST) == g) for g in GROUPS}
    patched = np.full((n_layers, len(GROUPS)), np.nan)
    live = [g for g in GROUPS if by_group[g]]
    for layer in chosen:
        patches = [(by_group[g], [tmap[t] for t in by_group[g]]) for g in live]
        s, e = qa_logits(l2_model, l2.inputs, layer, patches, hidden[layer])
        for row, g in enumerate(live):
            patched[layer, GROUPS.index(g)] = float(s[row, l2_answer[0]] + e[row, l2_answer[1]])
    for g in GROUPS:  # a group with no aligned position: patching it changes nothing
        if not by_group[g]:
            patched[chosen, GROUPS.index(g)] = clean
    return QuestionPatch(qid, paragraph, clean, english, patched, {g: len(by_group[g]) for g in GROUPS})


# --------------------------------------------------------------------------- the world's questions
def world_items(world, lang: str, limit: int | None = None) -> list[dict]:
    """The world's test questions in English and ``lang`` with what patching needs: texts, gold
    answer spans, aligned word spans and each L2 context word's group (the answer's words, the
    answer sentence's verb, the rest)."""
    from xlviz.data.world import render

    en_data, l2_data = world.qa("test", world.l1), world.qa("test", lang)
    align = world.qa_alignment("test", lang)

    def index(data):
        return {q["id"]: (q, p["context"], f"{ai}/{pi}") for ai, a in enumerate(data["data"])
                for pi, p in enumerate(a["paragraphs"]) for q in p["qas"]}

    en_q, l2_q = index(en_data), index(l2_data)
    items = []
    for p_idx, facts in enumerate(world.qa_facts("test")):
        slots = [(f_idx, slot) for f_idx, (c, _) in enumerate(facts) for _, slot in render(world.lang[lang], c).words]
        for f_idx, (_, questions) in enumerate(facts):
            for q in questions:
                qid = f"test-{p_idx:04d}-{f_idx}-{q.target}"
                a = align[qid]
                groups = []
                for fi, slot in slots:
                    if fi == f_idx and (slot == q.target or slot.startswith(q.target + "/")):
                        groups.append("answer")
                    elif fi == f_idx and slot == "verb":
                        groups.append("verb")
                    else:
                        groups.append(REST)
                qe, ce, para = en_q[qid]
                ql, cl, _ = l2_q[qid]
                items.append({
                    "id": qid, "paragraph": para,
                    "en": (qe["question"], ce, qe["answers"][0]), "l2": (ql["question"], cl, ql["answers"][0]),
                    "question_pairs": [(a["question"]["spans_a"][i], a["question"]["spans_b"][j]) for i, j in a["question"]["pairs"]],
                    "context_pairs": [(a["context"]["spans_a"][i], a["context"]["spans_b"][j]) for i, j in a["context"]["pairs"]],
                    "context_spans_b": a["context"]["spans_b"], "context_groups": groups,
                })
                if limit is not None and len(items) >= limit:
                    return items
    return items


def _answer_tokens(enc: Encoded, answer: dict) -> tuple[int, int] | None:
    start = int(answer["answer_start"])
    toks = enc.tokens_of(1, (start, start + len(answer["text"])))
    return (toks[0], toks[-1]) if toks else None


def patch_items(en_model, en_tok, l2_model, l2_tok, items: Sequence[dict], *, max_length: int = 512,
                layers: Sequence[int] | None = None) -> tuple[list[QuestionPatch], int]:
    """:func:`patch_question` on each of :func:`world_items`; returns the patches and how many
    questions could not be patched (context longer than one window, an answer with no token)."""
    out, skipped = [], 0
    for it in items:
        (qa_, ca, ans_a), (qb, cb, ans_b) = it["en"], it["l2"]
        en, l2 = encode(en_tok, qa_, ca, max_length), encode(l2_tok, qb, cb, max_length)
        if en is None or l2 is None:
            skipped += 1
            continue
        sa, sb = _answer_tokens(en, ans_a), _answer_tokens(l2, ans_b)
        if sa is None or sb is None:
            skipped += 1
            continue
        tmap = token_map(en, l2, it["question_pairs"], it["context_pairs"])
        groups = {t: "question" for t, q in enumerate(l2.sequence) if q == 0}
        for span, g in zip(it["context_spans_b"], it["context_groups"]):
            for t in l2.tokens_of(1, span):
                groups[t] = g
        out.append(patch_question(en_model, l2_model, en, l2, tmap, groups, sa, sb, qid=it["id"], paragraph=it["paragraph"],
                                  layers=layers))
    return out, skipped


# --------------------------------------------------------------------------- over the test set
def aggregate(patches: Sequence[QuestionPatch], *, n_resamples: int = 1000, seed: int = 0, confidence: float = 0.95) -> list[dict]:
    """Per layer and group: the share of the English answer score restored, as a ratio of means
    over questions, with a 95% interval resampling whole paragraphs."""
    from xlviz.evaluation.uncertainty import cluster_codes, cluster_draws

    if not patches:
        raise XlvizError("no question could be patched", field="questions")
    gap = np.array([p.english - p.clean for p in patches])
    gain = np.stack([p.patched - p.clean for p in patches])  # [n, layers + 1, groups]
    codes, k = cluster_codes([p.paragraph for p in patches], len(patches))
    draws = cluster_draws(k, n_resamples, seed)
    gap_c = np.bincount(codes, weights=gap, minlength=k)
    tail = (1 - confidence) / 2
    rows = []
    for layer in range(gain.shape[1]):
        for gi, g in enumerate(GROUPS):
            x = gain[:, layer, gi]
            if np.isnan(x).any():
                continue
            gain_c = np.bincount(codes, weights=x, minlength=k)
            with np.errstate(divide="ignore", invalid="ignore"):  # a resample whose gap sums to 0 has no ratio
                ratios = gain_c[draws].sum(axis=1) / gap_c[draws].sum(axis=1)
            lo, hi = np.quantile(ratios[np.isfinite(ratios)], [tail, 1 - tail]) if np.isfinite(ratios).any() else (np.nan, np.nan)
            rows.append({"layer": layer, "group": g, "restored": round(float(x.sum() / gap.sum()), 4),
                         "low": round(float(lo), 4), "high": round(float(hi), 4), "n_questions": len(patches),
                         "n_paragraphs": k, "mean_gap": round(float(gap.mean()), 4)})
    return rows


__all__ = ["GROUPS", "layer_modules", "qa_logits", "hidden_and_logits", "Encoded", "encode", "token_map", "QuestionPatch",
           "patch_question", "world_items", "patch_items", "aggregate"]
