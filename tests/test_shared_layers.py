"""Wu et al.'s partially shared model (xlviz.models.shared_layers)."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForMaskedLM, BertConfig, BertForMaskedLM, BertForQuestionAnswering
from transformers.models.bert.modeling_bert import BertLayer

from xlviz.errors import XlvizError
from xlviz.models.shared_layers import SharedTopLayers, with_bottom_layers
from xlviz.training.mlm import MaskedOnlyMLM

LAYERS = 3


def config() -> BertConfig:
    return BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=LAYERS, num_attention_heads=2,
                      intermediate_size=32, max_position_embeddings=16, hidden_dropout_prob=0.0,
                      attention_probs_dropout_prob=0.0)


def base(seed: int = 0) -> BertForMaskedLM:
    torch.manual_seed(seed)
    return BertForMaskedLM(config())


def batch(seed: int):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 40, (2, 10), generator=g)
    ids[:, 0], ids[:, -1] = 2, 3
    labels = torch.full_like(ids, -100)
    labels[:, 3] = ids[:, 3]
    labels[:, 6] = ids[:, 6]
    inputs = ids.clone()
    inputs[:, 3] = 4
    mask = torch.ones_like(ids)
    mask[1, 8:] = 0
    return inputs, mask, labels


def layer_params() -> int:
    return sum(p.numel() for p in BertLayer(config()).parameters())


@pytest.mark.parametrize("k", [0, 1, 2, LAYERS])
def test_gradients_stay_in_their_language(k):
    model = SharedTopLayers(base(), ["en", "xx"], shared_top=k)
    inputs, mask, labels = batch(0)
    model(inputs, mask, labels, language="xx").loss.backward()
    for p in model.language_layers("en").parameters():
        assert p.grad is None  # en's own layers: nothing from an xx batch
    for p in model.language_layers("xx").parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0
    for p in model.shared.parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0
    xx_shared = [p.grad.clone() for p in model.shared.parameters()]
    model(*batch(1), language="en").loss.backward()  # the shared top layers accumulate both languages
    for p in model.language_layers("en").parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0
    for before, p in zip(xx_shared, model.shared.parameters()):
        assert not torch.equal(before, p.grad)
    assert model.embeddings.word_embeddings.weight.grad is not None


@pytest.mark.parametrize("k", [0, 1, LAYERS])
def test_parameter_count(k):
    model = SharedTopLayers(base(), ["en", "xx", "yy"], shared_top=k)
    plain = sum(p.numel() for p in base().parameters())  # counts the tied decoder once
    specific = (LAYERS - k) * layer_params()
    assert sum(p.numel() for p in model.parameters()) == plain + 2 * specific  # two extra copies of the bottom
    assert len(model.shared) == k and all(len(model.language_layers(lang)) == LAYERS - k for lang in model.languages)


def test_languages_start_identical_then_untie():
    model = SharedTopLayers(base(), ["en", "xx"], shared_top=1)
    en, xx = model.language_layers("en"), model.language_layers("xx")
    assert all(torch.equal(a, b) and a is not b for a, b in zip(en.parameters(), xx.parameters()))
    with torch.no_grad():
        next(iter(en.parameters())).add_(1.0)
    assert not torch.equal(next(iter(en.parameters())), next(iter(xx.parameters())))


@pytest.mark.parametrize("k", [0, 2, LAYERS])
def test_to_plain_gives_identical_logits_and_saves(k, tmp_path):
    model = SharedTopLayers(base(), ["en", "xx"], shared_top=k).eval()
    with torch.no_grad():  # make the languages differ, as after training
        for p in model.language_layers("xx").parameters():
            p.add_(0.1 * torch.randn_like(p))
    inputs, mask, labels = batch(2)
    for lang in ("en", "xx"):
        plain = model.to_plain(lang)
        assert type(plain) is BertForMaskedLM and len(plain.bert.encoder.layer) == LAYERS
        assert plain.get_output_embeddings().weight is plain.get_input_embeddings().weight
        assert plain.bert.embeddings is not model.embeddings  # a copy, not a view
        with torch.no_grad():
            want = model(inputs, mask, language=lang).logits
            torch.testing.assert_close(plain(input_ids=inputs, attention_mask=mask).logits, want, rtol=0, atol=0)
    with torch.no_grad():
        en_out = model(inputs, mask, language="en").logits
        xx_out = model(inputs, mask, language="xx").logits
    assert torch.equal(en_out, xx_out) == (k == LAYERS)  # all shared: one model
    model.to_plain("xx").save_pretrained(tmp_path / "xx")
    loaded = AutoModelForMaskedLM.from_pretrained(tmp_path / "xx", use_safetensors=True).eval()
    with torch.no_grad():
        torch.testing.assert_close(loaded(input_ids=inputs, attention_mask=mask).logits, xx_out)


def test_from_plain_round_trip(tmp_path):
    model = SharedTopLayers(base(), ["en", "xx"], shared_top=2).eval()
    with torch.no_grad():
        for p in model.language_layers("xx").parameters():
            p.add_(0.1 * torch.randn_like(p))
    for lang in model.languages:
        model.to_plain(lang).save_pretrained(tmp_path / lang)
    loaded = {lang: BertForMaskedLM.from_pretrained(tmp_path / lang, use_safetensors=True) for lang in ("en", "xx")}
    again = SharedTopLayers.from_plain(loaded, shared_top=2).eval()
    inputs, mask, _ = batch(5)
    with torch.no_grad():
        for lang in ("en", "xx"):
            torch.testing.assert_close(again(inputs, mask, language=lang).logits, model(inputs, mask, language=lang).logits)
    with torch.no_grad():
        loaded["xx"].bert.encoder.layer[-1].output.dense.weight.add_(1.0)
    with pytest.raises(XlvizError, match="shared layers"):
        SharedTopLayers.from_plain(loaded, shared_top=2)


def test_views_run_through_the_masked_only_fast_path():
    model = SharedTopLayers(base(), ["en", "xx"], shared_top=1)
    inputs, mask, labels = batch(3)
    fast = MaskedOnlyMLM(model.views["xx"])(inputs, labels, attention_mask=mask)
    torch.testing.assert_close(fast, model(inputs, mask, labels, language="xx").loss)


def test_with_bottom_layers_for_zero_shot():
    model = SharedTopLayers(base(), ["en", "xx"], shared_top=1).eval()
    with torch.no_grad():
        for p in model.language_layers("xx").parameters():
            p.add_(0.1 * torch.randn_like(p))
    torch.manual_seed(1)
    qa = BertForQuestionAnswering(config())
    qa.bert.load_state_dict(model.to_plain("en").bert.state_dict())  # "fine-tuned" on en
    zero_shot = with_bottom_layers(qa, model.language_layers("xx")).eval()
    want = model.to_plain("xx").bert
    inputs, mask, _ = batch(4)
    with torch.no_grad():
        torch.testing.assert_close(zero_shot.bert(input_ids=inputs, attention_mask=mask).last_hidden_state,
                                   want(input_ids=inputs, attention_mask=mask).last_hidden_state)
    assert torch.equal(zero_shot.qa_outputs.weight, qa.qa_outputs.weight)
    assert zero_shot.bert.encoder.layer[0] is not model.language_layers("xx")[0]  # copied


def test_one_config_so_attention_switches_reach_every_layer():
    from transformers import PretrainedConfig

    model = SharedTopLayers(base(), ["en", "xx"], shared_top=1)
    configs = {id(m.config) for m in model.modules() if isinstance(getattr(m, "config", None), PretrainedConfig)}
    assert configs == {id(model.config)}
    model.views["xx"].set_attn_implementation("sdpa")  # what Bf16Weights does to the first model it finds
    assert model.language_layers("en")[0].attention.self.config._attn_implementation == "sdpa"


def test_from_config_and_bad_input():
    model = SharedTopLayers(config(), ["en", "xx"], shared_top=2)
    assert model.n_specific == 1
    with pytest.raises(XlvizError, match="shared_top"):
        SharedTopLayers(config(), ["en", "xx"], shared_top=LAYERS + 1)
    with pytest.raises(XlvizError, match="languages"):
        SharedTopLayers(config(), ["en", "en"], shared_top=1)
    with pytest.raises(XlvizError, match="language"):
        model(*batch(0), language="fr")


def test_zero_shot_composition_with_a_disjoint_vocabulary():
    """wu-shared-top-K's zero-shot model: the L1 QA model, the L2's bottom layers, then sliced to
    the L2's own vocabulary: a plain QA model whose encoder equals the L2 view's on mapped ids."""
    from tests.test_joint_vocab import EN, made_up_words, sentences
    from xlviz.data.joint_vocab import DisjointVocab
    from xlviz.data.tokenization import train_tokenizer
    from xlviz.models.vocab_slice import slice_to_language

    toks = {"en": train_tokenizer(sentences(EN, 100, 1), vocab_size=60),
            "xx": train_tokenizer(sentences(made_up_words(20, 2), 100, 3), vocab_size=50)}
    vocab = DisjointVocab(toks)
    cfg = config()
    cfg.vocab_size = vocab.vocab_size
    torch.manual_seed(0)
    model = SharedTopLayers(BertForMaskedLM(cfg), ["en", "xx"], shared_top=1).eval()
    with torch.no_grad():
        for p in model.language_layers("xx").parameters():
            p.add_(0.1 * torch.randn_like(p))
    qa = BertForQuestionAnswering(cfg)
    qa.bert.load_state_dict(model.to_plain("en").bert.state_dict())
    zero_shot = slice_to_language(with_bottom_layers(qa, model.language_layers("xx")), vocab, "xx").eval()
    assert zero_shot.config.vocab_size == len(toks["xx"])
    enc = toks["xx"](" ".join(made_up_words(20, 2)[:3]), return_tensors="pt")
    with torch.no_grad():
        got = zero_shot.bert(input_ids=enc["input_ids"]).last_hidden_state
        want = model.to_plain("xx").bert(input_ids=vocab.to_joint("xx", enc["input_ids"])).last_hidden_state
    torch.testing.assert_close(got, want)
