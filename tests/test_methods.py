"""The method interface at the parameter level: for every training stage of every registered
system, a backward pass through the model exactly as the stage builds it reaches the
parameters the stage declares (and only those); MONOTRANS's port trains what it trained
before; jointpair-disjoint shares no token id but the specials; the registry drives the CLI."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import pytest
import torch
from transformers import AutoTokenizer, BertForMaskedLM

from xlviz.cli import build_parser
from xlviz.cli import main as cli
from xlviz.errors import XlvizError
from xlviz.methods import all_systems, method_of, methods, resolve
from xlviz.methods.monotrans import LEGACY_VARIANTS
from xlviz.models.monotrans import N_SPECIAL
from xlviz.runs import Run
from xlviz.transfer.config import TransferConfig
from xlviz.transfer.pipeline import Pipeline

TINY = {
    "model_size": "tiny", "vocab_size": 200, "batch_size": 8, "mlm_batch_size": 8, "pretrain_steps": 4, "transfer_steps": 2,
    "finetune_steps": 2, "log_every": 2, "mixed_precision": "no",
    "ppa_steps": 2, "ppa_batch_size": 8, "ppa_queue_size": 16,
    "world": {"corpus_documents": 120, "qa_train_paragraphs": 20, "qa_dev_paragraphs": 3, "qa_test_paragraphs": 4,
              "parallel_pairs": 20, "agreement_pairs": 9, "sense_pairs": 6,
              "parallel_train_pairs": 40},
}


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory) -> Pipeline:
    """A tiny run of every system, finished (its stages' inputs exist for ``build``)."""
    root = tmp_path_factory.mktemp("bench")
    config = root / "tiny.json"
    config.write_text(json.dumps({**TINY, "methods": ["all"]}))
    assert cli(["transfer", "--config", str(config), "--run-dir", str(root / "run")]) == 0
    return Pipeline.resume(root / "run")


def synthetic_batch(model, vocab: int, qa: bool) -> dict:
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(N_SPECIAL, vocab, (2, 12), generator=g)
    ids[:, 0], ids[:, -1] = 2, 3  # [CLS] ... [SEP]: the special rows are in the batch
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids)}
    if qa:
        batch.update(start_positions=torch.tensor([3, 4]), end_positions=torch.tensor([5, 6]))
    else:
        batch["labels"] = ids.clone()
    if "pair_input_ids" in inspect.signature(model.forward).parameters:  # models that read a sentence with its pair
        pair = ids.flip(0)[:, :9].clone()
        pair[:, -1] = 3
        batch.update(pair_input_ids=pair, pair_attention_mask=torch.ones_like(pair))
        if not qa:
            batch["pair_labels"] = pair.clone()
    return batch


def gradients(model) -> dict[str, torch.Tensor | None]:
    """Gradients of one synthetic batch (per language for models with language-specific parts)."""
    model.train()
    vocab = model.config.vocab_size
    batch = synthetic_batch(model, vocab, qa="QuestionAnswering" in type(model).__name__)
    for lang in getattr(model, "languages", [None]):
        out = model(**batch, language=lang) if lang else model(**batch)
        out.loss.backward()
    return {n: p.grad for n, p in model.named_parameters()}


# Parameters whose gradient is identically zero in exact arithmetic: the span head's bias adds one
# constant to every position's start (end) logit and the softmax is shift-invariant, so its
# gradient is sum_i (p_i - onehot_i) = 0. Whether rounding leaves it at exactly 0 depends on the
# CPU's kernels and precision (0 in float32 on AVX2, not under bf16), so "trained" cannot mean
# "got a non-zero gradient" for these: the check is that the backward pass reaches them and that
# their gradient is zero up to rounding.
ZERO_BY_CONSTRUCTION = re.compile(r"(.*\.)?qa_outputs\.bias")


def training_stages(run: Pipeline):
    table = run.stage_table()
    return [s for s in table.values() if s.build is not None]


