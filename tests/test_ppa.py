"""PPA (Pan et al. 2021): MoCo's momentum encoder, queue and loss, random input shuffling, TLM
on the concatenated pair, code-switched translate-train, the queue under two processes, and a
tiny end-to-end run of ``ppa`` and ``ppa-codeswitch``.

Run as a script (``python tests/test_ppa.py OUT``) under ``accelerate launch``, this file is
the two-process worker of :func:`test_keys_are_gathered_across_processes_before_enqueueing`.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
import torch
from transformers import BertConfig, BertForMaskedLM

from xlviz.data.codeswitch import codeswitch_examples, feature_tensors, mixed_train_features, monolingual_examples
from xlviz.data.tokenization import train_tokenizer
from xlviz.data.world import World, WorldConfig
from xlviz.errors import XlvizError
from xlviz.training.moco import MoCo, info_nce
from xlviz.training.ppa import PPAModel, Specials, pair_batches

SP = Specials(cls=2, sep=3, pad=0, mask=4, vocab_size=300, special=(0, 1, 2, 3, 4))


def tiny_mlm(seed: int = 0) -> BertForMaskedLM:
    torch.manual_seed(seed)
    return BertForMaskedLM(BertConfig(vocab_size=300, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                      intermediate_size=32, max_position_embeddings=64,
                                      hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))


def toy_pairs(n: int, seed: int = 0) -> list[tuple[list[int], list[int]]]:
    """Pairs whose first side draws ids 100-199 and second side 200-299, of 3-9 tokens."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        la, lb = (int(x) for x in torch.randint(3, 10, (2,), generator=g))
        out.append((torch.randint(100, 200, (la,), generator=g).tolist(), torch.randint(200, 300, (lb,), generator=g).tolist()))
    return out


# --------------------------------------------------------------------------- MoCo
def test_momentum_encoder_gets_no_gradient_and_moves_by_exactly_the_ema():
    mlm = tiny_mlm()
    moco = MoCo(mlm.bert, 16, dim=8, queue_size=12, momentum=0.9)
    batch = next(pair_batches(toy_pairs(40), 4, SP, objective="moco"))
    loss = moco(batch["input_ids"], batch["key_input_ids"], batch["attention_mask"], batch["key_attention_mask"])
    loss.backward()
    frozen = list(moco.encoder_k.parameters()) + list(moco.head_k.parameters())
    assert frozen and all(p.grad is None and not p.requires_grad for p in frozen)
    assert all(p.grad is not None for p in moco.head_q.parameters())
    assert mlm.bert.embeddings.word_embeddings.weight.grad.abs().sum() > 0

    with torch.no_grad():  # an optimizer step on the query side
        for q, _ in moco.key_pairs():
            q.add_(torch.randn_like(q) * 0.1)
    before = [(q.detach().clone(), k.detach().clone()) for q, k in moco.key_pairs()]
    moco.momentum_update()
    for (q, k_old), (_, k_new) in zip(before, moco.key_pairs()):
        expected = k_old * 0.9 + q * (1 - 0.9)
        assert torch.allclose(k_new, expected, rtol=1e-6, atol=1e-7)
        assert not torch.equal(k_new, k_old) or torch.equal(q, k_old)


def test_queue_holds_the_last_keys_in_order_and_wraps():
    moco = MoCo(tiny_mlm().bert, 16, dim=4, queue_size=5)
    a, b, c = torch.randn(3, 4), torch.randn(3, 4), torch.randn(7, 4)
    moco.enqueue(a)
    assert torch.equal(moco.ordered_queue()[-3:], a) and int(moco.queue_ptr) == 3
    moco.enqueue(b)  # wraps: the two oldest of a are gone
    assert torch.equal(moco.ordered_queue(), torch.cat([a, b])[-5:]) and int(moco.queue_ptr) == 1
    moco.enqueue(c)  # more keys than room: the last five
    assert torch.equal(moco.ordered_queue(), c[-5:])


