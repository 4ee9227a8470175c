"""VECO's training data and objectives (Luo et al. 2021, §2 and §4 "optimization settings").

Pre-training alternates, step by step, as the paper does:

- a **monolingual** batch of adjacent segments: packed blocks of ``2 * block_size - 2`` tokens
  cut into two ``block_size`` segments (x, y), each row's language drawn uniformly (L1 or the
  L2), trained with CA-MLM (Eq. 1): its self-stream terms are plain MLM on each segment, its
  cross-stream terms predict x's masked tokens attending over y and the reverse;
- a **parallel** batch of translation pairs (x in L1, y in the L2), trained with TLM (the pair
  concatenated, ``[CLS] x [SEP] y [SEP]``, masked anew, positions continuing, no language
  embeddings, through the masked-only MLM path) + CA-MLM: "the overall training objective is
  the sum of TLM and the proposed CA-MLM objectives".

A batch holds ``mlm_batch_size`` segments (``mlm_batch_size // 2`` pairs), as many tokens as a
MONOTRANS / jointpair-disjoint MLM step, so the step budget compares; a VECO step costs more
(two streams; bench/bench_veco.py measures how much).

Plug-in QA (translate-train with bilingual inputs): every QA window of one language is paired
with the window of the same example, same window index (the last if it has fewer), in the
other language (:func:`paired_qa_features`).
"""

from __future__ import annotations

import random
from typing import Iterator, Sequence

import torch
from torch import nn
from torch.nn.utils.rnn import pad_sequence

from xlviz.data.qa_features import prepare_eval_features, prepare_train_features
from xlviz.data.squad import squad_examples
from xlviz.models.veco import VecoForMaskedLM
from xlviz.training.masking import RANDOM_SHARE
from xlviz.training.mlm import MaskedOnlyMLM, mask_tokens


