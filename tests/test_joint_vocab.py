"""Joint and disjoint vocabularies (xlviz.data.joint_vocab) and slicing a joint model into
plain per-language HF models (xlviz.models.vocab_slice)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import torch
from transformers import AutoModelForMaskedLM, AutoModelForQuestionAnswering, AutoTokenizer, BertConfig, BertForMaskedLM, BertForQuestionAnswering

from xlviz.data.joint_vocab import DisjointVocab, canonical_order, balanced_sample, smoothed_weights, train_joint_tokenizer
from xlviz.data.tokenization import SPECIAL_TOKENS, train_tokenizer
from xlviz.errors import XlvizError
from xlviz.models.vocab_slice import slice_to_language

EN = "the cat sat on a mat and the dog ran to the house while a bird sang in the tree".split()


def made_up_words(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice("kmzqvx") + rng.choice("aiu") for _ in range(rng.randint(2, 3))) for _ in range(n)]


def sentences(words: list[str], n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(words) for _ in range(rng.randint(4, 9))) for _ in range(n)]


@pytest.fixture(scope="module")
def tokenizers():
    return {
        "en": train_tokenizer(sentences(EN, 300, 1), vocab_size=80),
        "xx": train_tokenizer(sentences(made_up_words(25, 2), 300, 3), vocab_size=70),
    }


def test_smoothed_weights_hand_values():
    q = smoothed_weights({"a": 1, "b": 3}, 0.5)  # p = 1/4, 3/4; sqrt: 1/2, sqrt(3)/2
    assert q["a"] == pytest.approx(1 / (1 + math.sqrt(3)))
    assert smoothed_weights({"a": 1, "b": 3}, 0.0) == {"a": 0.5, "b": 0.5}
    assert smoothed_weights({"a": 1, "b": 3}, 1.0)["b"] == pytest.approx(0.75)
    with pytest.raises(XlvizError, match="sizes"):
        smoothed_weights({"a": 0, "b": 3}, 0.5)


def test_balanced_sample_counts():
    corpora = {"a": ["xx"] * 10, "b": ["yyyy"] * 100}  # 20 and 400 characters
    even = balanced_sample(corpora)  # 20 characters each: all of a, 5 sentences of b
    assert (len(even["a"]), len(even["b"])) == (10, 5)
    natural = balanced_sample(corpora, alpha=1.0)  # shares 20/420 and 400/420 of 420: everything once
    assert (len(natural["a"]), len(natural["b"])) == (10, 100)
    # alpha 0.5: q_a = 1 / (1 + sqrt(20)) of 420 chars = 76.75 -> 39 two-char sentences (a up-sampled);
    # q_b * 420 = 343.25 -> 86 four-char sentences
    smooth = balanced_sample(corpora, alpha=0.5)
    assert (len(smooth["a"]), len(smooth["b"])) == (39, 86)
    assert balanced_sample(corpora, seed=3) == balanced_sample(corpora, seed=3)
    with pytest.raises(XlvizError, match="empty"):
        balanced_sample({"a": ["x"], "b": [""]})


def test_joint_tokenizer_specials_balance_and_determinism():
    big_en = sentences(EN, 2000, 4)
    small_xx = sentences(made_up_words(25, 2), 60, 5)
    tok = train_joint_tokenizer({"en": big_en, "xx": small_xx}, vocab_size=120, seed=0)
    for i, t in enumerate(SPECIAL_TOKENS):
        assert tok.convert_tokens_to_ids(t) == i
    assert sorted(tok.get_vocab(), key=tok.get_vocab().get)[5:] == sorted(set(tok.get_vocab()) - set(SPECIAL_TOKENS),
                                                                         key=lambda t: (t.startswith("##"), t))
    # both languages get whole-word tokens: the frequent words of each are single subwords
    xx_counts = {}
    for s in small_xx:
        for w in s.split():
            xx_counts[w] = xx_counts.get(w, 0) + 1
    top_xx = max(xx_counts, key=xx_counts.get)
    assert tok.tokenize(top_xx) == [top_xx]
    assert tok.tokenize("the") == ["the"]
    assert tok("the cat", "sat")["input_ids"][0] == 2  # [CLS] first, as the per-language tokenizers


def test_canonical_order_fixes_ids_and_keeps_tokenization():
    texts = sentences(EN, 200, 6) + sentences(made_up_words(25, 2), 200, 7)
    raw = [train_tokenizer(texts, vocab_size=90) for _ in range(3)]  # the trainer's ids vary per run
    canon = [canonical_order(t) for t in raw]
    for r, c in zip(raw, canon):
        assert set(r.get_vocab()) == set(c.get_vocab())
        assert [c.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS] == list(range(5))
        for text in texts[:20] + texts[-20:]:
            assert r.tokenize(text) == c.tokenize(text)
        assert c(texts[0], texts[1])["token_type_ids"] == r(texts[0], texts[1])["token_type_ids"]
    sets = [frozenset(c.get_vocab()) for c in canon]
    for c, tokens in zip(canon, sets):
        if tokens == sets[0]:  # same tokens (no exact tie in the trainer's merge counts): same ids
            assert c.get_vocab() == canon[0].get_vocab()


def test_disjoint_vocab_shares_only_specials(tokenizers):
    vocab = DisjointVocab(tokenizers)
    en = set(vocab.to_joint("en", list(range(vocab.sizes["en"]))))
    xx = set(vocab.to_joint("xx", list(range(vocab.sizes["xx"]))))
    assert en & xx == set(range(5))
    assert en | xx == set(range(vocab.vocab_size))
    assert vocab.vocab_size == len(tokenizers["en"]) + len(tokenizers["xx"]) - 5
    # hand-computed layout: en rows 5.., xx rows start after en's non-special rows
    assert vocab.to_joint("xx", 5) == len(tokenizers["en"])
    assert vocab.to_joint("en", 7) == 7 and vocab.to_joint("xx", 3) == 3
    assert vocab.to_joint("xx", np.int64(5)) == len(tokenizers["en"]) and vocab.from_joint("en", np.int64(7)) == 7
    ids = torch.tensor([[2, 9, 5, 3, 0], [-100, 6, 1, 4, 12]])
    joint = vocab.to_joint("xx", ids)
    assert joint[1, 0] == -100  # MLM labels' ignore index passes through
    assert torch.equal(vocab.from_joint("xx", joint[:, 1:]), ids[:, 1:])
    rows = vocab.language_rows("xx")
    assert rows.tolist() == vocab.to_joint("xx", list(range(vocab.sizes["xx"])))
    with pytest.raises(XlvizError, match="xx"):
        vocab.from_joint("xx", vocab.to_joint("en", 6))
    with pytest.raises(XlvizError, match="language"):
        vocab.to_joint("fr", 6)
    mats = {lang: torch.full((vocab.sizes[lang], 2), float(k)) for k, lang in enumerate(vocab.languages)}
    stacked = vocab.stack(mats)
    assert torch.equal(stacked[vocab.language_rows("xx")][5:], mats["xx"][5:])
    assert torch.equal(stacked[:5], mats["en"][:5])


def test_masking_in_the_language_space_keeps_random_tokens_in_the_language(tokenizers):
    from xlviz.training.mlm import mask_tokens

    vocab = DisjointVocab(tokenizers)
    ids = torch.randint(5, vocab.sizes["xx"], (64, 32), generator=torch.Generator().manual_seed(0))
    inputs, labels = mask_tokens(ids, mask_id=4, vocab_size=vocab.sizes["xx"], prob=0.5,
                                 generator=torch.Generator().manual_seed(1))
    joint_inputs, joint_labels = vocab.to_joint("xx", inputs), vocab.to_joint("xx", labels)
    own = set(vocab.language_rows("xx").tolist())
    assert set(joint_inputs.unique().tolist()) <= own
    assert set(joint_labels[joint_labels != -100].unique().tolist()) <= own - set(range(5))
    assert (joint_labels == -100).sum() == (labels == -100).sum()


def tiny_config(vocab_size: int) -> BertConfig:
    return BertConfig(vocab_size=vocab_size, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                      intermediate_size=32, max_position_embeddings=32)


@pytest.mark.parametrize("lang", ["en", "xx"])
def test_sliced_model_matches_joint_model(tokenizers, tmp_path, lang):
    vocab = DisjointVocab(tokenizers)
    torch.manual_seed(0)
    joint = BertForMaskedLM(tiny_config(vocab.vocab_size)).eval()
    with torch.no_grad():
        joint.cls.predictions.bias.normal_()  # a non-zero output bias must be sliced too
    tok = tokenizers[lang]
    text = " ".join(EN[:6]) if lang == "en" else " ".join(made_up_words(25, 2)[:6])
    enc = tok([text, text[: len(text) // 2]], padding=True, return_tensors="pt")
    plain = slice_to_language(joint, vocab, lang)
    assert plain.config.vocab_size == len(tok)
    assert plain.get_output_embeddings().weight is plain.get_input_embeddings().weight
    with torch.no_grad():
        want = joint(input_ids=vocab.to_joint(lang, enc["input_ids"]), attention_mask=enc["attention_mask"]).logits
        got = plain(**enc).logits
    torch.testing.assert_close(got, want[..., vocab.language_rows(lang)], atol=1e-5, rtol=1e-5)
    # a plain HF folder: AutoModel + the language's own tokenizer
    plain.save_pretrained(tmp_path / lang)
    tok.save_pretrained(tmp_path / lang)
    loaded = AutoModelForMaskedLM.from_pretrained(tmp_path / lang, use_safetensors=True).eval()
    reloaded_tok = AutoTokenizer.from_pretrained(tmp_path / lang)
    with torch.no_grad():
        again = loaded(**reloaded_tok([text, text[: len(text) // 2]], padding=True, return_tensors="pt")).logits
    torch.testing.assert_close(again, got)


def test_sliced_qa_model_matches(tokenizers, tmp_path):
    vocab = DisjointVocab(tokenizers)
    torch.manual_seed(1)
    joint = BertForQuestionAnswering(tiny_config(vocab.vocab_size)).eval()
    enc = tokenizers["xx"](" ".join(made_up_words(25, 2)[:3]), " ".join(made_up_words(25, 2)[3:9]), return_tensors="pt")
    plain = slice_to_language(joint, vocab, "xx")
    with torch.no_grad():
        want = joint(input_ids=vocab.to_joint("xx", enc["input_ids"]), token_type_ids=enc["token_type_ids"])
        got = plain(**enc)
    torch.testing.assert_close(got.start_logits, want.start_logits)
    torch.testing.assert_close(got.end_logits, want.end_logits)
    plain.save_pretrained(tmp_path / "qa")
    loaded = AutoModelForQuestionAnswering.from_pretrained(tmp_path / "qa", use_safetensors=True).eval()
    with torch.no_grad():
        torch.testing.assert_close(loaded(**enc).start_logits, got.start_logits)


def test_slice_refuses_wrong_vocab_size(tokenizers):
    vocab = DisjointVocab(tokenizers)
    with pytest.raises(XlvizError, match="vocab"):
        slice_to_language(BertForMaskedLM(tiny_config(vocab.vocab_size + 1)), vocab, "en")
