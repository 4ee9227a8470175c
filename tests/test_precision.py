"""Mixed precision in the shared loop: bf16 weights with float32 master copies on CPUs, the
precision ``auto`` picks, and the float32 QA span loss."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForMaskedLM, BertForMaskedLM, BertForQuestionAnswering, DistilBertConfig, RobertaConfig

from xlviz.models.floor import make_l2_mlm
from xlviz.models.monotrans import bert_config, freeze_for_step2
from xlviz.errors import XlvizError
from xlviz.training.loop import (BF16_ATTENTION, FORCE_PRECISION_ENV, Bf16Weights, LoopConfig, make_accelerator,
                                 resolve_mixed_precision, run_precision, train)
from xlviz.training.mlm import MaskedOnlyMLM, mask_tokens
from xlviz.training.qa_loss import QALoss, span_loss


def mlm_batches(vocab: int, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    while True:
        ids = torch.randint(5, vocab, (8, 16), generator=gen)
        inputs, labels = mask_tokens(ids, mask_id=4, vocab_size=vocab, prob=0.3, generator=gen)
        yield {"input_ids": inputs, "labels": labels}


def test_resolve_mixed_precision():
    assert resolve_mixed_precision("no") == "no"
    assert resolve_mixed_precision("bf16") == "bf16"
    assert resolve_mixed_precision("auto") in ("bf16", "no")
    if not torch.cuda.is_available():
        assert resolve_mixed_precision("fp16") == "no"


@pytest.mark.parametrize("amx, avx512_bf16, expected", [
    (True, False, "bf16"), (False, True, "bf16"), (True, True, "bf16"), (False, False, "no"),
])
def test_auto_picks_bf16_on_cpus_that_multiply_bf16_natively(monkeypatch, amx, avx512_bf16, expected):
    """AMX (Intel Sapphire Rapids on) and AVX512-BF16 (AMD Zen 4, Intel Cooper Lake) both run
    bf16 weights faster than float32; without either, bf16 is emulated and auto stays float32."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16)
    assert resolve_mixed_precision("auto") == expected


def test_the_environment_forces_a_runs_precision(monkeypatch):
    """scripts/test.sh runs the suite a second time with the other precision forced: every
    run then trains in it, whatever its config says (explicit settings included)."""
    monkeypatch.delenv(FORCE_PRECISION_ENV, raising=False)
    assert [run_precision(p) for p in ("auto", "no", "bf16")] == ["auto", "no", "bf16"]
    monkeypatch.setenv(FORCE_PRECISION_ENV, "no")
    assert [run_precision(p) for p in ("auto", "no", "bf16")] == ["no", "no", "no"]
    monkeypatch.setenv(FORCE_PRECISION_ENV, "bf16")
    assert run_precision("no") == "bf16"
    monkeypatch.setenv(FORCE_PRECISION_ENV, "fp8")
    with pytest.raises(XlvizError, match=FORCE_PRECISION_ENV):
        run_precision("auto")


