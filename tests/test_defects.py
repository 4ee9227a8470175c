"""The defects found in review of issue 14 ("Faithful to the paper"), one test (or two) each:

1. +pos: the zero-shot L2 model's [CLS] input has no position/segment embedding;
2. positions past step 1's block length are pre-trained (a share of full-length blocks);
3. the analyses' floor is the floor scored in results.json (step 2's starting point: the world's
   l2_init_std, a corpus source's initializer_range or l1_stats);
4. the app's loader keeps a floor's init (and init std);
5. the corpus run's retrieval layer is chosen on held-out pairs.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from transformers import BertForMaskedLM

from xlviz.models.floor import make_l2_mlm
from xlviz.models.monotrans import (
    N_SPECIAL, bert_config, drop_cls_position_and_segment, fold_cls_position, freeze_for_step2, freeze_for_step3,
    qa_from_mlm, zero_shot_model,
)
from xlviz.training.mlm import MaskedOnlyMLM, is_long_step, iter_batches, iter_blocks, mask_tokens, mlm_batches
from xlviz.transfer.config import TransferConfig

V1, V2 = 60, 45
TINY_RUN = {
    "model_size": "tiny", "vocab_size": 200, "batch_size": 8, "mlm_batch_size": 8, "block_size": 8, "qa_max_length": 32,
    "doc_stride": 16, "pretrain_steps": 2, "transfer_steps": 2, "finetune_steps": 2, "log_every": 1, "mixed_precision": "no",
    "world": {"corpus_documents": 60, "qa_train_paragraphs": 6, "qa_dev_paragraphs": 2, "qa_test_paragraphs": 2,
              "parallel_pairs": 8, "agreement_pairs": 3, "sense_pairs": 3},
}


def sgd(module, batch: dict, n: int = 3, lr: float = 0.5) -> None:
    opt = torch.optim.SGD([p for p in module.parameters() if p.requires_grad], lr=lr)
    for _ in range(n):
        out = module(**batch)
        (out if torch.is_tensor(out) else out.loss).backward()
        opt.step()
        opt.zero_grad()


# --------------------------------------------------------------------------- 1. +pos [CLS]
def test_pos_zero_shot_cls_has_no_position_or_segment_embedding():
    """Steps 2-4 of the +pos variant as the pipeline runs them: step 3 trains the segment
    embeddings, so the L2 position row 0 folded in step 2 (against the pre-trained segment row)
    must be folded again in the zero-shot model."""
    torch.manual_seed(0)
    l1 = BertForMaskedLM(bert_config(V1, "tiny", max_position_embeddings=32))
    g = torch.Generator().manual_seed(1)
    # step 2 (+pos): L2 embeddings and positions, [CLS] without position/segment, then folded
    l2 = make_l2_mlm(l1, V2, seed=1)
    hooks = drop_cls_position_and_segment(l2)
    freeze_for_step2(l2, l2_positions=True)
    ids = torch.randint(N_SPECIAL, V2, (4, 16), generator=g)
    ids[:, 0] = 2
    inputs, labels = mask_tokens(ids, mask_id=4, vocab_size=V2, prob=0.5, generator=g)
    sgd(MaskedOnlyMLM(l2), {"input_ids": inputs, "labels": labels})
    for h in hooks:
        h.remove()
    fold_cls_position(l2)
    # step 3 (+pos): QA fine-tuning with L1 positions frozen; the segment embeddings train
    qa = qa_from_mlm(l1, seed=0)
    hooks = drop_cls_position_and_segment(qa)
    freeze_for_step3(qa, freeze_positions=True)
    x = torch.randint(N_SPECIAL, V1, (4, 16), generator=g)
    x[:, 0] = 2
    tt = torch.zeros_like(x)
    tt[:, 6:] = 1
    sgd(qa, {"input_ids": x, "token_type_ids": tt, "start_positions": torch.tensor([7, 8, 9, 10]),
             "end_positions": torch.tensor([8, 9, 11, 12])})
    for h in hooks:
        h.remove()
    fold_cls_position(qa)
    seg = qa.bert.embeddings.token_type_embeddings.weight
    assert not torch.allclose(seg[0], l2.bert.embeddings.token_type_embeddings.weight[0]), "step 3 moved the segment row"
    before = {n: p.detach().clone() for n, p in qa.named_parameters()}

    zs = zero_shot_model(qa, l2, l2_positions=True).eval()
    emb = zs.bert.embeddings
    cls_input = emb.position_embeddings.weight[0] + emb.token_type_embeddings.weight[0]
    assert cls_input.abs().max().item() < 1e-6, f"[CLS] carries {cls_input.abs().max().item():.4f} of position + segment"
    assert torch.equal(emb.position_embeddings.weight[1:], l2.bert.embeddings.position_embeddings.weight[1:])
    y = torch.randint(N_SPECIAL, V2, (2, 10), generator=g)
    y[:, 0] = 2
    word = emb.word_embeddings(y[:, :1])
    assert torch.allclose(emb(input_ids=y)[:, 0], emb.LayerNorm(word)[:, 0], atol=1e-4), "[CLS] reads its token embedding only"
    # the L1 model (used as is for L1 and fine-tuned once) is untouched
    assert all(torch.equal(before[n], p) for n, p in qa.named_parameters())


# --------------------------------------------------------------------------- 2. long blocks
class _Tok:
    cls_token_id, sep_token_id = 2, 3

    def __call__(self, lines, add_special_tokens=False):
        return {"input_ids": [[N_SPECIAL + (hash(w) % 50) for w in line.split()] for line in lines]}


TEXTS = [" ".join(f"w{i}_{j}" for j in range(7 + i % 5)) for i in range(400)]


def test_long_block_share_is_respected_with_equal_tokens_per_batch():
    assert sum(is_long_step(s, 0.1) for s in range(100)) == 10
    assert sum(is_long_step(s, 0.25) for s in range(40)) == 10 and not any(is_long_step(s, 0.0) for s in range(50))
    batches = mlm_batches(lambda: TEXTS, _Tok(), 8, 16, long_block_size=32, long_share=0.1, seed=3)
    shapes = [tuple(next(batches).shape) for _ in range(50)]
    assert shapes.count((4, 32)) == 5 and shapes.count((16, 8)) == 45, "a tenth of the batches are long, 16 x 8 = 4 x 32 tokens"
    # share 0 is exactly the short stream of before
    plain = iter_batches(iter_blocks(lambda: TEXTS, _Tok(), 8, seed=3), 16)
    mixed = mlm_batches(lambda: TEXTS, _Tok(), 8, 16, long_block_size=32, long_share=0.0, seed=3)
    assert all(torch.equal(next(plain), next(mixed)) for _ in range(20))


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A run folder with the world stage and two steps of step 1 done (a few seconds)."""
    from xlviz.transfer.pipeline import Pipeline

    cfg = TransferConfig.from_dict(json.loads(json.dumps(TINY_RUN)))
    pipe = Pipeline(cfg, tmp_path_factory.mktemp("runs") / "run")
    pipe.run.path.mkdir(parents=True)
    pipe.run.write_config(cfg.to_dict())
    pipe.run_stage("world")
    pipe.run_stage("s1_pretrain")
    return pipe