def test_info_nce_against_a_hand_computed_value():
    q = torch.tensor([[0.2, 0.1]])
    k = torch.tensor([[0.3, 0.1]])
    neg = torch.tensor([[0.1, 0.4], [-0.2, 0.3]])
    t = 0.05
    pos, n1, n2 = 0.07 / t, 0.06 / t, -0.01 / t
    expected = -(pos - math.log(math.exp(pos) + math.exp(n1) + math.exp(n2)))
    assert info_nce(q, k, neg, t).item() == pytest.approx(expected, rel=1e-5)
    assert expected == pytest.approx(0.6931, abs=0.2)  # a value where float32 has digits to spare
    # two queries: the mean
    q2 = torch.tensor([[0.2, 0.1], [0.0, 0.1]])
    k2 = torch.tensor([[0.3, 0.1], [0.1, 0.2]])
    two = -(0.02 / t - math.log(math.exp(0.02 / t) + math.exp(0.04 / t) + math.exp(0.03 / t)))
    one = expected
    assert info_nce(q2, k2, neg, t).item() == pytest.approx((one + two) / 2, rel=1e-5)


# --------------------------------------------------------------------------- shuffling and TLM
def test_shuffling_swaps_sides_about_half_the_time_and_orders_tlm_alike():
    pairs = toy_pairs(400)
    stream = pair_batches(pairs, 50, SP, objective="moco+tlm", seed=3)
    swapped = total = 0
    for _ in range(8):
        b = next(stream)
        for row in range(50):
            q = b["input_ids"][row][b["attention_mask"][row].bool()].tolist()[1:-1]
            k = b["key_input_ids"][row][b["key_attention_mask"][row].bool()].tolist()[1:-1]
            assert (q, k) in pairs or (k, q) in pairs  # the two views are one pair's two sides
            swapped += q[0] >= 200
            total += 1
            word = b["word_input_ids"][row].clone()
            labels = b["word_labels"][row]
            word[labels != -100] = labels[labels != -100]  # unmask
            assert word[b["word_attention_mask"][row].bool()].tolist() == [2, *q, 3, *k, 3]  # same order as the views
    assert 0.4 < swapped / total < 0.6, swapped / total


def test_tlm_masks_across_both_halves_with_positions_continuing():
    b = next(pair_batches(toy_pairs(300), 256, SP, objective="moco+tlm", seed=1))
    ids, labels, mask = b["word_input_ids"], b["word_labels"], b["word_attention_mask"]
    original = torch.where(labels != -100, labels, ids)
    first_sep = (original == 3).int().argmax(1)
    pos = torch.arange(ids.shape[1]).expand_as(ids)
    chosen = labels != -100
    assert chosen[pos < first_sep[:, None]].sum() > 0 and chosen[(pos > first_sep[:, None]) & mask.bool()].sum() > 0
    assert not chosen[torch.isin(original, torch.tensor(SP.special))].any()  # [CLS], [SEP], padding never
    rate = chosen.sum().item() / (~torch.isin(original, torch.tensor(SP.special))).sum().item()
    assert 0.12 < rate < 0.18
    masked_to = ids[chosen]
    assert 0.75 < (masked_to == SP.mask).float().mean() < 0.85  # 80% [MASK]

    model = PPAModel(tiny_mlm(), "tlm")
    seen = {}

    def hook(module, args, kwargs, output):
        seen.update(kwargs, output=output)

    model.model.bert.embeddings.register_forward_hook(hook, with_kwargs=True)
    model(**b)
    emb = model.model.bert.embeddings
    assert seen.get("position_ids") is None and seen.get("token_type_ids") is None
    model.eval()
    explicit = emb(input_ids=ids, position_ids=torch.arange(ids.shape[1])[None], token_type_ids=torch.zeros_like(ids))
    model.model.bert.embeddings.eval()
    assert torch.allclose(emb(input_ids=ids), explicit)  # positions 0..L-1 across both halves, one token type


def test_moco_plus_mlm_masks_each_sentence_alone():
    b = next(pair_batches(toy_pairs(40), 8, SP, objective="moco+mlm"))
    assert b["word_input_ids"].shape[0] == 16 and b["input_ids"].shape[0] == 8
    original = torch.where(b["word_labels"] != -100, b["word_labels"], b["word_input_ids"])
    for row in original:
        body = row[(row >= 100)]
        assert bool((body < 200).all()) or bool((body >= 200).all())  # one language per row