def test_auto_stays_float32_with_a_torch_that_has_no_cpu_probes(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.delattr(torch.cpu, "_is_amx_tile_supported")
    monkeypatch.delattr(torch.cpu, "_is_avx512_bf16_supported")
    assert resolve_mixed_precision("auto") == "no"


def test_bf16_step2_computes_in_bf16_and_restores_float32_frozen_weights_exactly():
    """Step 2 under bf16: the body runs in bf16 with its own eager attention, only the new embeddings
    move, and afterwards every weight is float32 again, the frozen ones bit for bit."""
    torch.manual_seed(0)
    l1 = BertForMaskedLM(bert_config(50, "tiny", max_position_embeddings=16))
    model = make_l2_mlm(l1, 40, seed=1)
    freeze_for_step2(model)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and len(trainable) < len(before)
    seen = []
    hook = model.bert.encoder.layer[0].output.dense.register_forward_hook(lambda m, i, o: seen.append((o.dtype, m.weight.dtype)))
    impl = []
    hook2 = model.bert.encoder.layer[0].attention.self.register_forward_pre_hook(lambda m, a: impl.append(m.config._attn_implementation))

    acc = make_accelerator("bf16", cpu=True)
    assert acc.mixed_precision == "bf16"
    out = train(MaskedOnlyMLM(model), mlm_batches(40), LoopConfig(steps=4, lr=1e-2, log_every=1), acc).model
    hook.remove(), hook2.remove()

    assert seen and all(s == (torch.bfloat16, torch.bfloat16) for s in seen)
    assert set(impl) == {BF16_ATTENTION} and out.config._attn_implementation == "sdpa"
    for n, p in out.named_parameters():
        assert p.dtype == torch.float32, n
        if n in trainable:
            assert not torch.equal(p, before[n]), f"{n} did not train"
        else:
            assert torch.equal(p, before[n]), f"frozen {n} changed"


def test_bf16_attention_is_eager_attention_with_float32_softmax():
    """The attention Bf16Weights switches to: in float32 it is eager attention exactly (the
    padding mask included); in bf16 its probabilities come from a float32 softmax, so they
    sum to 1 within bf16 rounding and masked keys get exactly 0."""
    torch.manual_seed(0)
    model = BertForMaskedLM(bert_config(50, "tiny", max_position_embeddings=16)).bert.eval()
    ids = torch.randint(5, 50, (3, 10))
    mask = torch.ones(3, 10, dtype=torch.long)
    mask[1, 6:] = 0
    mask[2, 3:] = 0
    model.set_attn_implementation("eager")
    ref = model(ids, attention_mask=mask, output_attentions=True)
    model.set_attn_implementation(BF16_ATTENTION)
    out = model(ids, attention_mask=mask, output_attentions=True)
    assert torch.equal(ref.last_hidden_state, out.last_hidden_state)
    assert all(torch.equal(a, b) for a, b in zip(ref.attentions, out.attentions))
    for config in (RobertaConfig, DistilBertConfig):  # other families route attention through it too
        kw = dict(dim=32, n_layers=2, n_heads=2, hidden_dim=64) if config is DistilBertConfig else \
            dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
        other = AutoModelForMaskedLM.from_config(config(vocab_size=60, **kw), attn_implementation="eager").eval()
        expected = other(input_ids=ids, attention_mask=mask).logits
        other.set_attn_implementation(BF16_ATTENTION)
        assert torch.equal(other(input_ids=ids, attention_mask=mask).logits, expected)
    probs = model.to(torch.bfloat16)(ids, attention_mask=mask, output_attentions=True).attentions[0]
    assert probs.dtype == torch.bfloat16
    assert (probs[2, :, :, 3:] == 0).all() and (probs[1, :, :, 6:] == 0).all()
    assert torch.allclose(probs.float().sum(-1), torch.ones(3, 2, 10), atol=1e-2)


def test_bf16_master_weights_keep_updates_bf16_would_round_away():
    """A weight of 1.0 moved by ~1e-3 per step: stored in bf16 (spacing 2**-8 just below 1)
    each update rounds to nothing; the float32 master copy follows float32 training exactly."""
    layer = torch.nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        layer.weight.fill_(1.0)

    class Loss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = layer

        def forward(self, x):
            return self.layer(x.to(self.layer.weight.dtype)).float().sum()

    def run(precision: str) -> torch.nn.Linear:
        with torch.no_grad():
            layer.weight.fill_(1.0)
        batches = iter(lambda: {"x": torch.ones(1, 1)}, None)
        cfg = LoopConfig(steps=5, lr=1e-3, warmup_ratio=0.0, weight_decay=0.0, max_grad_norm=0.0)
        return train(Loss(), batches, cfg, make_accelerator(precision, cpu=True)).layer.weight.item()

    reference = run("no")
    assert reference < 1.0 - 3e-3  # AdamW moved it by ~lr per step
    assert run("bf16") == pytest.approx(reference, abs=1e-6)
    # stored in bf16, each ~1e-3 step would round back to 1.0: the weight would never move
    assert (torch.tensor(1.0, dtype=torch.bfloat16) - torch.tensor(1e-3, dtype=torch.bfloat16)).item() == 1.0


def test_bf16_weights_object_round_trip_without_training():
    torch.manual_seed(0)
    model = BertForMaskedLM(bert_config(30, "tiny", max_position_embeddings=8))
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    w = Bf16Weights(model)
    assert all(p.dtype == torch.bfloat16 for p in model.parameters())
    assert all(p.dtype == torch.float32 for _, p in w.named_parameters())
    w.restore()
    assert all(torch.equal(p, before[n]) for n, p in model.named_parameters())


def test_span_loss_matches_the_models_own_loss():
    torch.manual_seed(0)
    model = BertForQuestionAnswering(bert_config(30, "tiny", max_position_embeddings=16)).eval()
    batch = {"input_ids": torch.randint(5, 30, (3, 12)), "attention_mask": torch.ones(3, 12, dtype=torch.long)}
    starts, ends = torch.tensor([1, 4, 40]), torch.tensor([2, 7, 50])  # the third lies outside: ignored
    own = model(**batch, start_positions=starts, end_positions=ends).loss
    ours = QALoss(model)(**batch, start_positions=starts.int(), end_positions=ends.int())
    assert ours.dtype == torch.float32
    assert torch.allclose(own, ours, atol=1e-6)
    out = model(**batch)
    by_hand = 0.5 * (torch.nn.functional.cross_entropy(out.start_logits[:2], starts[:2])
                     + torch.nn.functional.cross_entropy(out.end_logits[:2], ends[:2]))
    assert torch.allclose(span_loss(out.start_logits, out.end_logits, starts, ends), by_hand, atol=1e-6)