def test_step1_trains_positions_past_block_size(tiny_run, monkeypatch):
    """The pipeline's MLM stages feed a share of full-length blocks: every position row up to
    qa_max_length gets gradient, and the share of long batches is the configured one."""
    import xlviz.methods.common as common

    seen = []

    def fake_train(module, batches, loop, acc, on_log=None, desc=None):
        for _, batch in zip(range(20), batches):
            seen.append(batch["input_ids"].shape)
            module(**batch).backward()
        return SimpleNamespace(model=module.model)

    monkeypatch.setattr(common, "train", fake_train)
    monkeypatch.setattr(tiny_run.cfg, "long_block_share", 0.1)
    tok = tiny_run.tokenizer("en")
    model = BertForMaskedLM(bert_config(len(tok), "tiny", max_position_embeddings=32))
    common.train_mlm(tiny_run, model, "en", "s1_pretrain", 20, 1e-3)
    grad = model.bert.embeddings.position_embeddings.weight.grad
    assert (grad[8:32].abs().sum(1) > 0).all(), "positions 8-31 (past the 8-token blocks) are trained"
    assert sorted({s[1] for s in seen}) == [8, 32] and sum(s[1] == 32 for s in seen) == 2
    with pytest.raises(Exception, match="long_block_share"):
        TransferConfig.from_dict({**TINY_RUN, "long_block_share": 1.5})