def test_without_a_word_task_the_lm_head_is_frozen():
    model = PPAModel(tiny_mlm(), "moco")
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert "model.bert.embeddings.word_embeddings.weight" in trainable
    assert not any(n.startswith("model.cls.") for n in trainable)
    assert not any(n.startswith(("moco.encoder_k", "moco.head_k")) for n in trainable)


# --------------------------------------------------------------------------- code-switching
@pytest.fixture(scope="module")
def world() -> World:
    return World(WorldConfig(corpus_documents=60, qa_train_paragraphs=12, qa_dev_paragraphs=2, qa_test_paragraphs=3,
                             parallel_pairs=20, parallel_train_pairs=40))


def test_codeswitching_doubles_the_examples_and_keeps_offsets_right(world):
    en, sov = world.qa("train"), world.translate_train("sov")
    examples = codeswitch_examples(en, sov, "en", "sov")
    n = len(monolingual_examples(en, "en"))
    assert len(examples) == 2 * n
    contexts = {"en": {p["context"] for a in en["data"] for p in a["paragraphs"]},
                "sov": {p["context"] for a in sov["data"] for p in a["paragraphs"]}}
    questions = {"en": {q["question"] for a in en["data"] for p in a["paragraphs"] for q in p["qas"]},
                 "sov": {q["question"] for a in sov["data"] for p in a["paragraphs"] for q in p["qas"]}}
    for ex in examples:
        assert ex["question_lang"] != ex["context_lang"]
        assert ex["context"] in contexts[ex["context_lang"]] and ex["question"] in questions[ex["question_lang"]]
        ans = ex["answers"][0]
        assert ex["context"][ans["answer_start"]: ans["answer_start"] + len(ans["text"])] == ans["text"]
    assert {(e["question_lang"], e["context_lang"]) for e in examples[:2]} == {("sov", "en"), ("en", "sov")}

    toks = {lang: train_tokenizer(world.corpus(lang), 200) for lang in ("en", "sov")}
    feats = mixed_train_features(examples, toks, lambda lang, ids: list(ids), 64, 24)
    labelled = 0
    for f in feats:
        ex = examples[f["example_index"]]
        if f["start_positions"] == 0:
            continue
        labelled += 1
        span = toks[ex["context_lang"]].decode(f["input_ids"][f["start_positions"]: f["end_positions"] + 1])
        assert "".join(span.split()).lower() == "".join(ex["answers"][0]["text"].split()).lower()
        assert f["token_type_ids"][f["start_positions"]] == 1  # the answer is in the context part
    assert labelled >= len(examples) * 0.9
    t = feature_tensors(feats[:4], 0)
    assert t["input_ids"].shape == t["attention_mask"].shape == t["token_type_ids"].shape


# --------------------------------------------------------------------------- settings
def test_ppa_settings_are_validated(tmp_path):
    from tests.tiny_models import make_tiny
    from xlviz.transfer.config import TransferConfig

    base = {"methods": ["ppa"], "model_size": "tiny"}
    for bad, field in (({"ppa_objective": "moco+xyz"}, "ppa_objective"), ({"ppa_queue_size": 5000}, "ppa_queue_size"),
                       ({"ppa_momentum": 1.0}, "ppa_momentum"), ({"ppa_steps": 0}, "ppa_steps"),
                       ({"ppa_base": str(tmp_path / "nowhere")}, "ppa_base"), ({"ppa_pairs": 3000}, "ppa_pairs")):
        with pytest.raises(XlvizError) as e:
            TransferConfig.from_dict({**base, **bad})
        assert e.value.field == field, (bad, e.value)
    folder = make_tiny("xlm-roberta", tmp_path / "xlmr", task="mlm")
    assert TransferConfig.from_dict({**base, "ppa_base": str(folder)}).ppa_base == str(folder)
    (folder / "config.json").write_text(json.dumps({**json.loads((folder / "config.json").read_text()), "model_type": "no-such-model"}))
    with pytest.raises(XlvizError, match="ppa_base|config.json|model type"):
        TransferConfig.from_dict({**base, "ppa_base": str(folder)})


