"""MONOTRANS steps 2-4 on tiny saved models of every architecture (BERT, RoBERTa, XLM-R,
DistilBERT, ELECTRA generator), then attention, alignment and QA prediction on the results,
all through the same loading path users take (save_pretrained folders + load_model)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from xlviz.analysis.alignment import layerwise_alignment
from xlviz.analysis.attention import attention_maps
from xlviz.analysis.representations import sentence_embeddings
from xlviz.data.squad import QAExample
from xlviz.data.vocabulary import special_ids_of, special_row_map, train_tokenizer_like
from xlviz.errors import XlvizError
from xlviz.evaluation.qa_predict import predict_qa
from xlviz.models.loading import load_model
from xlviz.models.floor import make_l2_mlm
from xlviz.models.monotrans import (
    add_embedding_noise, drop_cls_position_and_segment, fold_cls_position, freeze_for_step2, freeze_for_step3,
    qa_from_mlm, zero_shot_model,
)
from xlviz.models.surgery import MaskedOnlyLoss, names_of, output_layer, word_embeddings

try:
    from tiny_models import ARCHS, make_tiny
except ImportError:
    from tests.tiny_models import ARCHS, make_tiny

L2_TEXTS = [
    "der hund sitzt auf der matte", "eine katze ist klein und rot", "die katzen sind im haus",
    "ein mann liest ein buch", "die frau sitzt im garten", "zwei hunde laufen am fluss",
] * 20
EN = ["the dog sat on the mat", "a cat is small and red", "the cats are in the house", "a man reads a book"]
DE = ["der hund sitzt auf der matte", "eine katze ist klein und rot", "die katzen sind im haus", "ein mann liest ein buch"]


@pytest.fixture(scope="module")
def l1_folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("archs")
    return {arch: make_tiny(arch, root / arch, task="mlm") for arch in ARCHS}


def _mlm_step(model, tok, n=2, lr=0.5):
    g = torch.Generator().manual_seed(0)
    ids = torch.tensor([tok(t, truncation=True, max_length=16, padding="max_length")["input_ids"] for t in DE])
    labels = torch.full_like(ids, -100)
    special = torch.tensor(special_ids_of(tok))
    cand = ~torch.isin(ids, special)
    chosen = cand & (torch.rand(ids.shape, generator=g) < 0.5)
    chosen[:, 1] = True
    labels[chosen] = ids[chosen]
    inputs = ids.clone()
    inputs[chosen] = tok.mask_token_id
    loss_fn = MaskedOnlyLoss(model)
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=lr)
    for _ in range(n):
        loss = loss_fn(input_ids=inputs, labels=labels, attention_mask=(ids != tok.pad_token_id).long())
        loss.backward()
        opt.step()
        opt.zero_grad()
    return float(loss.detach())


@pytest.mark.parametrize("arch", ARCHS)
def test_monotrans_steps_on_every_architecture(arch, l1_folders, tmp_path):
    l1, l1_tok = load_model(l1_folders[arch], task="mlm")
    l2_tok = train_tokenizer_like(L2_TEXTS, 90, l1_tok)
    assert l2_tok.pad_token_id == l1_tok.pad_token_id, "RoBERTa positions depend on the padding id"
    rows = special_row_map(l1_tok, l2_tok)
    assert l2_tok.convert_ids_to_tokens(list(rows)) == l1_tok.convert_ids_to_tokens(list(rows.values()))

    # step 2: new vocabulary, body frozen, special rows shared and frozen
    l2 = make_l2_mlm(l1, len(l2_tok), seed=1, special_rows=rows)
    assert type(l2) is type(l1) and l2.config.vocab_size == len(l2_tok)
    assert output_layer(l2).weight is word_embeddings(l2).weight, "MLM decoder tied to the L2 embeddings"
    for l2_id, l1_id in rows.items():
        assert torch.equal(word_embeddings(l2).weight[l2_id], word_embeddings(l1).weight[l1_id])
    trainable = freeze_for_step2(l2, special_ids=special_ids_of(l2_tok))
    emb_name = names_of(l2, word_embeddings(l2).weight)[0]
    assert emb_name in trainable and len(trainable) == 2, trainable  # embeddings + output bias
    before = {n: p.detach().clone() for n, p in l2.named_parameters()}
    _mlm_step(l2, l2_tok)
    after = dict(l2.named_parameters())
    changed = {n for n in before if not torch.equal(before[n], after[n])}
    assert changed == set(trainable), changed
    special = special_ids_of(l2_tok)
    assert torch.equal(before[emb_name][special], after[emb_name][special])
    l1_state = dict(l1.named_parameters())
    for n in before:
        if n not in trainable:
            assert torch.equal(after[n], l1_state[n]), f"{n}: the body must stay L1's"

    # saved like a stage folder, reloaded by the app's loader with the L2 tokenizer
    l2_dir = tmp_path / "s2"
    l2.save_pretrained(l2_dir)
    l2_tok.save_pretrained(l2_dir)
    l2_loaded, tok_loaded = load_model(l2_dir, task="mlm")
    assert torch.equal(word_embeddings(l2_loaded).weight, word_embeddings(l2).weight)

    # attention and alignment views on the transferred model
    att = attention_maps(l2_loaded, tok_loaded, DE[0], DE[1])
    assert att.attentions.shape[0] == l1.config.num_hidden_layers  # DistilBERT maps n_layers to this name
    assert np.allclose(att.attentions.sum(-1), 1.0, atol=1e-4)
    en_emb = sentence_embeddings(l1, l1_tok, EN, pooling="mean_no_special")
    de_emb = sentence_embeddings(l2_loaded, tok_loaded, DE, pooling="mean_no_special")
    rows_al = layerwise_alignment(en_emb, de_emb, center=True)
    assert len(rows_al) == en_emb.shape[0] and all(0 <= r["retrieval_a_to_b"] <= 1 for r in rows_al)

    # step 3: QA head on the L1 body, L1 token embeddings frozen except the special rows
    qa = qa_from_mlm(l1, seed=0)
    trainable3 = freeze_for_step3(qa, special_ids=special_ids_of(l1_tok))
    assert any("qa_outputs" in n for n in trainable3)
    hooks = add_embedding_noise(qa) + drop_cls_position_and_segment(qa)
    enc = l1_tok(["who sat on the mat"] * 2, EN[:2], padding="max_length", max_length=24, truncation=True, return_tensors="pt")
    inputs = {k: v for k, v in enc.items() if k in l1_tok.model_input_names}
    qa.train()
    before3 = word_embeddings(qa).weight.detach().clone()
    out = qa(**inputs, start_positions=torch.tensor([8, 9]), end_positions=torch.tensor([9, 10]))
    out.loss.backward()
    torch.optim.SGD([p for p in qa.parameters() if p.requires_grad], lr=0.5).step()
    for h in hooks:
        h.remove()
    fold_cls_position(qa)
    after3 = word_embeddings(qa).weight.detach()
    l1_special = special_ids_of(l1_tok)
    others = [i for i in range(after3.shape[0]) if i not in l1_special]
    assert torch.equal(before3[others], after3[others]), "L1 token embeddings frozen in step 3"

    # step 4: zero-shot model in L2, exported and reloaded as a plain QA model
    zs = zero_shot_model(qa, l2, special_rows=rows)
    for l2_id, l1_id in rows.items():
        assert torch.equal(word_embeddings(zs).weight[l2_id], after3[l1_id])
    zs_dir = tmp_path / "export"
    zs.save_pretrained(zs_dir)
    l2_tok.save_pretrained(zs_dir)
    zs_loaded, zs_tok = load_model(zs_dir, task="qa")
    assert type(zs_loaded).__name__ == type(qa).__name__
    ex = [QAExample(id="q1", title="", context=DE[0] + ". " + DE[1], question="wo sitzt der hund", answers=[{"text": "matte", "answer_start": 23}])]
    pred = predict_qa(zs_loaded, zs_tok, ex, max_length=32, doc_stride=8)
    assert pred["q1"]["text"] == ex[0].context[pred["q1"]["start"]:pred["q1"]["end"]]


def test_models_without_mlm_head_are_refused_clearly(tmp_path):
    from transformers import AutoModelForPreTraining

    disc = AutoModelForPreTraining.from_pretrained(make_tiny("electra", tmp_path / "d", task="pretraining"), use_safetensors=True)
    with pytest.raises(XlvizError, match="no masked-LM head.*ELECTRA discriminator"):
        make_l2_mlm(disc, 50, seed=0)
    with pytest.raises(XlvizError, match="no masked-LM head"):
        MaskedOnlyLoss(disc)
    qa, _ = load_model(make_tiny("roberta", tmp_path / "q", task="qa"), task="qa")
    with pytest.raises(XlvizError, match="no masked-LM head"):
        freeze_for_step2(qa)


def test_pretrained_l1_with_other_special_ids(l1_folders):
    """An L1 whose special tokens sit elsewhere (an English BERT: [CLS]=101): rows follow roles."""
    from transformers import BertForMaskedLM

    from xlviz.data.tokenization import train_tokenizer

    l1, l1_tok = load_model(l1_folders["bert"], task="mlm")
    l2_tok = train_tokenizer(L2_TEXTS, 80)
    rows = {0: 7, 1: 8, 2: 9, 3: 10, 4: 11}  # as if L1's specials were at 7..11
    l2 = make_l2_mlm(l1, len(l2_tok), seed=0, special_rows=rows)
    assert isinstance(l2, BertForMaskedLM)
    assert torch.equal(word_embeddings(l2).weight[2], word_embeddings(l1).weight[9])
    with pytest.raises(XlvizError, match="do not fit"):
        make_l2_mlm(l1, len(l2_tok), seed=0, special_rows={0: 10_000})