# --------------------------------------------------------------------------- 3. analyses' floor
def test_analysis_floor_is_the_scored_floor(tiny_run):
    """reports' floor (run_info -> ModelSpec -> load_spec) has the pipeline's floor weights:
    same seed and the run's l2_init_std (0.002 here, not the model's 0.02)."""
    from xlviz.analysis.reports import run_info, run_systems
    from xlviz.models.reference import load_spec

    spec = next(s.b for s in run_systems(tiny_run.run.path, "svo") if s.name.endswith("floor"))
    analysed, _ = load_spec(spec, "mlm")
    l1 = BertForMaskedLM.from_pretrained(tiny_run.path("s1_pretrain"), use_safetensors=True)
    from xlviz.methods.monotrans import l2_init_model

    scored = l2_init_model(tiny_run, l1, "svo")
    a, b = analysed.bert.embeddings.word_embeddings.weight, scored.bert.embeddings.word_embeddings.weight
    assert a.shape == b.shape and torch.equal(a, b), f"analysed floor rows std {a[N_SPECIAL:].std():.4f}, scored {b[N_SPECIAL:].std():.4f}"
    assert run_info(tiny_run.run.path).floor_init_std == pytest.approx(0.002)


def test_old_run_without_l2_init_std_gets_the_old_floor(tiny_run, tmp_path):
    import shutil

    from xlviz.analysis.reports import run_info

    old = tmp_path / "old"
    shutil.copytree(tiny_run.run.path, old)
    cfg = json.loads((old / "config.json").read_text())
    del cfg["l2_init_std"]
    (old / "config.json").write_text(json.dumps(cfg))
    assert run_info(old).floor_init_std is None  # make_l2_mlm's default: the model's initializer_range


def test_world_floor_ignores_embedding_init(tiny_run, tmp_path):
    """embedding_init is read by corpus sources only: a world run's step 2 (so its floor) starts
    from random rows whatever the config says, and so does the analyses' floor."""
    import shutil

    from xlviz.analysis.reports import run_info

    run = tmp_path / "l1stats"
    shutil.copytree(tiny_run.run.path, run)
    cfg = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**cfg, "embedding_init": "l1_stats"}))
    info = run_info(run)
    assert (info.floor_init, info.floor_init_std) == ("random", pytest.approx(0.002))


@pytest.mark.parametrize("init", ["random", "l1_stats"])
def test_analysis_floor_of_a_corpus_run_is_its_step2_start(tmp_path, init):
    """On a corpus source step 2 starts from rows at the model's initializer_range (not the
    world's l2_init_std) or from the L1 rows' statistics; the analyses rebuild that floor, weight
    for weight, for a run without exported encoders."""
    from xlviz.analysis.reports import run_info, run_systems
    from xlviz.methods import corpus, monotrans
    from xlviz.models.reference import load_spec
    from xlviz.transfer.pipeline import Pipeline

    for lang in ("en", "de"):
        (tmp_path / f"{lang}.txt").write_text("".join(f"{lang} w{i % 40} w{i % 7} v{i % 11} .\n" for i in range(400)))
    cfg = TransferConfig.from_dict({
        "source": "files", "methods": ["monotrans", "floor"], "seed": 3, "model_size": "tiny", "vocab_size": 80,
        "pretrain_steps": 2, "transfer_steps": 2, "mlm_batch_size": 4, "block_size": 8, "mixed_precision": "no",
        "log_with": "none", "embedding_init": init,
        "data": {"l1": "en", "l2": "de", "l1_corpus": [str(tmp_path / "en.txt")], "l2_corpus": [str(tmp_path / "de.txt")]}})
    pipe = Pipeline(cfg, tmp_path / "run")
    pipe.run.path.mkdir()
    pipe.run.write_config(cfg.to_dict())
    pipe.run_stage("world")
    pipe.run_stage("s1_pretrain")
    assert (run_info(pipe.run.path).floor_init, run_info(pipe.run.path).floor_init_std) == (init, None)
    spec = next(s.b for s in run_systems(pipe.run.path, "de") if s.name.endswith("floor"))
    analysed, _ = load_spec(spec, "mlm")
    l1, l1_tok = corpus.load_l1(pipe)
    scored = monotrans.new_l2_model(pipe, l1, l1_tok, pipe.tokenizer("de"))
    a, b = analysed.bert.embeddings.word_embeddings.weight, scored.bert.embeddings.word_embeddings.weight
    assert a.shape == b.shape and torch.equal(a, b)
    assert float(a[N_SPECIAL:].detach().std()) > 0.01, "rows at initializer_range (0.02), not l2_init_std (0.002)"