@pytest.mark.slow
def test_every_stage_trains_exactly_what_it_declares(bench_run):
    stages = training_stages(bench_run)
    assert {s.phase for s in stages} == {"pretrain", "transfer", "finetune"}
    for stage in stages:
        model = stage.build(bench_run)
        grads = gradients(model)
        declared = [re.compile(p) for p in stage.trains]
        trained = {n for n, g in grads.items() if g is not None and (g.abs().sum() > 0 or ZERO_BY_CONSTRUCTION.fullmatch(n))}
        should = {n for n in grads if any(p.fullmatch(n) for p in declared)}
        assert trained == should, f"{stage.name}: trained {sorted(trained ^ should)} differ from the declaration"
        for n in trained:
            if ZERO_BY_CONSTRUCTION.fullmatch(n):  # reached by the backward pass, and zero up to rounding
                scale = max(float(g.abs().max()) for g in grads.values() if g is not None)
                assert float(grads[n].abs().max()) <= 1e-4 * scale, f"{stage.name}: {n} gradient is not shift-invariant"
        emb = (model.embeddings.word_embeddings if hasattr(model, "languages") else model.get_input_embeddings()).weight.grad
        assert emb is not None, stage.name
        row_norm = emb.abs().sum(1)
        if stage.rows == "special":
            assert row_norm[N_SPECIAL:].sum() == 0 and row_norm[2] > 0, f"{stage.name}: only special rows train"
        elif stage.rows == "all but special":
            assert row_norm[:N_SPECIAL].sum() == 0 and row_norm[N_SPECIAL:].sum() > 0, f"{stage.name}: special rows stay L1's"


@pytest.mark.slow
def test_wu_language_layers_get_no_gradient_from_the_other_language(bench_run):
    stage = next(s for s in training_stages(bench_run) if s.name.startswith("s1_wu-shared-top-"))
    model = stage.build(bench_run)
    first, second = model.languages
    model(**synthetic_batch(model, model.config.vocab_size, qa=False), language=first).loss.backward()
    assert all(p.grad is None or p.grad.abs().sum() == 0 for p in model.language_layers(second).parameters())
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.language_layers(first).parameters() if p.dim() > 1)
    assert all(p.grad is not None for p in model.shared.parameters())


@pytest.mark.slow
def test_monotrans_port_trains_what_the_pipeline_trained(bench_run):
    """The names the former pipeline's freeze functions left trainable, per stage."""
    table = bench_run.stage_table()

    def trainable(name):
        model = table[name].build(bench_run)
        return sorted(n for n, p in model.named_parameters() if p.requires_grad)

    assert trainable("s2_transfer-svo") == ["bert.embeddings.word_embeddings.weight", "cls.predictions.bias"]
    assert trainable("s2_transfer-sov-pos") == ["bert.embeddings.position_embeddings.weight", "bert.embeddings.word_embeddings.weight",
                                                "cls.predictions.bias"]
    adapters = trainable("s2_transfer-svo-adapters")
    assert adapters[:2] == ["bert.embeddings.word_embeddings.weight"] + [n for n in adapters if ".adapter." in n][:1]
    assert all(".adapter." in n for n in adapters if n not in ("bert.embeddings.word_embeddings.weight", "cls.predictions.bias"))
    every = trainable("s3_finetune")
    assert "bert.embeddings.position_embeddings.weight" in every and "qa_outputs.weight" in every
    assert "bert.embeddings.position_embeddings.weight" not in trainable("s3_finetune-pos")
    assert trainable("s3_finetune-pos-noise") == trainable("s3_finetune-pos")


@pytest.mark.slow
def test_cumulative_rows_combine_their_variants(bench_run):
    stages = bench_run.stage_table()
    assert "s2_transfer-svo-pos-adapters" in stages and "s3_finetune-pos-noise" in stages
    rows = {(r["system"], r["language"]): r for r in bench_run.run.results()}
    for system in ("monotrans+pos+noise", "monotrans+pos+noise+adapters", "jointpair-disjoint", "jointmulti"):
        assert (system, "sov") in rows and rows[(system, "sov")]["method"] == method_of(system).name
    assert ("mono-l2", "sov") not in rows  # encoders only
    # pair models carry their own L1 score (the ratio compares one model with itself); shared-body systems don't
    assert "l1_f1" in rows[("jointpair-disjoint", "sov")] and "l1_f1" in rows[("wu-shared-top-1", "svo")]
    assert "l1_exact_match" in rows[("jointpair-disjoint", "sov")]  # EM ratios of pair models divide by it
    assert "l1_f1" not in rows[("monotrans", "sov")] and "l1_f1" not in rows[("jointmulti", "sov")]
    assert (bench_run.path("encoders", "mono-l2-sov") / "model.safetensors").is_file()


