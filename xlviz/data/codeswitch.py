"""Sentence-level code-switched QA training data (PPA's translate-train, Pan et al. 2021, §2.3).

Why: PPA fine-tunes translate-train with each L2 example replaced by two code-switched ones,
the L2 question with the L1 context and the L1 question with the L2 context (the L2-only pair
is not used; footnote 2), doubling the L2 data; the two stay next to each other so they share
a batch. A question and its context may then be in two languages that a disjoint joint
vocabulary reads with two tokenizers, so the features are built here, each half with its own
tokenizer, and mapped into the model's id space.

Answers always belong to the context, so each example keeps its context language's answer
(text and character offset), which the translate-train data tracks.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import torch

from xlviz.data.squad import squad_examples
from xlviz.errors import XlvizError


def codeswitch_examples(l1_data: dict, l2_data: dict, l1: str, l2: str) -> list[dict]:
    """For every question id: ``(l2 question, l1 context)`` then ``(l1 question, l2 context)``,
    as flat examples ``{id, question, context, answers, question_lang, context_lang}``."""
    first = {ex.id: ex for ex in squad_examples(l1_data)}
    second = {ex.id: ex for ex in squad_examples(l2_data)}
    if set(first) != set(second):
        raise XlvizError(f"the {l2} translate-train set has other question ids than the {l1} set", field="translate_train")
    out = []
    for qid, a in first.items():
        b = second[qid]
        out.append({**_flat(a), "id": f"{qid}-{l2}q-{l1}c", "question": b.question, "question_lang": l2, "context_lang": l1})
        out.append({**_flat(b), "id": f"{qid}-{l1}q-{l2}c", "question": a.question, "question_lang": l1, "context_lang": l2})
    return out


def monolingual_examples(data: dict, lang: str) -> list[dict]:
    """Examples of one language in the same flat form."""
    return [{**_flat(ex), "question_lang": lang, "context_lang": lang} for ex in squad_examples(data)]


def _flat(ex) -> dict:
    return {"id": ex.id, "question": ex.question, "context": ex.context, "answers": list(ex.answers)}


def mixed_train_features(examples: Sequence[dict], tokenizers: Mapping[str, object], to_model: Callable[[str, list[int]], list[int]],
                         max_length: int, doc_stride: int) -> list[dict]:
    """Training windows ``[CLS] question [SEP] context-window [SEP]`` with each half read by
    its language's tokenizer and mapped into the model's ids by ``to_model(lang, ids)``
    (identity for a shared vocabulary). Windows overlap by ``doc_stride`` context tokens as in
    :func:`xlviz.data.qa_features.prepare_train_features`; a window without the whole answer
    is labelled with [CLS] (0). Returns one dict of lists per window, plus its example index."""
    room_min = doc_stride + 1
    out = []
    for index, ex in enumerate(examples):
        tq, tc = tokenizers[ex["question_lang"]], tokenizers[ex["context_lang"]]
        cls, sep = to_model(ex["question_lang"], [tq.cls_token_id])[0], to_model(ex["question_lang"], [tq.sep_token_id])[0]
        question = to_model(ex["question_lang"], tq(ex["question"], add_special_tokens=False)["input_ids"])
        question = question[: max(0, max_length - 3 - room_min)]
        enc = tc(ex["context"], add_special_tokens=False, return_offsets_mapping=True)
        context, offsets = to_model(ex["context_lang"], enc["input_ids"]), enc["offset_mapping"]
        room = max_length - 3 - len(question)
        if room <= doc_stride:
            raise XlvizError(f"max_length {max_length} leaves no room for a context window over doc_stride {doc_stride}", field="qa_max_length")
        answer = ex["answers"][0] if ex["answers"] else None
        start = 0
        while True:
            window = range(start, min(start + room, len(context)))
            s = e = 0
            if answer is not None and len(window):
                lo, hi = answer["answer_start"], answer["answer_start"] + len(answer["text"])
                inside = [t for t in window if offsets[t][1] > lo and offsets[t][0] < hi]
                if inside and offsets[window[0]][0] <= lo and offsets[window[-1]][1] >= hi:
                    base = len(question) + 2 - window[0]
                    s, e = inside[0] + base, inside[-1] + base
            ids = [cls, *question, sep, *(context[t] for t in window), sep]
            out.append({"input_ids": ids, "token_type_ids": [0] * (len(question) + 2) + [1] * (len(window) + 1),
                        "start_positions": s, "end_positions": e, "example_index": index})
            if window.stop >= len(context):
                break
            start += room - doc_stride
    return out


def feature_tensors(features: Sequence[dict], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded tensors of a list of :func:`mixed_train_features` windows."""
    width = max(len(f["input_ids"]) for f in features)
    n = len(features)
    ids = torch.full((n, width), pad_id, dtype=torch.long)
    types = torch.zeros((n, width), dtype=torch.long)
    mask = torch.zeros((n, width), dtype=torch.long)
    for i, f in enumerate(features):
        k = len(f["input_ids"])
        ids[i, :k] = torch.tensor(f["input_ids"])
        types[i, :k] = torch.tensor(f["token_type_ids"])
        mask[i, :k] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types,
            "start_positions": torch.tensor([f["start_positions"] for f in features]),
            "end_positions": torch.tensor([f["end_positions"] for f in features])}


__all__ = ["codeswitch_examples", "monolingual_examples", "mixed_train_features", "feature_tensors"]