# --------------------------------------------------------------------------- two processes
def _worker(out: str) -> None:
    """One of two processes: a MoCo step through accelerate on this process's own keys."""
    from accelerate import Accelerator

    acc = Accelerator(cpu=True)
    moco = MoCo(tiny_mlm(seed=0).bert, 16, dim=4, queue_size=24, seed=0)
    model = acc.prepare(moco)
    pairs = toy_pairs(64, seed=0)
    batch = next(pair_batches(pairs, 8, SP, objective="moco", seed=5, rank=acc.process_index, world_size=acc.num_processes))
    model.train()
    loss = model(batch["input_ids"], batch["key_input_ids"], batch["attention_mask"], batch["key_attention_mask"])
    acc.backward(loss)
    own = moco.key(batch["key_input_ids"], batch["key_attention_mask"])  # the keys this process enqueued (no update since)
    from safetensors.torch import save_file

    save_file({"queue": moco.ordered_queue().contiguous(), "ptr": torch.tensor(int(moco.queue_ptr)), "keys": own.contiguous()},
              Path(out) / f"rank{acc.process_index}.safetensors")


@pytest.mark.slow
def test_keys_are_gathered_across_processes_before_enqueueing(tmp_path):
    from tests.test_distributed import run_launched

    run_launched([str(Path(__file__).resolve()), str(tmp_path)], cwd=tmp_path)
    from safetensors.torch import load_file

    r0, r1 = (load_file(tmp_path / f"rank{r}.safetensors") for r in (0, 1))
    assert r0["ptr"] == r1["ptr"] == 16  # 2 processes x 8 keys
    assert torch.equal(r0["queue"], r1["queue"])  # one queue on both
    assert not torch.allclose(r0["keys"], r1["keys"])  # the processes encoded different pairs
    assert torch.allclose(r0["queue"][-16:], torch.cat([r0["keys"], r1["keys"]]), atol=1e-6)


# --------------------------------------------------------------------------- end to end
@pytest.mark.slow
def test_tiny_run_of_ppa_and_ppa_codeswitch(tmp_path):
    from tests.test_methods import TINY
    from xlviz.cli import main as cli

    config = tmp_path / "tiny.json"
    config.write_text(json.dumps({**TINY, "methods": ["ppa", "ppa-codeswitch"]}))
    assert cli(["transfer", "--config", str(config), "--run-dir", str(tmp_path / "run")]) == 0
    rows = json.loads((tmp_path / "run" / "results.json").read_text())
    rows = rows["results"] if isinstance(rows, dict) else rows
    by = {(r["system"], r["language"]): r for r in rows}
    assert set(by) == {(s, lang) for s in ("ppa", "ppa-codeswitch") for lang in ("en", "svo", "sov")}
    for (system, _), r in by.items():
        assert r["method"] == "ppa" and r["parallel_pairs"] == 40 and r["l2_labels"] is (system == "ppa-codeswitch")
    assert (tmp_path / "run" / "s2_ppa-sov" / "sov" / "model.safetensors").is_file()
    assert (tmp_path / "run" / "encoders" / "ppa-sov" / "model.safetensors").is_file()


@pytest.mark.slow
def test_ppa_aligns_a_hugging_face_model_folder(tmp_path):
    """``ppa_base`` = a saved HF masked LM (here a tiny BERT): one model aligned on every L2's
    pairs, read by its own tokenizer in every language."""
    from tests.test_methods import TINY
    from tests.tiny_models import make_tiny
    from xlviz.cli import main as cli

    folder = make_tiny("bert", tmp_path / "hf", task="mlm", max_position_embeddings=128)
    config = tmp_path / "tiny.json"
    config.write_text(json.dumps({**TINY, "methods": ["ppa"], "ppa_base": str(folder), "ppa_objective": "moco+mlm"}))
    assert cli(["transfer", "--config", str(config), "--run-dir", str(tmp_path / "run")]) == 0
    rows = json.loads((tmp_path / "run" / "results.json").read_text())
    rows = rows["results"] if isinstance(rows, dict) else rows
    assert {r["language"] for r in rows} == {"en", "svo", "sov"} and all(r["parallel_pairs"] == 40 for r in rows)
    assert (tmp_path / "run" / "s2_ppa" / "joint" / "model.safetensors").is_file() and not (tmp_path / "run" / "s2_ppa-sov").exists()


if __name__ == "__main__":
    _worker(sys.argv[1])
