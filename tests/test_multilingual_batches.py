"""Balanced multi-language MLM batches (xlviz.training.multilingual)."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from xlviz.errors import XlvizError
from xlviz.training.multilingual import multilingual_batches


def blocks(value: int, n: int | None = None):
    """Blocks [value, k] so a row tells its language (value) and its order (k)."""
    counter = itertools.count() if n is None else range(n)
    return ([value, k] for k in counter)


def streams(n: int | None = None):
    return {"en": blocks(1, n), "xx": blocks(2, n), "yy": blocks(3, n)}


def test_batch_mode_one_language_per_batch_balanced_and_seeded():
    got = list(itertools.islice(multilingual_batches(streams(), 4, seed=0), 3000))
    for lang, batch in got:
        assert batch.shape == (4, 2)
        assert set(batch[:, 0].tolist()) == {{"en": 1, "xx": 2, "yy": 3}[lang]}
    counts = Counter(lang for lang, _ in got)
    assert all(abs(c - 1000) < 100 for c in counts.values())  # ~5 std of a binomial(3000, 1/3)
    again = [lang for lang, _ in itertools.islice(multilingual_batches(streams(), 4, seed=0), 50)]
    other = [lang for lang, _ in itertools.islice(multilingual_batches(streams(), 4, seed=1), 50)]
    assert again == [lang for lang, _ in got[:50]] and again != other
    # each language's blocks come in their own order, none skipped
    en_rows = [row[1] for lang, b in got if lang == "en" for row in b.tolist()]
    assert en_rows == list(range(len(en_rows)))


def test_alternate_mode_is_round_robin():
    got = [lang for lang, _ in itertools.islice(multilingual_batches(streams(), 2, mode="alternate"), 7)]
    assert got == ["en", "xx", "yy", "en", "xx", "yy", "en"]


def test_mixed_mode_mixes_rows():
    got = list(itertools.islice(multilingual_batches(streams(), 6, mode="mixed", seed=0), 500))
    assert all(lang is None for lang, _ in got)
    rows = Counter(v for _, b in got for v in b[:, 0].tolist())
    assert all(abs(c - 1000) < 120 for c in rows.values())
    assert any(len(set(b[:, 0].tolist())) > 1 for _, b in got)


def test_smoothed_weights_follow_sizes():
    # sizes 1:9, alpha 0.5 -> q = 1/(1+3) = 0.25 for en; alpha 1 -> 0.1; alpha 0 -> 0.5
    for alpha, share in ((0.5, 0.25), (1.0, 0.1), (0.0, 0.5)):
        got = itertools.islice(multilingual_batches({"en": blocks(1), "xx": blocks(2)}, 1, sizes={"en": 1, "xx": 9},
                                                    alpha=alpha, seed=2), 4000)
        en = sum(lang == "en" for lang, _ in got) / 4000
        assert en == pytest.approx(share, abs=0.03)


def test_stops_when_a_language_runs_out_and_refuses_bad_input():
    got = list(multilingual_batches({"en": blocks(1, 4), "xx": blocks(2, 100)}, 2, mode="alternate"))
    assert [lang for lang, _ in got] == ["en", "xx", "en", "xx"]
    with pytest.raises(XlvizError, match="mode"):
        next(multilingual_batches(streams(), 2, mode="zip"))
    with pytest.raises(XlvizError, match="sizes"):
        next(multilingual_batches(streams(), 2, sizes={"en": 1}, alpha=0.5))


def tiny_shared_model(vocab_size: int, shared_top: int):
    import torch
    from transformers import BertConfig, BertForMaskedLM

    from xlviz.models.shared_layers import SharedTopLayers

    torch.manual_seed(0)
    config = BertConfig(vocab_size=vocab_size, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=16)
    return SharedTopLayers(BertForMaskedLM(config), ["en", "xx"], shared_top=shared_top)


@pytest.fixture(scope="module")
def disjoint():
    from tests.test_joint_vocab import EN, made_up_words, sentences
    from xlviz.data.joint_vocab import DisjointVocab
    from xlviz.data.tokenization import train_tokenizer

    return DisjointVocab({"en": train_tokenizer(sentences(EN, 100, 1), vocab_size=60),
                          "xx": train_tokenizer(sentences(made_up_words(20, 2), 100, 3), vocab_size=50)})


def language_blocks(vocab, lang: str, seed: int):
    import torch

    g = torch.Generator().manual_seed(seed)
    while True:
        yield [2] + torch.randint(5, vocab.sizes[lang], (10,), generator=g).tolist() + [3]


def test_mlm_inputs_mask_in_the_language_then_map(disjoint):
    from xlviz.training.multilingual import mlm_inputs

    stream = multilingual_batches({"en": language_blocks(disjoint, "en", 0), "xx": language_blocks(disjoint, "xx", 1)}, 8, seed=0)
    for batch in itertools.islice(mlm_inputs(stream, ["en", "xx"], mask_id=4, vocab=disjoint, prob=0.3), 20):
        lang = ["en", "xx"][int(batch["language"])]
        assert batch["language"].dim() == 0
        assert set(batch["input_ids"].unique().tolist()) <= set(disjoint.language_rows(lang).tolist())
        assert (batch["labels"] != -100).any()
    with pytest.raises(XlvizError, match="vocab"):
        next(mlm_inputs(iter([]), ["en"], mask_id=4))


@pytest.mark.parametrize("precision", ["no", "bf16"])
def test_loop_trains_only_the_batch_language_bottom_layers(disjoint, precision):
    """Through loop.train (bf16: the CPU's bf16 weights with float32 masters), batches of xx
    alone leave en's own layers exactly as they were and move xx's and the shared ones."""
    import torch

    from xlviz.training.loop import LoopConfig, make_accelerator, train
    from xlviz.training.multilingual import PerLanguageMLM, mlm_inputs

    model = tiny_shared_model(disjoint.vocab_size, shared_top=1)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    stream = ((lang, b) for lang, b in multilingual_batches({"xx": language_blocks(disjoint, "xx", 0)}, 4))
    batches = mlm_inputs(stream, model.languages, mask_id=4, vocab=disjoint, prob=0.3)
    train(PerLanguageMLM(model), batches, LoopConfig(steps=3, lr=1e-2, log_every=1), make_accelerator(precision))
    after = dict(model.named_parameters())
    assert all(p.dtype == torch.float32 for p in after.values())
    for name, p in after.items():
        moved = not torch.equal(p, before[name])
        if name.startswith("specific.en."):
            assert not moved, name
        elif name.startswith(("specific.xx.", "shared.")) and name.endswith("weight") and "LayerNorm" not in name:
            assert moved, name


def test_per_language_mlm_refuses_mixed_language_index():
    import torch

    from xlviz.training.multilingual import PerLanguageMLM

    loss = PerLanguageMLM(tiny_shared_model(30, shared_top=1))
    ids = torch.randint(5, 30, (2, 6))
    with pytest.raises(XlvizError, match="language"):
        loss(ids, ids, torch.tensor([0, 1]))
    with pytest.raises(XlvizError, match="language"):
        loss(ids, ids, torch.tensor(2))
