"""Attention maps of tiny random encoders, and attention shares on a hand-written matrix."""

from __future__ import annotations

import numpy as np
import pytest

from xlviz.analysis.attention import (
    AttentionResult,
    aligned_attention_share,
    attention_maps,
    attention_slice,
    cross_attention_share,
)
from xlviz.errors import XlvizError

try:  # tests/ on sys.path (pytest's default rootdir import mode)
    from test_representations import ENCODERS, LAYERS, HEADS, tiny_encoders
except ImportError:  # tests/ imported as a package
    from tests.test_representations import ENCODERS, LAYERS, HEADS, tiny_encoders

# ---------------------------------------------------------------- hand-written attention
#        0 [CLS]  1 x0  2 x1  3 [SEP]  4 y0  5 ##y0  6 [SEP]      (y0 has two sub-words)
HAND = np.array(
    [
        [0.40, 0.10, 0.10, 0.10, 0.10, 0.10, 0.10],
        [0.20, 0.30, 0.10, 0.00, 0.20, 0.20, 0.00],  # x0: to b 0.4, to content 0.8
        [0.10, 0.10, 0.40, 0.20, 0.10, 0.00, 0.10],  # x1: to b 0.1, to content 0.6
        [0.50, 0.00, 0.00, 0.50, 0.00, 0.00, 0.00],
        [0.00, 0.30, 0.10, 0.10, 0.20, 0.10, 0.20],  # y0: to a 0.4, to content 0.7
        [0.25, 0.25, 0.00, 0.00, 0.25, 0.25, 0.00],  # ##y0: to a 0.25, to content 0.75
        [0.00, 0.00, 0.00, 0.00, 0.00, 0.00, 1.00],
    ]
)


def hand_result() -> AttentionResult:
    """1 layer, 2 heads: head 0 = HAND, head 1 = every token attends only to itself."""
    return AttentionResult(
        tokens=["[CLS]", "x0", "x1", "[SEP]", "y0", "##y0", "[SEP]"],
        segment=[-1, 0, 0, -1, 1, 1, -1],
        word_ids=[None, 0, 1, None, 0, 0, None],
        attentions=np.stack([HAND, np.eye(7)])[None].astype(np.float32),
        truncated=False,
        n_tokens_before_truncation=7,
        n_words=(2, 1),
    )


def test_cross_attention_share_hand_computed():
    r = hand_result()
    raw = cross_attention_share(r, hide_special=False)
    assert raw.shape == (1, 2)
    assert raw[0, 0] == pytest.approx((0.4 + 0.1 + 0.4 + 0.25) / 4)  # 0.2875
    assert raw[0, 1] == 0.0
    renorm = cross_attention_share(r)  # hide_special=True by default
    # 0.4/0.8, 0.1/0.6, 0.4/0.7, 0.25/0.75 -> (1/2 + 1/6 + 4/7 + 1/3) / 4 = 11/28
    assert renorm[0, 0] == pytest.approx(11 / 28, rel=1e-6)


def test_aligned_attention_share_hand_computed():
    r = hand_result()
    # x0 <-> y0: a->b token x0 gives 0.4 to {y0, ##y0}; b->a y0 gives 0.3, ##y0 gives 0.25 to x0
    raw = aligned_attention_share(r, [(0, 0)], hide_special=False)
    assert raw.shape == (1, 2)
    assert raw[0, 0] == pytest.approx((0.4 + (0.3 + 0.25) / 2) / 2)  # 0.3375
    assert raw[0, 1] == 0.0
    renorm = aligned_attention_share(r, [(0, 0)])
    # a->b 0.4/0.8 = 1/2; b->a (0.3/0.7 + 0.25/0.75)/2 = 8/21  -> (1/2 + 8/21)/2 = 37/84
    assert renorm[0, 0] == pytest.approx(37 / 84, rel=1e-6)
    # one-to-many: y0 is aligned to x0 and x1
    # a->b: x0 0.4, x1 0.1 -> 0.25;  b->a to {x0, x1}: y0 0.4, ##y0 0.25 -> 0.325;  mean 0.2875
    both = aligned_attention_share(r, [(0, 0), (1, 0)], hide_special=False)
    assert both[0, 0] == pytest.approx(0.2875)


def test_share_errors():
    r = hand_result()
    with pytest.raises(XlvizError, match="out of range"):
        aligned_attention_share(r, [(0, 1)])
    with pytest.raises(XlvizError):
        aligned_attention_share(r, [])
    single = AttentionResult(["[CLS]", "x", "[SEP]"], [-1, 0, -1], [None, 0, None], np.ones((1, 1, 3, 3)) / 3, False, 3, (1, 0))
    with pytest.raises(XlvizError, match="text_b"):
        cross_attention_share(single)


def test_attention_slice():
    r = hand_result()
    s = attention_slice(r, layers=0, heads=[0], hide_special=True)
    assert s.tokens == ["x0", "x1", "y0", "##y0"]
    assert s.segment == [0, 0, 1, 1] and s.word_ids == [0, 1, 0, 0]
    assert s.attentions.shape == (1, 1, 4, 4)
    assert np.allclose(s.attentions[0, 0, 0], np.array([0.3, 0.1, 0.2, 0.2]) / 0.8)
    assert np.allclose(s.attentions.sum(-1), 1.0)
    full = attention_slice(r, average_heads=True)
    assert full.heads is None and full.attentions.shape == (1, 1, 7, 7)
    assert np.allclose(full.attentions[0, 0], (HAND + np.eye(7)) / 2)
    assert set(full.to_dict()) >= {"tokens", "attentions", "layers"}
    assert attention_slice(r, heads=-1).heads == [1]
    with pytest.raises(XlvizError, match="out of range"):
        attention_slice(r, layers=[3])