@pytest.mark.slow
def test_clwe_follows_vecmaps_stochastic_start(bench_run):
    """The vectors stage passes ``clwe_stochastic_initial`` to the self-learning loop: each
    L2's mapping starts at VecMap's keep probability 0.1 and records it."""
    report = json.loads(bench_run.path("clwe", "mapping.json").read_text())
    assert report["stochastic_initial"] == 0.1
    for lang in ("svo", "sov"):
        assert report["languages"][lang]["keep_prob"][0] == 0.1


@pytest.mark.slow
def test_jointpair_disjoint_shares_only_special_ids(bench_run):
    from xlviz.data.joint_vocab import DisjointVocab

    run = bench_run
    folder = run.path("s1_jointpair-disjoint-sov")
    joint = BertForMaskedLM.from_pretrained(folder / "joint").get_input_embeddings().weight
    toks = {lang: AutoTokenizer.from_pretrained(folder / lang) for lang in ("en", "sov")}
    vocab = DisjointVocab(toks, ["en", "sov"])
    rows = {lang: set(vocab.language_rows(lang).tolist()) for lang in toks}
    assert rows["en"] & rows["sov"] == set(range(N_SPECIAL))
    assert joint.shape[0] == len(toks["en"]) + len(toks["sov"]) - N_SPECIAL
    for lang in toks:
        sliced = BertForMaskedLM.from_pretrained(folder / lang).get_input_embeddings().weight
        assert torch.equal(sliced, joint[vocab.language_rows(lang)])


def test_registry_resolves_names_groups_and_legacy_variants():
    assert resolve("monotrans") == ["monotrans"]
    assert resolve(["all"]) == all_systems()
    assert set(resolve("joint")) == {"jointpair-disjoint", "jointpair-joint", "jointmulti", "jointmulti-large"}
    with pytest.raises(XlvizError) as e:
        resolve("monotrans,nonsense")
    assert e.value.field == "methods"
    cfg = TransferConfig.from_dict({"variants": ["base", "pos"]})
    assert cfg.methods == ["monotrans", "monotrans+pos"]
    assert set(LEGACY_VARIANTS.values()) <= set(all_systems())


def test_cli_lists_every_registered_system():
    help_text = build_parser()._subparsers._group_actions[0].choices["transfer"].format_help()
    flat = " ".join(help_text.split()).replace("- ", "-")  # argparse may wrap a line after a hyphen
    for m in methods().values():
        for system in m.systems:
            assert system in flat


def test_a_new_method_module_is_one_registry_entry(monkeypatch):
    """What adding a method takes: a module defining METHOD; the registry finds it."""
    import xlviz.methods as registry
    from xlviz.methods.base import Method

    monkeypatch.setattr(registry, "_METHODS", {**methods(), "toy": Method("toy", ("toy-system",))})
    assert resolve("toy-system") == ["toy-system"] and method_of("toy-system").name == "toy"


def test_a_method_refuses_a_config_it_cannot_run_before_any_folder_is_made(tmp_path):
    assert cli(["transfer", "--methods", "wu-shared-top-9", "--model-size", "tiny", "--out", str(tmp_path / "runs")]) == 2
    assert not (tmp_path / "runs").exists()
    assert resolve("wu-sweep", layers=2) == ["wu-shared-top-2", "wu-shared-top-1", "wu-shared-top-0"]


@pytest.mark.slow
def test_pair_models_analyse_one_models_two_languages(bench_run):
    """encoders/<system>-en is the first pair's English; for the other L2s a pair model exports
    its own pair's English (<system>@<l2>-en), which the L1-L2 analyses pair with that L2."""
    from safetensors.torch import load_file

    from xlviz.analysis.reports import run_info

    enc = bench_run.path("encoders")
    info = run_info(bench_run.path())
    for system in ("jointpair-disjoint", "veco", "ppa"):
        pair_en = enc / f"{system}@sov-en"
        assert (pair_en / "model.safetensors").is_file(), system
        assert info.system_encoders("sov")[system] == (pair_en, enc / f"{system}-sov")
        assert info.system_encoders("svo")[system] == (enc / f"{system}-en", enc / f"{system}-svo")
    a = load_file(enc / "jointpair-disjoint@sov-en" / "model.safetensors")
    b = load_file(bench_run.path("s1_jointpair-disjoint-sov", "en") / "model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in b)
    # shared-body systems have one English encoder for every L2
    assert not list(enc.glob("monotrans@*")) and not list(enc.glob("jointmulti@*"))
    assert "jointpair-disjoint@sov" not in info.system_encoders("sov")