# --------------------------------------------------------------------------- 4. the app's floor
def test_app_loader_keeps_floor_init_and_std(tiny_run):
    """xlviz.ui.analysis.load rebuilds the spec it was given, floor_init and init std included."""
    from xlviz.models.reference import ModelSpec, load_spec
    from xlviz.ui import analysis as ui

    for init, std in (("l1_stats", None), ("random", 0.002)):
        spec = ModelSpec(str(tiny_run.path("s1_pretrain")), str(tiny_run.path("world", "tokenizers", "svo")), floor_seed=1,
                         floor_init=init, floor_init_std=std)
        shown, _ = ui.load(spec, "mlm")
        expected, _ = load_spec(spec, "mlm")
        assert torch.equal(shown.bert.embeddings.word_embeddings.weight, expected.bert.embeddings.word_embeddings.weight), init


# --------------------------------------------------------------------------- 5. held-out layer
def test_retrieval_layer_is_chosen_on_held_out_pairs():
    """Layer 1 aligns only the selection half, layer 2 only the other half: the layer is chosen
    on the selection half, and its retrieval is reported on the other half, where it is poor."""
    from xlviz.transfer.tasks.retrieval import held_out_layer

    n, d = 40, 16
    rng = np.random.default_rng(0)
    order = np.random.default_rng(7).permutation(n)
    sel, rep = order[: n // 2], order[n // 2:]
    A = rng.normal(size=(3, n, d))
    B = rng.normal(size=(3, n, d))
    B[1, sel] = A[1, sel]
    B[2, rep] = A[2, rep]
    B[2, sel] = A[2, sel] + 0.3 * rng.normal(size=(len(sel), d))  # layer 2 is the best on all pairs
    out = held_out_layer(A, B, seed=7)
    assert out["layer"] == 1 and (out["selection_pairs"], out["reported_pairs"]) == (20, 20)
    assert out["selection_per_layer"][1] == 1.0 and out["retrieval"] == out["reported_per_layer"][1] < 0.5


def test_corpus_alignment_reports_held_out_retrieval(tmp_path, monkeypatch):
    """The retrieval task's result rows: the layer chosen on one half, retrieval on the other,
    both split sizes recorded (sentence embeddings stubbed with the test above's layout)."""
    import xlviz.analysis.representations as representations
    from xlviz.methods import corpus, monotrans
    from xlviz.transfer.config import TransferConfig
    from xlviz.transfer.pipeline import Pipeline
    from xlviz.transfer.tasks import task_of

    n = 40
    for side in ("a", "b"):
        (tmp_path / f"par.{side}").write_text("".join(f"s{i}\n" for i in range(n)))
    cfg = TransferConfig.from_dict({"source": "files", "methods": ["monotrans"], "seed": 7, "data": {
        "l1": "en", "l2": "de", "l1_corpus": [str(tmp_path / "par.a")], "l2_corpus": ["x"],
        "parallel": [str(tmp_path / "par.a"), str(tmp_path / "par.b")]}})
    pipe = Pipeline(cfg, tmp_path / "run")
    pipe.run.path.mkdir()
    rng = np.random.default_rng(0)
    A = rng.normal(size=(3, n, 16))
    order = np.random.default_rng(7).permutation(n)
    B = rng.normal(size=(3, n, 16))
    B[1, order[:20]] = A[1, order[:20]]
    B[2] = A[2] + 0.3 * rng.normal(size=(n, 16))
    B[2, order[20:]] = A[2, order[20:]]
    monkeypatch.setattr(corpus, "load_l1", lambda ctx: ("l1", None))
    monkeypatch.setattr(monotrans, "l2_model", lambda ctx, system, l1, tok: ("l2", None))
    monkeypatch.setattr(representations, "sentence_embeddings", lambda model, tok, texts, **kw: A if model == "l1" else B)
    task_of("retrieval").run(pipe)
    row = pipe.run.results()[0]
    assert row["retrieval_layer"] == 1 and (row["retrieval_selection_pairs"], row["retrieval_reported_pairs"]) == (20, 20)
    assert row["retrieval"] < 50 < max(row["retrieval_per_layer"])
    sel = json.loads((tmp_path / "run" / "alignment.json").read_text())["layer_selection"]["monotrans"]
    assert sel["layer"] == 1 and sel["retrieval"] == pytest.approx(row["retrieval"] / 100, abs=1e-4)
