"""Per-layer sentence and word vectors on tiny random BERT, RoBERTa, DistilBERT and ELECTRA."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers, processors
from transformers import (
    BertConfig,
    BertForMaskedLM,
    BertTokenizer,
    DistilBertConfig,
    DistilBertModel,
    DistilBertTokenizer,
    ElectraConfig,
    ElectraModel,
    PreTrainedTokenizerFast,
    RobertaConfig,
    RobertaModel,
    RobertaTokenizer,
)

from xlviz.analysis.representations import sentence_and_word_embeddings, sentence_embeddings, word_embeddings_in_context
from xlviz.errors import XlvizError

WORDS = "the cat sat on mat a dog ran le chat est assis sur tapis un chien".split()
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
HIDDEN, LAYERS, HEADS = 16, 2, 2


def _wordpiece_vocab() -> dict[str, int]:
    return {t: i for i, t in enumerate(SPECIALS + WORDS + ["##s", "##e"])}  # "cats" -> cat ##s


def _roberta_tokenizer() -> RobertaTokenizer:
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "<mask>": 4}
    for ch in "abcdefghijklmnopqrstuvwxyzĠ":
        vocab[ch] = len(vocab)
    merges = [("Ġ", "t"), ("Ġt", "h"), ("Ġth", "e"), ("Ġ", "c"), ("Ġc", "a"), ("Ġca", "t")]
    for a, b in merges:
        vocab[a + b] = len(vocab)
    return RobertaTokenizer(vocab=vocab, merges=merges, add_prefix_space=True)


def _wordlevel_tokenizer() -> PreTrainedTokenizerFast:
    vocab = {t: i for i, t in enumerate(SPECIALS + WORDS)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]"
    )


def tiny_encoders(attn_implementation: str | None = None) -> dict:
    """name -> (model, tokenizer): random 2-layer, 16-wide encoders with 40 positions."""
    torch.manual_seed(0)
    kw = {} if attn_implementation is None else {"attn_implementation": attn_implementation}
    small = dict(hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS, intermediate_size=32)
    out = {}
    bert_tok = BertTokenizer(vocab=_wordpiece_vocab())
    out["bert"] = (BertForMaskedLM._from_config(BertConfig(vocab_size=len(bert_tok), max_position_embeddings=40, **small), **kw), bert_tok)
    rob_tok = _roberta_tokenizer()
    rob_cfg = RobertaConfig(vocab_size=len(rob_tok), max_position_embeddings=42, pad_token_id=1, type_vocab_size=1, **small)
    out["roberta"] = (RobertaModel._from_config(rob_cfg, **kw), rob_tok)
    dis_tok = DistilBertTokenizer(vocab=_wordpiece_vocab())
    dis_cfg = DistilBertConfig(vocab_size=len(dis_tok), dim=HIDDEN, n_layers=LAYERS, n_heads=HEADS, hidden_dim=32, max_position_embeddings=40)
    out["distilbert"] = (DistilBertModel._from_config(dis_cfg, **kw), dis_tok)
    el_tok = _wordlevel_tokenizer()
    el_cfg = ElectraConfig(vocab_size=len(el_tok), embedding_size=8, max_position_embeddings=40, **small)
    out["electra"] = (ElectraModel._from_config(el_cfg, **kw), el_tok)
    return out


ENCODERS = tiny_encoders()
SENTS = ["the cats sat on the mat", "a dog ran", "le chat est assis sur le tapis", ""]


def _hidden(model, tokenizer, text, **kw):
    enc = tokenizer(text, return_tensors="pt", **kw)
    base = model.base_model
    inputs = {k: v for k, v in enc.items() if k in ("input_ids", "attention_mask")}
    with torch.no_grad():
        hs = base(**inputs, output_hidden_states=True).hidden_states
    return torch.stack(hs)[:, 0].numpy(), enc


@pytest.mark.parametrize("name", list(ENCODERS))
def test_sentence_embeddings_shapes_and_padding(name):
    model, tok = ENCODERS[name]
    calls = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the empty sentence falls back for mean_no_special
        for pooling in ("mean", "mean_no_special", "cls"):
            E = sentence_embeddings(model, tok, SENTS, pooling=pooling, batch_size=3, progress=lambda d, t: calls.append((d, t)))
            assert E.shape == (LAYERS + 1, len(SENTS), HIDDEN) and E.dtype == np.float32
            assert np.all(np.isfinite(E))
            # one sentence at a time (no padding) gives the same vectors, in the same order
            E1 = sentence_embeddings(model, tok, SENTS, pooling=pooling, batch_size=1)
            assert np.allclose(E, E1, atol=1e-5)
    assert calls[:2] == [(3, 4), (4, 4)]


@pytest.mark.parametrize("name", list(ENCODERS))
def test_pooling_matches_hand_computation(name):
    model, tok = ENCODERS[name]
    text = SENTS[0]
    H, enc = _hidden(model, tok, text, return_special_tokens_mask=True)
    special = enc["special_tokens_mask"][0].numpy().astype(bool)
    assert special[0] and special[-1] and not special[1:-1].any()
    E = {p: sentence_embeddings(model, tok, [text], pooling=p)[:, 0] for p in ("mean", "mean_no_special", "cls")}
    assert np.allclose(E["mean"], H.mean(axis=1), atol=1e-5)
    assert np.allclose(E["mean_no_special"], H[:, 1:-1].mean(axis=1), atol=1e-5)
    assert np.allclose(E["cls"], H[:, 0], atol=1e-5)


def test_truncation_and_position_limit():
    model, tok = ENCODERS["roberta"]
    long = " ".join(["the cat"] * 60)  # far more tokens than the 40 positions
    E = sentence_embeddings(model, tok, [long, "a dog"])  # default max_length=128 is capped, no crash
    assert E.shape == (LAYERS + 1, 2, HIDDEN) and np.all(np.isfinite(E))
    E8 = sentence_embeddings(model, tok, [long], max_length=8, pooling="cls")
    assert E8.shape == (LAYERS + 1, 1, HIDDEN)


def test_bad_input():
    model, tok = ENCODERS["bert"]
    with pytest.raises(XlvizError, match="pooling"):
        sentence_embeddings(model, tok, ["a"], pooling="max")
    with pytest.raises(XlvizError):
        sentence_embeddings(model, tok, [["a", "dog"]])
    assert sentence_embeddings(model, tok, []).shape == (LAYERS + 1, 0, HIDDEN)
    rob_model, _ = ENCODERS["roberta"]
    big_tok = BertTokenizer(vocab={**_wordpiece_vocab(), **{f"w{i}": 100 + i for i in range(60)}})
    with pytest.raises(XlvizError, match="does not belong"):
        sentence_embeddings(rob_model, big_tok, ["w59"])


@pytest.mark.parametrize("name", list(ENCODERS))
def test_word_embeddings_average_subwords(name):
    model, tok = ENCODERS[name]
    sents = [["the", "cats", "sat"], ["le", "chat"], []]
    layers = word_embeddings_in_context(model, tok, sents, batch_size=2)
    assert len(layers) == LAYERS + 1
    for per_sent in layers:
        assert [v.shape for v in per_sent] == [(3, HIDDEN), (2, HIDDEN), (0, HIDDEN)]
        assert all(v.dtype == np.float32 and np.all(np.isfinite(v)) for v in per_sent)
    H, enc = _hidden(model, tok, sents[0], is_split_into_words=True)
    wids = enc.word_ids(0)
    for w in range(3):
        toks = [t for t, x in enumerate(wids) if x == w]
        assert toks, "every word has at least one token"
        for layer in range(LAYERS + 1):
            assert np.allclose(layers[layer][0][w], H[layer, toks].mean(axis=0), atol=1e-5)
    if name in ("bert", "distilbert"):
        assert len([x for x in wids if x == 1]) == 2  # "cats" -> cat ##s really was averaged


@pytest.mark.parametrize("name", list(ENCODERS))
def test_one_pass_gives_the_sentence_and_word_vectors_of_two(name, monkeypatch):
    """One forward pass for both the sentence and the word vectors, equal to the two calls; words
    that do not tokenize as their sentence (or a sentence without words) fall back to two calls."""
    from xlviz.analysis import representations as rep

    model, tok = ENCODERS[name]
    words = [["the", "cats", "sat", "on", "the", "mat"], ["a", "dog", "ran"], ["le", "chat", "est", "assis"], ["a"]] * 3
    sents = [" ".join(w) for w in words]
    calls = []
    forward = type(model.base_model).forward
    monkeypatch.setattr(type(model.base_model), "forward", lambda self, *a, **k: calls.append(1) or forward(self, *a, **k))
    for pooling in ("mean", "mean_no_special", "cls"):
        calls.clear()
        E, W = sentence_and_word_embeddings(model, tok, sents, words, pooling=pooling, batch_size=5, max_length=8)
        assert len(calls) == 3, "one forward pass per batch, not two"
        calls.clear()
        E2 = sentence_embeddings(model, tok, sents, pooling=pooling, batch_size=5, max_length=8)
        W2 = word_embeddings_in_context(model, tok, words, batch_size=5, max_length=8)
        assert len(calls) == 6
        assert np.array_equal(E, E2)
        assert len(W) == len(W2) == LAYERS + 1
        assert all(np.array_equal(a, b, equal_nan=True) for la, lb in zip(W, W2) for a, b in zip(la, lb))
    other = [["a", "dog"]] + words[1:]  # the first sentence's words are not its text: two passes
    calls.clear()
    E, W = sentence_and_word_embeddings(model, tok, sents, other, batch_size=5)
    assert len(calls) == 6
    assert np.array_equal(E, sentence_embeddings(model, tok, sents, batch_size=5)) and W[0][0].shape == (2, HIDDEN)
    calls.clear()
    sentence_and_word_embeddings(model, tok, sents[:2] + [""], words[:2] + [[]])
    assert len(calls) == 2


def test_word_embeddings_truncation_gives_nan_rows():
    model, tok = ENCODERS["bert"]
    sent = ["the", "cat", "sat", "on", "the", "mat", "a", "dog"]
    with pytest.warns(UserWarning, match="no tokens"):
        layers, missing = word_embeddings_in_context(model, tok, [sent, ["a"]], max_length=6, return_missing=True)
    # [CLS] + 4 words + [SEP] = 6 tokens
    assert missing == [[4, 5, 6, 7], []]
    v = layers[-1][0]
    assert np.all(np.isfinite(v[:4])) and np.all(np.isnan(v[4:]))
    with pytest.raises(XlvizError):
        word_embeddings_in_context(model, tok, ["not pre-split"])


def test_sdpa_and_eager_give_same_hidden_states():
    eager = tiny_encoders("eager")["electra"]
    default = ENCODERS["electra"]
    a = sentence_embeddings(*eager, SENTS[:3])
    b = sentence_embeddings(*default, SENTS[:3])
    assert np.allclose(a, b, atol=1e-5)
