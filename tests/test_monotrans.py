"""MONOTRANS at the parameter level: what each step trains, freezes and swaps."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForQuestionAnswering, BertForMaskedLM

from xlviz.models.floor import make_l2_mlm
from xlviz.models.monotrans import (
    N_SPECIAL, add_embedding_noise, bert_config, drop_cls_position_and_segment, fold_cls_position, freeze_for_step2,
    freeze_for_step3, qa_from_mlm, zero_shot_model,
)
from xlviz.training.mlm import MaskedOnlyMLM, mask_tokens, masked_rows

V1, V2 = 60, 45


def l1_model() -> BertForMaskedLM:
    torch.manual_seed(0)
    return BertForMaskedLM(bert_config(V1, "tiny", max_position_embeddings=32))


def snapshot(model) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def sgd_steps(module, make_batch, n=3, lr=0.5):
    params = [p for p in module.parameters() if p.requires_grad]
    opt = torch.optim.SGD(params, lr=lr)
    for _ in range(n):
        loss = module(**make_batch())
        loss.backward()
        opt.step()
        opt.zero_grad()


def mlm_batch(vocab):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(N_SPECIAL, vocab, (4, 16), generator=g)
    ids[:, 0] = 2
    inputs, labels = mask_tokens(ids, mask_id=4, vocab_size=vocab, prob=0.5, generator=g)
    return lambda: {"input_ids": inputs, "labels": labels}


def test_new_l2_rows_take_init_std_and_special_rows_come_from_l1():
    l1 = l1_model()
    l1_rows = l1.bert.embeddings.word_embeddings.weight
    for std in (None, 0.002):
        rows = make_l2_mlm(l1, V2, seed=1, init_std=std).bert.embeddings.word_embeddings.weight
        assert torch.equal(rows[:N_SPECIAL], l1_rows[:N_SPECIAL])
        expected = l1.config.initializer_range if std is None else std
        assert abs(rows[N_SPECIAL:].std().item() - expected) < 0.15 * expected


def test_step2_trains_only_l2_embeddings_and_output_bias():
    l1 = l1_model()
    l2 = make_l2_mlm(l1, V2, seed=1)
    assert l2.cls.predictions.decoder.weight is l2.bert.embeddings.word_embeddings.weight, "MLM output tied to L2 embeddings"
    assert torch.equal(l2.bert.embeddings.word_embeddings.weight[:N_SPECIAL], l1.bert.embeddings.word_embeddings.weight[:N_SPECIAL])
    trainable = freeze_for_step2(l2)
    assert sorted(trainable) == ["bert.embeddings.word_embeddings.weight", "cls.predictions.bias"]
    before = snapshot(l2)
    sgd_steps(MaskedOnlyMLM(l2), mlm_batch(V2))
    after = snapshot(l2)
    changed = {n for n in before if not torch.equal(before[n], after[n])}
    assert changed == {"bert.embeddings.word_embeddings.weight", "cls.predictions.bias"}
    emb_b, emb_a = before["bert.embeddings.word_embeddings.weight"], after["bert.embeddings.word_embeddings.weight"]
    assert torch.equal(emb_b[:N_SPECIAL], emb_a[:N_SPECIAL]), "special rows are shared with L1 and stay frozen"
    assert not torch.equal(emb_b[N_SPECIAL:], emb_a[N_SPECIAL:])
    # the body is still exactly L1's
    l1_state = dict(l1.named_parameters())
    for n, p in after.items():
        if "word_embeddings" not in n and "predictions.bias" not in n:
            assert torch.equal(p, l1_state[n]), n


def test_step2_variants_add_positions_and_adapters():
    l1 = l1_model()
    l2 = make_l2_mlm(l1, V2, seed=1, adapter_size=4)
    trainable = freeze_for_step2(l2, l2_positions=True)
    assert "bert.embeddings.position_embeddings.weight" in trainable
    assert any(".attention.output.adapter." in n for n in trainable) and any(".output.adapter." in n for n in trainable)
    assert not any("query" in n or "LayerNorm" in n or "dense" in n.split("adapter")[0][-6:] for n in trainable if ".adapter." not in n)
    # adapters start near the identity (Houlsby et al.: both projections ~ N(0, 0.01^2)): almost
    # the adapter-free model's outputs, yet not exactly (a zero up-projection would starve down's gradient)
    plain = make_l2_mlm(l1, V2, seed=1)
    x = torch.randint(0, V2, (2, 10))
    diff = (l2.eval()(input_ids=x).logits - plain.eval()(input_ids=x).logits).abs().max()
    assert 0 < diff < 1e-2


def test_step3_freezes_l1_embeddings_but_fine_tunes_special_rows():
    qa = qa_from_mlm(l1_model(), seed=0)
    freeze_for_step3(qa)
    before = snapshot(qa)
    g = torch.Generator().manual_seed(2)
    ids = torch.randint(N_SPECIAL, V1, (4, 16), generator=g)
    ids[:, 0], ids[:, 8], ids[:, -1] = 2, 3, 3
    batch = {"input_ids": ids, "start_positions": torch.tensor([1, 2, 3, 4]), "end_positions": torch.tensor([2, 3, 4, 5])}
    opt = torch.optim.SGD([p for p in qa.parameters() if p.requires_grad], lr=0.5)
    for _ in range(2):
        qa(**batch).loss.backward()
        opt.step()
        opt.zero_grad()
    after = snapshot(qa)
    emb = "bert.embeddings.word_embeddings.weight"
    assert torch.equal(before[emb][N_SPECIAL:], after[emb][N_SPECIAL:]), "L1 token embeddings frozen"
    assert not torch.equal(before[emb][:N_SPECIAL], after[emb][:N_SPECIAL]), "shared special tokens fine-tuned"
    assert not torch.equal(before["qa_outputs.weight"], after["qa_outputs.weight"])
    assert not torch.equal(before["bert.encoder.layer.0.attention.self.query.weight"], after["bert.encoder.layer.0.attention.self.query.weight"])


def test_step3_with_l2_positions_freezes_l1_positions():
    qa = qa_from_mlm(l1_model(), seed=0)
    trainable = freeze_for_step3(qa, freeze_positions=True)
    assert "bert.embeddings.position_embeddings.weight" not in trainable


def test_swap_changes_only_embeddings(tmp_path):
    l1 = l1_model()
    qa = qa_from_mlm(l1, seed=0)
    l2 = make_l2_mlm(l1, V2, seed=1)
    with torch.no_grad():
        l2.bert.embeddings.word_embeddings.weight.add_(1.0)
        qa.bert.embeddings.word_embeddings.weight[:N_SPECIAL].add_(5.0)  # as if fine-tuned in step 3
    zs = zero_shot_model(qa, l2)
    assert zs.config.vocab_size == V2
    qa_state, zs_state = dict(qa.named_parameters()), dict(zs.named_parameters())
    for n, p in zs_state.items():
        if n == "bert.embeddings.word_embeddings.weight":
            assert torch.equal(p[N_SPECIAL:], l2.bert.embeddings.word_embeddings.weight[N_SPECIAL:])
            assert torch.equal(p[:N_SPECIAL], qa.bert.embeddings.word_embeddings.weight[:N_SPECIAL])
        else:
            assert torch.equal(p, qa_state[n]), f"{n} should come unchanged from the fine-tuned model"
    zs.save_pretrained(tmp_path)
    loaded = AutoModelForQuestionAnswering.from_pretrained(tmp_path, use_safetensors=True)
    assert type(loaded).__name__ == "BertForQuestionAnswering"
    x = torch.randint(0, V2, (1, 12))
    assert torch.allclose(loaded(input_ids=x).start_logits, zs.eval()(input_ids=x).start_logits, atol=1e-6)


def test_dictionary_oracle_copies_translation_rows_from_l1():
    l1 = l1_model()
    qa = qa_from_mlm(l1, seed=0)
    l2 = make_l2_mlm(l1, V2, seed=1)
    rows = {7: 9, 8: 12}  # l2 id -> l1 id of its gold translation
    zs = zero_shot_model(qa, l2, dictionary_rows=rows)
    w, l1w, l2w = zs.bert.embeddings.word_embeddings.weight, qa.bert.embeddings.word_embeddings.weight, l2.bert.embeddings.word_embeddings.weight
    assert torch.equal(w[7], l1w[9]) and torch.equal(w[8], l1w[12])
    others = [i for i in range(N_SPECIAL, V2) if i not in rows]
    assert torch.equal(w[others], l2w[others])


def test_translation_rows_keep_whole_tokens_only():
    from xlviz.data.vocabulary import translation_rows

    class Vocab:
        def __init__(self, words):
            self.v = {w: i for i, w in enumerate(words)}

        def get_vocab(self):
            return self.v

    en, l2 = Vocab(["[PAD]", "dog", "cat", "."]), Vocab(["[PAD]", "toge", "##ke", "."])
    assert translation_rows([("dog", "toge"), ("cat", "fuke"), (".", ".")], en, l2) == {1: 1, 3: 3}


def test_swap_with_positions_and_adapters_exports_and_reloads(tmp_path):
    from xlviz.models import register_model_types

    register_model_types()  # xlviz_bert, for the Auto class below

    l1 = l1_model()
    qa = qa_from_mlm(l1, seed=0)
    l2 = make_l2_mlm(l1, V2, seed=1, adapter_size=4)
    with torch.no_grad():
        l2.bert.embeddings.position_embeddings.weight.add_(0.3)
        for n, p in l2.named_parameters():
            if ".adapter.up." in n:
                p.add_(0.1)
    zs = zero_shot_model(qa, l2, l2_positions=True, adapter_size=4)
    assert torch.equal(zs.bert.embeddings.position_embeddings.weight[1:], l2.bert.embeddings.position_embeddings.weight[1:])
    # [CLS]'s row is folded against the fine-tuned segment row (tests/test_defects.py)
    assert torch.equal(zs.bert.embeddings.position_embeddings.weight[0], -qa.bert.embeddings.token_type_embeddings.weight[0])
    zs.save_pretrained(tmp_path)
    loaded = AutoModelForQuestionAnswering.from_pretrained(tmp_path, use_safetensors=True)
    x = torch.randint(0, V2, (1, 12))
    assert torch.allclose(loaded(input_ids=x).end_logits, zs.eval()(input_ids=x).end_logits, atol=1e-6)
    # xlviz's one loading path (the analyses, every page) accepts the adapter model type too
    from xlviz.models.loading import _check_folder

    assert _check_folder(tmp_path)["model_type"] == "xlviz_bert"


def test_cls_without_position_and_segment_folds_exactly():
    model = qa_from_mlm(l1_model(), seed=0).eval()
    with torch.no_grad():
        model.bert.embeddings.token_type_embeddings.weight.normal_()
    x = torch.randint(N_SPECIAL, V1, (2, 10))
    x[:, 0] = 2
    tt = torch.zeros_like(x)
    tt[:, 5:] = 1
    handles = drop_cls_position_and_segment(model)
    hooked = model.bert.embeddings(input_ids=x, token_type_ids=tt)
    word = model.bert.embeddings.word_embeddings(x[:, :1])
    ln = model.bert.embeddings.LayerNorm
    assert torch.allclose(hooked[:, 0], ln(word)[:, 0], atol=1e-6), "[CLS] carries only its token embedding"
    for h in handles:
        h.remove()
    fold_cls_position(model)
    folded = model.bert.embeddings(input_ids=x, token_type_ids=tt)
    # (w + t) - t is w up to float rounding, which LayerNorm scales up by 1/std(w) ~ 50
    assert torch.allclose(hooked, folded, atol=1e-4)
    assert torch.equal(hooked[:, 1:], folded[:, 1:])


def test_noise_only_in_training_mode():
    model = qa_from_mlm(l1_model(), seed=0)
    add_embedding_noise(model, std=0.075)
    x = torch.randint(0, V1, (2, 8))
    model.eval()
    assert torch.equal(model.bert.embeddings(input_ids=x), model.bert.embeddings(input_ids=x))
    model.train()
    a, b = model.bert.embeddings(input_ids=x), model.bert.embeddings(input_ids=x)
    assert not torch.equal(a, b)


def test_masking_proportions():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(N_SPECIAL, 100, (200, 100), generator=g)
    ids[:, 0] = 2
    inputs, labels = mask_tokens(ids, mask_id=4, vocab_size=100, generator=g)
    chosen = labels != -100
    assert abs(chosen.float().mean().item() - 0.15) < 0.01
    assert not chosen[:, 0].any(), "special tokens are never targets"
    masked = (inputs == 4) & chosen
    assert abs(masked.sum().item() / chosen.sum().item() - 0.8) < 0.02
    assert torch.equal(labels[chosen], ids[chosen])


def test_no_random_masking_picks_the_same_targets_and_shows_mask_or_the_token():
    """``random_share=0`` (Dufter & Schuetze's no-random): the same generator picks the same
    targets as BERT's 80/10/10; the targets that 80/10/10 shows as a random token become
    [MASK], the unchanged ones stay unchanged, and no other position moves."""
    ids = torch.randint(N_SPECIAL, 100, (200, 100), generator=torch.Generator().manual_seed(0))
    bert, bert_labels = mask_tokens(ids, mask_id=4, vocab_size=100, generator=torch.Generator().manual_seed(1))
    none, none_labels = mask_tokens(ids, mask_id=4, vocab_size=100, generator=torch.Generator().manual_seed(1), random_share=0.0)
    assert torch.equal(bert_labels, none_labels)
    chosen = none_labels != -100
    assert torch.equal(none[~chosen], ids[~chosen])
    shown = none[chosen]
    assert ((shown == 4) | (shown == ids[chosen])).all(), "a target is [MASK] or itself, never another token"
    assert abs((shown == 4).float().mean().item() - 0.9) < 0.02
    random_at_bert = chosen & (bert != 4) & (bert != ids)
    assert random_at_bert.any() and (none[random_at_bert] == 4).all()
    g = torch.Generator().manual_seed(1)
    torch.rand(ids.shape, generator=g)  # the targets' draw
    roll = torch.rand(ids.shape, generator=g)  # [MASK] / random / unchanged
    kept = chosen & (roll >= 0.9)
    assert kept.any() and torch.equal(none[kept], ids[kept]) and torch.equal(bert[kept], ids[kept])
    assert (none[chosen & (roll < 0.9)] == 4).all()
    # the default share is BERT's, byte for byte
    again, _ = mask_tokens(ids, mask_id=4, vocab_size=100, generator=torch.Generator().manual_seed(1), random_share=0.1)
    assert torch.equal(again, bert)
    # a larger share: 50% [MASK], 40% random, 10% unchanged
    more, _ = mask_tokens(ids, mask_id=4, vocab_size=100, generator=torch.Generator().manual_seed(1), random_share=0.4)
    assert abs((more[chosen] == 4).float().mean().item() - 0.5) < 0.02


def loss_and_grads(loss_fn, model):
    model.zero_grad()
    loss = loss_fn()
    loss.backward()
    return loss.detach(), {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}


def test_masked_only_loss_equals_full_loss():
    """Same loss and same gradients, though the masked rows are padded to a bucket size."""
    model = l1_model().eval()
    batch = mlm_batch(V1)()
    n = int((batch["labels"] != -100).sum())
    index, targets = masked_rows(batch["labels"])
    assert len(index) % 64 == 0 and len(index) >= n and int((targets != -100).sum()) == n
    fast, grads = loss_and_grads(lambda: MaskedOnlyMLM(model)(**batch), model)
    full, full_grads = loss_and_grads(lambda: model(**batch).loss, model)
    assert torch.allclose(fast, full, atol=1e-5)
    for k, g in full_grads.items():
        if k in grads:
            assert torch.allclose(grads[k], g, atol=1e-6), k


@pytest.mark.parametrize("attn", ["eager", "sdpa", "xlviz_bf16_eager"])
@pytest.mark.parametrize("padded", [False, True])
@pytest.mark.parametrize("adapters", [False, True])
def test_last_layer_at_masked_rows_gives_the_full_loss_and_gradients(attn, padded, adapters):
    """The last layer runs its queries and feed-forward block on the masked rows only, with
    every attention implementation, padding masks and adapters, and changes nothing."""
    import xlviz.training.loop  # noqa: F401  (registers xlviz_bf16_eager)
    from xlviz.models.adapters import add_adapters

    torch.manual_seed(0)
    model = BertForMaskedLM(bert_config(V1, "tiny", max_position_embeddings=32))
    if adapters:
        add_adapters(model.bert, 8)
        for layer in model.bert.encoder.layer:  # adapters start at the identity; make them count
            for out in (layer.attention.output, layer.output):
                torch.nn.init.normal_(out.adapter.up.weight, std=0.1)
    model.set_attn_implementation(attn)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(N_SPECIAL, V1, (16, 16), generator=g)
    ids[:, 0] = 2
    inputs, labels = mask_tokens(ids, mask_id=4, vocab_size=V1, generator=g)
    batch = {"input_ids": inputs, "labels": labels}
    if padded:
        mask = torch.ones_like(batch["input_ids"])
        mask[1, 10:] = 0
        mask[3, 5:] = 0
        batch["attention_mask"] = mask
        batch["labels"] = batch["labels"].masked_fill(mask == 0, -100)
    wrapped = MaskedOnlyMLM(model)
    assert wrapped.last_layer_at_rows
    seen = []
    hook = model.bert.encoder.layer[-1].intermediate.dense.register_forward_hook(lambda m, i, o: seen.append(i[0].shape[0]))
    fast, fast_grads = loss_and_grads(lambda: wrapped(**batch), model)
    hook.remove()
    full, full_grads = loss_and_grads(lambda: model(**batch).loss, model)
    n_masked = int((batch["labels"] != -100).sum())
    assert seen == [len(masked_rows(batch["labels"])[0])] and seen[0] < batch["input_ids"].numel()
    assert n_masked <= seen[0] < n_masked + 64
    assert torch.allclose(fast, full, atol=1e-5)
    assert fast_grads.keys() == full_grads.keys()
    for k in full_grads:
        assert torch.allclose(fast_grads[k], full_grads[k], atol=1e-6), k


def test_schedule_reaches_zero_exactly_at_the_last_step():
    from xlviz.training.loop import LoopConfig, make_accelerator, train

    model = torch.nn.Linear(2, 1)
    lrs = []

    class Probe(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = model

        def forward(self, x):
            return self.lin(x).pow(2).mean()

    probe = Probe()
    batches = iter(lambda: {"x": torch.ones(4, 2)}, None)
    acc = make_accelerator("no")
    orig = torch.optim.AdamW.step

    def spy(self, *a, **k):
        lrs.append(self.param_groups[0]["lr"])
        return orig(self, *a, **k)

    torch.optim.AdamW.step = spy
    try:
        train(probe, batches, LoopConfig(steps=10, lr=1.0, warmup_ratio=0.1), acc)
    finally:
        torch.optim.AdamW.step = orig
    assert len(lrs) == 10 and lrs[0] == 1.0 and lrs[-1] == pytest.approx(1 / 9) and all(a >= b for a, b in zip(lrs, lrs[1:]))