# ---------------------------------------------------------------- real (tiny random) models

EAGER = tiny_encoders("eager")
N_SPECIAL_PAIR = {"bert": 3, "distilbert": 3, "electra": 3, "roberta": 4}  # roberta: <s> a </s></s> b </s>


@pytest.mark.parametrize("name", list(EAGER))
def test_attention_maps_pair(name):
    model, tok = EAGER[name]
    r = attention_maps(model, tok, "the cats sat", "le chat est assis")
    T = len(r.tokens)
    assert r.attentions.shape == (LAYERS, HEADS, T, T) and r.attentions.dtype == np.float32
    assert np.allclose(r.attentions.sum(-1), 1.0, atol=1e-5)
    assert len(r.segment) == len(r.word_ids) == T
    assert r.segment.count(-1) == N_SPECIAL_PAIR[name]
    content = [s for s in r.segment if s != -1]
    assert content == sorted(content) and set(content) == {0, 1}
    assert r.segment[0] == -1 and r.segment[-1] == -1
    assert not r.truncated and r.n_tokens_before_truncation == T
    assert r.n_words == (3, 4)
    b_words = [w for s, w in zip(r.segment, r.word_ids) if s == 1]
    assert b_words[0] == 0 and max(b_words) == 3
    for share in (cross_attention_share(r), aligned_attention_share(r, [(0, 0), (1, 1), (2, 3)])):
        assert share.shape == (LAYERS, HEADS)
        assert np.all((share >= 0) & (share <= 1))


@pytest.mark.parametrize("name", list(EAGER))
def test_attention_maps_pre_split_and_truncation(name):
    model, tok = EAGER[name]
    r = attention_maps(model, tok, ["the", "cats"], ["le", "chat", "est"])
    assert r.n_words == (2, 3)
    a_words = [w for s, w in zip(r.segment, r.word_ids) if s == 0]
    assert sorted(set(a_words)) == [0, 1]
    single = attention_maps(model, tok, "a dog ran")
    assert set(single.segment) == {-1, 0}
    long_a = " ".join(["the cat sat on the mat"] * 6)
    t = attention_maps(model, tok, long_a, "un chien", max_length=12)
    assert t.truncated and len(t.tokens) == 12 and t.n_tokens_before_truncation > 12
    assert 1 in t.segment  # longest_first cut sentence a, b survives
    assert np.allclose(t.attentions.sum(-1), 1.0, atol=1e-5)
    # default max_length (128) is capped to the model's 40 positions instead of crashing
    assert len(attention_maps(model, tok, long_a * 3).tokens) <= 40


def test_attention_maps_needs_eager():
    model, tok = ENCODERS["bert"]  # default (sdpa) attention
    with pytest.raises(XlvizError, match="eager"):
        attention_maps(model, tok, "the cat")
    model, tok = EAGER["bert"]
    with pytest.raises(XlvizError, match="both"):
        attention_maps(model, tok, ["the", "cat"], "le chat")


def test_mixed_pair_attention_through_a_transferred_body():
    """An L1 sentence and its L2 translation fed as one input with per-language embeddings."""
    import torch
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast
    from tokenizers import Tokenizer, models, pre_tokenizers

    from xlviz.analysis.attention import aligned_attention_share, cross_attention_share, mixed_pair_attention_maps

    def tok(words):
        vocab = {w: i for i, w in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words)}
        t = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
        t.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
        return PreTrainedTokenizerFast(tokenizer_object=t, unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]", mask_token="[MASK]")

    tok_a, tok_b = tok(["the", "dog", "runs"]), tok(["ma", "kobu", "tira", "zo"])
    torch.manual_seed(0)
    model = BertModel(BertConfig(vocab_size=8, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32), add_pooling_layer=False)
    model.config._attn_implementation = "eager"
    emb_b = torch.nn.Embedding(9, 16)
    res = mixed_pair_attention_maps(model, tok_a, tok_b, emb_b, ["the", "dog", "runs"], ["ma", "kobu", "tira"])
    assert res.tokens == ["[CLS]", "the", "dog", "runs", "[SEP]", "ma", "kobu", "tira", "[SEP]"]
    assert res.segment == [-1, 0, 0, 0, -1, 1, 1, 1, -1]
    assert res.attentions.shape == (2, 2, 9, 9)
    np.testing.assert_allclose(res.attentions.sum(-1), 1.0, atol=1e-5)
    share = cross_attention_share(res)
    assert share.shape == (2, 2) and ((share > 0) & (share < 1)).all()
    aligned = aligned_attention_share(res, [(0, 0), (1, 1), (2, 2)])
    assert aligned.shape == (2, 2)
    # the L2 half really goes through the L2 embedding module: changing it changes attention
    with torch.no_grad():
        emb_b.weight.mul_(3.0)
    res2 = mixed_pair_attention_maps(model, tok_a, tok_b, emb_b, ["the", "dog", "runs"], ["ma", "kobu", "tira"])
    assert not np.allclose(res.attentions, res2.attentions)
    short = mixed_pair_attention_maps(model, tok_a, tok_b, emb_b, ["the", "dog", "runs"], ["ma", "kobu", "tira"], max_length=6)
    assert short.truncated and len(short.tokens) == 6