def pad_rows(rows: Sequence[Sequence[int]], value: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded [B, L] ids and their 1/0 attention mask."""
    ids = pad_sequence([torch.tensor(r) for r in rows], batch_first=True, padding_value=value)
    mask = pad_sequence([torch.ones(len(r), dtype=torch.long) for r in rows], batch_first=True)
    return ids, mask


class VecoPretraining(nn.Module):
    """The pre-training loss of one batch: CA-MLM (Eq. 1, both directions) on (x, y), plus
    TLM when the batch carries ``tlm_*`` (parallel batches). TLM runs through
    :class:`MaskedOnlyMLM` (logits and last layer at masked rows only). ``monitor_loss``: the
    mean of the two self-stream terms (each sentence's masked LM on itself) of the last batch,
    the part of the summed objective comparable with a plain masked LM (the stage's verdict)."""

    def __init__(self, model: VecoForMaskedLM):
        super().__init__()
        self.model = model
        self.tlm = MaskedOnlyMLM(model)
        self.monitor_loss: torch.Tensor | None = None

    def forward(self, input_ids, attention_mask, labels, pair_input_ids, pair_attention_mask, pair_labels,
                tlm_input_ids=None, tlm_attention_mask=None, tlm_labels=None) -> torch.Tensor:
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, labels=labels, pair_input_ids=pair_input_ids,
                         pair_attention_mask=pair_attention_mask, pair_labels=pair_labels)
        self.monitor_loss = ((out.loss_terms["h_x"] + out.loss_terms["h_y"]) / 2).detach()
        loss = out.loss
        if tlm_input_ids is not None:
            loss = loss + self.tlm(tlm_input_ids, tlm_labels, tlm_attention_mask)
        return loss


def _mask(ids: torch.Tensor, attention: torch.Tensor, *, mask_id: int, vocab_size: int, prob: float, gen: torch.Generator,
          random_share: float = RANDOM_SHARE):
    inputs, labels = mask_tokens(ids, mask_id=mask_id, vocab_size=vocab_size, prob=prob, generator=gen, random_share=random_share)
    labels[attention == 0] = -100  # padding ([PAD] is special, never chosen; kept explicit)
    return inputs, labels


def pretrain_batches(mono: Iterator[torch.Tensor], pairs: Sequence[tuple[list[int], list[int]]], pair_batch: int, *,
                     mask_id: int, vocab_size: int, prob: float, seed: int, random_share: float = RANDOM_SHARE) -> Iterator[dict]:
    """Endless batches, monolingual and parallel in turn. ``mono`` yields [2 * pair_batch, 2 *
    block - 2] blocks (``[CLS] a b [SEP]``, joint ids), cut here into segments ``[CLS] a [SEP]``
    and ``[CLS] b [SEP]``; ``pairs`` are (x, y) joint ids with [CLS] ... [SEP] each."""
    gen = torch.Generator().manual_seed(seed)
    rng = random.Random(seed)
    order: list[int] = []
    step = 0
    while True:
        if step % 2 == 0:
            block = next(mono)
            rows = block.reshape(-1, block.size(-1))[:pair_batch]
            body = (rows.size(1) - 2) // 2
            cls, sep = rows[:, :1], rows[:, -1:]
            x = torch.cat([cls, rows[:, 1:1 + body], sep], 1)
            y = torch.cat([cls, rows[:, 1 + body:1 + 2 * body], sep], 1)
            xm, ym = torch.ones_like(x), torch.ones_like(y)
            tlm = None
        else:
            if len(order) < pair_batch:
                fresh = list(range(len(pairs)))
                rng.shuffle(fresh)
                order += fresh
            take, order = order[:pair_batch], order[pair_batch:]
            x, xm = pad_rows([pairs[i][0] for i in take])
            y, ym = pad_rows([pairs[i][1] for i in take])
            tlm = pad_rows([pairs[i][0] + pairs[i][1][1:] for i in take])  # [CLS] x [SEP] y [SEP]
        xi, xl = _mask(x, xm, mask_id=mask_id, vocab_size=vocab_size, prob=prob, gen=gen, random_share=random_share)
        yi, yl = _mask(y, ym, mask_id=mask_id, vocab_size=vocab_size, prob=prob, gen=gen, random_share=random_share)
        batch = {"input_ids": xi, "attention_mask": xm, "labels": xl, "pair_input_ids": yi, "pair_attention_mask": ym, "pair_labels": yl}
        if tlm is not None:
            ti, tl = _mask(tlm[0], tlm[1], mask_id=mask_id, vocab_size=vocab_size, prob=prob, gen=gen, random_share=random_share)
            batch.update(tlm_input_ids=ti, tlm_attention_mask=tlm[1], tlm_labels=tl)
        step += 1
        yield batch


# --------------------------------------------------------------------------- plug-in QA data
def _to_joint(vocab, lang: str, feats: dict) -> dict:
    return {**feats, "input_ids": [vocab.to_joint(lang, ids) for ids in feats["input_ids"]]}


def partners(own_index: Sequence[int], other_index: Sequence[int]) -> list[int]:
    """For each window (by example index) of one side, the other side's window of the same
    example with the same window number, or that example's last window."""
    windows: dict[int, list[int]] = {}
    for f, ex in enumerate(other_index):
        windows.setdefault(ex, []).append(f)
    seen: dict[int, int] = {}
    out = []
    for ex in own_index:
        k = seen.get(ex, 0)
        seen[ex] = k + 1
        ws = windows[ex]
        out.append(ws[min(k, len(ws) - 1)])
    return out


def paired_qa_features(x_data: dict, y_data: dict, x_tok, y_tok, vocab, x_lang: str, y_lang: str, max_length: int,
                       doc_stride: int, train: bool = True) -> dict[str, torch.Tensor]:
    """QA windows of ``x_data`` (SQuAD JSON in ``x_lang``; training windows with answer
    positions if ``train``) each paired with the ``y_lang`` window of the same example (same
    question id; the example lists must be parallel), in joint ids: tensors ``input_ids``,
    ``attention_mask``, ``token_type_ids``, ``pair_*`` (and ``start/end_positions``)."""
    x_ex, y_ex = squad_examples(x_data), squad_examples(y_data)
    if [e["id"] if isinstance(e, dict) else e.id for e in x_ex] != [e["id"] if isinstance(e, dict) else e.id for e in y_ex]:
        from xlviz.errors import XlvizError

        raise XlvizError(f"the {x_lang} and {y_lang} QA sets do not hold the same question ids in the same order", field="qa")
    prepare = prepare_train_features if train else prepare_eval_features
    xf = _to_joint(vocab, x_lang, prepare(x_tok, x_ex, max_length, doc_stride))
    yf = _to_joint(vocab, y_lang, prepare_eval_features(y_tok, y_ex, max_length=max_length, doc_stride=doc_stride))
    match = partners(xf["example_index"], yf["example_index"])
    out = {k: torch.tensor(xf[k], dtype=torch.long) for k in ("input_ids", "attention_mask", "token_type_ids")}
    for k in ("input_ids", "attention_mask", "token_type_ids"):
        out[f"pair_{k}"] = torch.tensor([yf[k][j] for j in match], dtype=torch.long)
    if train:
        out["start_positions"] = torch.tensor(xf["start_positions"], dtype=torch.long)
        out["end_positions"] = torch.tensor(xf["end_positions"], dtype=torch.long)
    return out


def trim(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Cut a padded paired batch to its longest row on each side."""
    w = int(batch["attention_mask"].sum(1).max())
    pw = int(batch["pair_attention_mask"].sum(1).max())
    return {k: (v[:, :pw] if k.startswith("pair_") else v[:, :w]) if v.ndim == 2 else v for k, v in batch.items()}


class PairedQA(nn.Module):
    """A plug-in QA model as the run's scorer calls it (``model(input_ids, attention_mask,
    token_type_ids)`` on one language's windows, that language's own ids): each window is
    mapped to joint ids and read with its paired window (the same test question's context in
    L1), looked up by the window's ids. Why a lookup: the scorer (``predict_qa``) is shared by
    every system and builds the windows itself; the paired windows are built here with the
    same tokenizer and stride, so every window it sends is found."""

    def __init__(self, model: nn.Module, table: dict[tuple[int, ...], dict[str, torch.Tensor]], vocab, lang: str):
        super().__init__()
        self.model, self.table, self.vocab, self.lang = model, table, vocab, lang

    @classmethod
    def build(cls, model, x_data: dict, y_data: dict, x_tok, y_tok, vocab, x_lang: str, y_lang: str, max_length: int, doc_stride: int):
        feats = paired_qa_features(x_data, y_data, x_tok, y_tok, vocab, x_lang, y_lang, max_length, doc_stride, train=False)
        table = {}
        for i in range(len(feats["input_ids"])):
            ids = feats["input_ids"][i][feats["attention_mask"][i].bool()]
            table[tuple(ids.tolist())] = {k[5:]: feats[k][i] for k in feats if k.startswith("pair_")}
        return cls(model, table, vocab, x_lang)

    @property
    def device(self):
        return next(self.model.parameters()).device

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        attention_mask = torch.ones_like(input_ids) if attention_mask is None else attention_mask
        joint = self.vocab.to_joint(self.lang, input_ids.cpu())
        rows = [self.table[tuple(joint[i][attention_mask[i].bool().cpu()].tolist())] for i in range(len(joint))]
        pair = {k: torch.stack([r[k] for r in rows]).to(input_ids.device) for k in rows[0]}
        width = int(pair["attention_mask"].sum(1).max())
        return self.model(input_ids=joint.to(input_ids.device), attention_mask=attention_mask, token_type_ids=token_type_ids,
                          **{f"pair_{k}": v[:, :width] for k, v in pair.items()})

    def save_pretrained(self, path, **kwargs):
        """The VECO QA model cut to this language's rows (its tokenizer's ids; cross-attention
        in; registered type): what the export folder's tokenizer reads."""
        from xlviz.models.vocab_slice import slice_to_language

        return slice_to_language(self.model, self.vocab, self.lang).save_pretrained(path, **kwargs)
