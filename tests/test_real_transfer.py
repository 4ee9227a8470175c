"""MONOTRANS on corpora read from files (``transfer --source files``, and the deprecated
``transfer-corpus`` alias), from a pre-trained model as step 1,
QA fine-tuning of any encoder with per-language evaluation (``finetune-qa``), streaming and
batch bookkeeping. Corpora here are the generated world's, written to files; the real
Multi30k / XQuAD runs are in bench/bench_multi30k.py (tests on them skip without the data)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
import torch

from xlviz.cli import main as cli
from xlviz.errors import XlvizError
from xlviz.runs import Run
from xlviz.data.sources.files import resolve_files
from xlviz.transfer.config import TransferConfig
from xlviz.transfer.qa import paragraph_split, qa_files, repair_answer_starts, squad_subset
from xlviz.transfer.runner import feature_batches, mask_for_mlm, masked_lm_batches

try:
    from tiny_models import make_tiny
    from world_files import write_world_corpora
except ImportError:
    from tests.tiny_models import make_tiny
    from tests.world_files import write_world_corpora

REPO = Path(__file__).resolve().parents[1]


def write_world_qa(folder: Path, paragraphs: int = 12) -> Path:
    """A SQuAD-format test set in two languages with shared ids (like XQuAD): qa.en.json, qa.svo.json."""
    from xlviz.data.world import LanguageSpec, WorldConfig, generate_world

    world = generate_world(WorldConfig(seed=4, qa_test_paragraphs=paragraphs, languages=[LanguageSpec("svo")]))
    folder.mkdir(parents=True, exist_ok=True)
    for lang in ("en", "svo"):
        (folder / f"qa.{lang}.json").write_text(json.dumps(world.qa("test", lang)))
    return folder


# --------------------------------------------------------------------------- streaming and batches
class Exhausted(AssertionError):
    pass


def bounded_lines(limit: int):
    """An endless corpus that fails if more than ``limit`` lines are ever read."""
    for i in itertools.count():
        if i >= limit:
            raise Exhausted(f"read more than {limit} lines: the corpus is being materialised")
        yield f"line {i % 97} with some words and more words {i % 13}"


def test_streaming_does_not_materialise_the_corpus():
    from xlviz.data.tokenization import train_tokenizer
    from xlviz.training.mlm import iter_blocks

    tok = train_tokenizer([f"line {i} with some words and more words {i}" for i in range(100)], 80)
    blocks = iter_blocks(lambda: bounded_lines(3000), tok, 16, shuffle_buffer=32, chunk=64)
    batches = masked_lm_batches(blocks, batch_size=8, rank=0, world_size=1, grad_accum=1, mask_id=tok.mask_token_id,
                                vocab_size=len(tok), special_ids=range(5), seed=0)
    for _ in range(20):  # 160 blocks of 14 tokens: a few hundred lines, far below the limit
        batch = next(batches)
        assert batch["input_ids"].shape == (8, 16)
    with pytest.raises(Exhausted):  # the guard works: a full pass would trip it
        list(itertools.islice(iter_blocks(lambda: bounded_lines(3000), tok, 16, shuffle_buffer=10**6, chunk=64), 1))


def test_corpus_texts_are_streamed_from_files(tmp_path):
    from xlviz.transfer.pipeline import Pipeline

    files = write_world_corpora(tmp_path / "c", documents=20)
    cfg = TransferConfig.from_dict({"source": "files", "data": {"l1": "en", "l2": "svo", "l1_corpus": [str(files["en"])],
                                                                 "l2_corpus": [str(files["svo"])]}})
    stream = Pipeline(cfg, tmp_path / "run").data.texts("svo", max_lines=None)()
    assert iter(stream) is stream and not isinstance(stream, (list, tuple)), "a generator, not a list"
    assert isinstance(next(stream), str)


def test_global_batches_partition_exactly_across_processes():
    rows = [[2] + [5 + (7 * i + j) % 40 for j in range(10)] + [3] for i in range(64)]
    kw = dict(batch_size=8, mask_id=4, vocab_size=45, special_ids=range(5), seed=1)
    single = list(itertools.islice(masked_lm_batches(iter(rows), rank=0, world_size=1, grad_accum=1, **kw), 4))
    for world, accum in ((2, 1), (2, 2), (4, 1)):
        parts = [list(itertools.islice(masked_lm_batches(iter(rows), rank=r, world_size=world, grad_accum=accum, **kw), 4 * accum))
                 for r in range(world)]
        for step in range(4):
            micro = [parts[r][step * accum + k] for k in range(accum) for r in range(world)]
            joined = torch.cat([m["input_ids"] for m in micro])
            labels = torch.cat([m["labels"] for m in micro])
            assert torch.equal(joined, single[step]["input_ids"]) and torch.equal(labels, single[step]["labels"])
            # loss sums / denominators average (over processes x steps) to the global per-token mean
            n = (single[step]["labels"] != -100).sum().item()
            assert micro[0]["denominator"].item() * world * accum == pytest.approx(n)


def test_masking_never_targets_or_inserts_special_tokens():
    ids = torch.randint(0, 50, (64, 32), generator=torch.Generator().manual_seed(0))
    special = torch.tensor([0, 1, 2, 3, 49])
    allowed = torch.tensor([i for i in range(50) if i not in (0, 1, 2, 3, 49)])
    inputs, labels = mask_for_mlm(ids, mask_id=49, special=special, allowed=allowed, prob=0.5, generator=torch.Generator().manual_seed(1))
    targets = labels != -100
    assert not torch.isin(ids[targets], special).any()
    changed = targets & (inputs != ids) & (inputs != 49)
    assert changed.any() and not torch.isin(inputs[changed], special).any()
    assert torch.equal(inputs[~targets], ids[~targets])
    # no random tokens: every target is [MASK] or itself, and the targets are the same
    none, none_labels = mask_for_mlm(ids, mask_id=49, special=special, allowed=allowed, prob=0.5,
                                     generator=torch.Generator().manual_seed(1), random_share=0.0)
    assert torch.equal(none_labels, labels)
    assert ((none[targets] == 49) | (none[targets] == ids[targets])).all()
    assert (none[changed] == 49).all()


def test_feature_batches_shard_and_cover_each_epoch():
    feats = {"input_ids": torch.arange(24).reshape(12, 2), "start_positions": torch.arange(12)}
    one = list(itertools.islice(feature_batches(feats, batch_size=4, rank=0, world_size=1, grad_accum=1, seed=0), 3))
    two = [list(itertools.islice(feature_batches(feats, batch_size=4, rank=r, world_size=2, grad_accum=1, seed=0), 3)) for r in (0, 1)]
    for step in range(3):
        assert torch.equal(torch.cat([two[0][step]["start_positions"], two[1][step]["start_positions"]]), one[step]["start_positions"])
    assert sorted(torch.cat([b["start_positions"] for b in one]).tolist()) == list(range(12))


# --------------------------------------------------------------------------- configs and inputs
def test_resolve_files_globs_and_shared_prefix(tmp_path, monkeypatch):
    for name in ("a.1.en.gz", "a.2.en.gz", "a.1.de.gz"):
        (tmp_path / name).write_bytes(b"")
    assert [p.name for p in resolve_files([str(tmp_path / "a.*.en.gz")], "corpus")] == ["a.1.en.gz", "a.2.en.gz"]
    monkeypatch.setenv("XLVIZ_SHARED_DATA", str(tmp_path))
    assert [p.name for p in resolve_files("shared:a.1.*", "corpus")] == ["a.1.de.gz", "a.1.en.gz"]
    with pytest.raises(XlvizError, match="no corpus file matches"):
        resolve_files([str(tmp_path / "nothing*.gz")], "corpus")


def test_config_errors_name_the_field(tmp_path, capsys):
    files = {"source": "files"}
    with pytest.raises(XlvizError, match="unknown setting") as e:
        TransferConfig.from_dict({**files, "data": {"l2_corpus": ["x"], "l1_corpus": ["y"]}, "bogus": 1})
    assert e.value.field == "bogus"
    with pytest.raises(XlvizError, match="unknown data option") as e:
        TransferConfig.from_dict({**files, "data": {"l2_corpus": ["x"], "bogus": 1}})
    assert e.value.field == "data.bogus"
    # no L1 corpus and no init_model: MONOTRANS's premise (an L1 model) is not met, before anything trains
    with pytest.raises(XlvizError, match="needs l1_model") as e:
        TransferConfig.from_dict({**files, "data": {"l2_corpus": ["x"]}})
    assert e.value.field == "methods"
    with pytest.raises(XlvizError) as e:
        TransferConfig.from_dict({**files, "data": {"l2_corpus": ["x"], "parallel": ["only-one"]}, "init_model": "m"})
    assert e.value.field == "data.parallel"
    with pytest.raises(XlvizError, match="unknown data source") as e:
        TransferConfig.from_dict({"source": "nowhere"})
    assert e.value.field == "source"
    # a transfer-corpus config (one flat object) is read as the same run on the files source
    old = TransferConfig.from_dict({"l1_corpus": ["y"], "l2_corpus": ["x"], "batch_size": 8, "mask_prob": 0.2, "qa_batch_size": 4})
    assert (old.source, old.methods, old.data["l1_corpus"], old.mlm_batch_size, old.mlm_probability, old.batch_size) == \
        ("files", ["monotrans", "floor"], ["y"], 8, 0.2, 4)
    assert cli(["transfer-corpus", "--l2-corpus", str(tmp_path / "missing*.gz"), "--l1-corpus", "x", "--run-dir", str(tmp_path / "r"),
                "--mixed-precision", "no"]) == 2
    err = capsys.readouterr().err
    assert "field 'l1_corpus': no l1_corpus file matches 'x'" in err and "Traceback" not in err
    assert cli(["transfer", "--source", "files", "--l2-corpus", str(tmp_path / "missing*.gz"), "--l1-corpus", "x",
                "--run-dir", str(tmp_path / "r2")]) == 2
    err = capsys.readouterr().err
    assert "field 'l1_corpus': no l1_corpus file matches 'x'" in err and "Traceback" not in err


def test_documented_config_is_valid():
    cfg = TransferConfig.from_file(REPO / "configs" / "multi30k-en-de.json")
    assert cfg.source == "multi30k" and cfg.data["l1"] == "en" and cfg.data["l2"] == "de" and cfg.data["parallel"]
    assert cfg.init_model is None and cfg.methods == ["monotrans", "floor"]


def test_documented_config_files_exist(shared_data, monkeypatch):
    monkeypatch.setenv("XLVIZ_SHARED_DATA", str(shared_data))
    cfg = TransferConfig.from_file(REPO / "configs" / "multi30k-en-de.json")
    assert len(resolve_files(cfg.data["l1_corpus"], "en")) == 5 and len(resolve_files(cfg.data["l2_corpus"], "de")) == 5
    a, b = resolve_files(cfg.data["parallel"], "parallel")
    assert "task1" in str(a) and "task1" in str(b), "alignment is measured on the parallel task1 set, never trained on"
    assert not {p.name for p in resolve_files(cfg.data["l2_corpus"], "de")} & {a.name, b.name}


# --------------------------------------------------------------------------- QA data helpers
def test_answer_start_mismatches_are_reported_and_repaired():
    from xlviz.data.squad import check_answer_starts

    data = {"data": [{"title": "t", "paragraphs": [{"context": "The cat sat on the mat. The dog too.", "qas": [
        {"id": "ok", "question": "q", "answers": [{"text": "cat", "answer_start": 4}]},
        {"id": "off", "question": "q", "answers": [{"text": "mat", "answer_start": 3}]},
        {"id": "gone", "question": "q", "answers": [{"text": "horse", "answer_start": 0}]},
    ]}]}]}
    found = check_answer_starts(data)
    assert {m.id for m in found} == {"off", "gone"} and found[0].field.endswith("answers[0].answer_start")
    fixed, repaired, dropped = repair_answer_starts(data)
    assert (repaired, dropped) == (1, 1) and not check_answer_starts(fixed)
    assert [qa["id"] for qa in fixed["data"][0]["paragraphs"][0]["qas"]] == ["ok", "off"]
    assert data["data"][0]["paragraphs"][0]["qas"][1]["answers"][0]["answer_start"] == 3, "input left untouched"


def test_paragraph_split_and_eval_files(tmp_path):
    folder = write_world_qa(tmp_path / "qa", paragraphs=10)
    data = json.loads((folder / "qa.en.json").read_text())
    train, ids = paragraph_split(data, 4, seed=0)
    assert sum(len(a["paragraphs"]) for a in train["data"]) == 4
    rest = squad_subset(data, lambda q: q not in ids)
    contexts = lambda d: {p["context"] for a in d["data"] for p in a["paragraphs"]}  # noqa: E731
    assert not contexts(train) & contexts(rest)
    assert set(qa_files([str(folder)])) == {"en", "svo"}
    assert list(qa_files([str(folder)], ["svo"])) == ["svo"]
    with pytest.raises(XlvizError, match="no evaluation file"):
        qa_files([str(folder)], ["de"])
    with pytest.raises(XlvizError, match="between 1 and"):
        paragraph_split(data, 10, seed=0)


# --------------------------------------------------------------------------- end to end
TINY = ["--model-size", "tiny", "--vocab-size", "200", "--block-size", "32", "--batch-size", "8", "--shuffle-buffer", "32",
        "--pretrain-steps", "4", "--transfer-steps", "4", "--log-every", "2", "--mixed-precision", "no", "--eval-max-length", "32"]
# the same for ``xlviz transfer``, where --batch-size is the QA batch and --mlm-batch-size the masked-LM one
TINY_TRANSFER = ["--model-size", "tiny", "--vocab-size", "200", "--block-size", "32", "--mlm-batch-size", "8", "--shuffle-buffer", "32",
                 "--pretrain-steps", "4", "--transfer-steps", "4", "--log-every", "2", "--mixed-precision", "no", "--eval-max-length", "32"]


@pytest.mark.slow
def test_transfer_on_files_end_to_end_with_qa(tmp_path):
    files = write_world_corpora(tmp_path / "c")
    qa_dir = write_world_qa(tmp_path / "qa")
    run_dir = tmp_path / "run"
    args = ["transfer", "--source", "files", "--systems", "monotrans,floor", "--run-dir", str(run_dir), "--l1", "en", "--l2", "svo",
            "--l1-corpus", str(files["en"]), "--l2-corpus", str(files["svo"]), "--parallel", str(files["par_en"]), str(files["par_svo"]),
            "--qa-train", str(qa_dir / "qa.en.json"), "--qa-train-paragraphs", "6", "--qa-eval", str(qa_dir),
            "--finetune-steps", "3", "--batch-size", "4", "--qa-max-length", "64", "--doc-stride", "24", *TINY_TRANSFER]
    assert cli(args) == 0
    run = Run(run_dir)
    status = run.status()
    assert status["state"] == "completed"
    assert status["stages_done"] == ["world", "s1_pretrain", "s2_transfer-svo", "alignment", "s3_finetune", "s4_monotrans", "s4_floor"]
    for lang in ("en", "svo"):
        assert (run_dir / "world" / "tokenizers" / lang / "tokenizer.json").is_file()
    assert len((run_dir / "world" / "parallel" / "en-svo.jsonl").read_text().splitlines()) == 40
    from xlviz import runs

    # the corpus source's world stage records what it wrote: the tokenizers and the parallel pairs
    assert runs.world_files(run, "tokenizer") == {lang: run_dir / "world" / "tokenizers" / lang for lang in ("en", "svo")}
    pairs = runs.artefact(run, "parallel", language="svo", pair="en")
    assert pairs is not None and pairs.folder == run_dir / "world" / "parallel" / "en-svo.jsonl" and pairs.stage == "world"
    alignment = json.loads((run_dir / "alignment.json").read_text())
    assert set(alignment["systems"]) == {"monotrans", "floor"} and alignment["n_pairs"] == 40
    assert len(alignment["systems"]["monotrans"]) == 3  # embeddings + 2 layers of the tiny model
    rows = {(r["system"], r["language"]): r for r in run.results()}
    assert set(rows) == {(s, l) for s in ("monotrans", "floor") for l in ("en", "svo")}
    for system in ("monotrans", "floor"):
        assert 0 <= rows[(system, "svo")]["retrieval"] <= 100 and len(rows[(system, "svo")]["retrieval_per_layer"]) == 3
        for lang in ("en", "svo"):
            assert 0 <= rows[(system, lang)]["f1"] <= 100 and rows[(system, lang)]["n_questions"] > 0
        assert rows[(system, "svo")]["tasks"] == ["retrieval", "qa"] and rows[(system, "en")]["tasks"] == ["qa"]
    assert {m["stage"] for m in run.metrics()} >= {"s1_pretrain", "s2_transfer-svo", "s3_finetune"}

    from xlviz.models.loading import load_model

    model, tok = load_model(run_dir / "export" / "monotrans-svo", task="qa")
    assert model.config.vocab_size == len(tok)
    model, tok = load_model(run_dir / "s2_transfer-svo", task="mlm")
    assert len(tok) == model.config.vocab_size
    from xlviz.runs import artefacts

    assert {(a.system, a.language) for a in artefacts(run, "export")} == set(rows)  # what step 4 wrote, in its manifest
    assert {a.path: a.role for a in artefacts(run, "stage")} == {"s1_pretrain": "pretrained", "s2_transfer-svo": "transferred",
                                                                  "s3_finetune": "finetuned"}
    # resuming a finished run does nothing
    assert cli(["transfer", "--resume", str(run_dir)]) == 0
    assert Run(run_dir).status()["stages_done"] == status["stages_done"]


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["roberta", "distilbert"])
def test_monotrans_from_a_pretrained_model(arch, tmp_path):
    """--init-model: an existing (here tiny random) model is step 1; steps 2+ with a new L2 vocabulary."""
    files = write_world_corpora(tmp_path / "c", documents=60)
    init = make_tiny(arch, tmp_path / "init", task="mlm", max_position_embeddings=64)
    run_dir = tmp_path / "run"
    assert cli(["transfer", "--source", "files", "--run-dir", str(run_dir), "--init-model", str(init), "--l1", "en", "--l2", "svo",
                "--l2-corpus", str(files["svo"]), "--parallel", str(files["par_en"]), str(files["par_svo"]), "--vocab-size", "150",
                "--block-size", "32", "--mlm-batch-size", "4", "--transfer-steps", "3", "--mixed-precision", "no",
                "--eval-max-length", "32", "--qa-max-length", "64", "--doc-stride", "24"]) == 0
    run = Run(run_dir)
    assert run.status()["state"] == "completed" and not (run_dir / "s1_pretrain").exists()
    from xlviz.models.loading import load_model

    l2, tok = load_model(run_dir / "s2_transfer-svo", task="mlm")
    init_model, init_tok = load_model(init, task="mlm")
    assert type(l2) is type(init_model) and l2.config.vocab_size == len(tok) == 150
    assert tok.pad_token == init_tok.pad_token and tok.pad_token_id == init_tok.pad_token_id
    assert {r["system"] for r in run.results()} == {"monotrans", "floor"}


def test_init_model_without_mlm_head_is_a_clear_error(tmp_path, capsys):
    files = write_world_corpora(tmp_path / "c", documents=10)
    disc = make_tiny("electra", tmp_path / "disc", task="pretraining")
    rc = cli(["transfer-corpus", "--run-dir", str(tmp_path / "run"), "--init-model", str(disc), "--l2-corpus", str(files["svo"]),
              "--l2", "svo", "--mixed-precision", "no"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "ELECTRA discriminator" in err and "Traceback" not in err


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["bert", "roberta", "xlm-roberta", "distilbert", "electra"])
def test_finetune_qa_any_encoder(arch, tmp_path):
    qa_dir = write_world_qa(tmp_path / "qa", paragraphs=4)
    model = make_tiny(arch, tmp_path / "m", task="mlm", max_position_embeddings=128)
    run_dir = tmp_path / "run"
    assert cli(["finetune-qa", "--model", str(model), "--train", str(qa_dir / "qa.en.json"), "--train-paragraphs", "3",
                "--eval-dir", str(qa_dir), "--steps", "2", "--batch-size", "4", "--max-length", "128", "--doc-stride", "32",
                "--run-dir", str(run_dir), "--system", f"tiny-{arch}", "--mixed-precision", "no"]) == 0
    run = Run(run_dir)
    assert run.status()["stages_done"] == ["s3_finetune", "s4_en", "s4_svo"]
    rows = run.results()
    assert {(r["system"], r["language"]) for r in rows} == {(f"tiny-{arch}", "en"), (f"tiny-{arch}", "svo")}
    assert all(set(r) >= {"system", "language", "exact_match", "f1"} and 0 <= r["f1"] <= 100 for r in rows)
    n_all = sum(len(p["qas"]) for a in json.loads((qa_dir / "qa.en.json").read_text())["data"] for p in a["paragraphs"])
    assert all(r["n_questions"] < n_all for r in rows), "questions used for training are left out"
    from xlviz.models.loading import load_model

    qa, tok = load_model(run_dir / "s3_finetune", task="qa")
    assert type(qa).__name__.endswith("ForQuestionAnswering")
    from xlviz.runs import artefact

    assert artefact(run, "predictions", system=f"tiny-{arch}", language="svo").folder == run_dir / "predictions" / f"tiny-{arch}-svo.json"


def test_finetune_qa_real_xquad_slice_setup(shared_data):
    """The XQuAD slice: training paragraphs of xquad.en are left out of every language's evaluation."""
    folder = shared_data / "xquad"
    files = qa_files([str(folder)])
    assert {"en", "de", "zh", "ar"} <= set(files)
    data = json.loads(files["en"].read_text())
    train, ids = paragraph_split(data, 40, seed=0)
    de = squad_subset(json.loads(files["de"].read_text()), lambda q: q not in ids)
    n_de = sum(len(p["qas"]) for a in de["data"] for p in a["paragraphs"])
    assert n_de == 1190 - len(ids) and 150 < len(ids) < 300


@pytest.mark.slow
def test_gradient_accumulation_matches_the_full_batch(tmp_path):
    """--grad-accum 2 splits each global batch into two micro-batches: same step 2 as one pass."""
    import shutil

    from safetensors.torch import load_file

    files = write_world_corpora(tmp_path / "c", documents=60)
    base = ["transfer-corpus", "--l1", "en", "--l2", "svo", "--l1-corpus", str(files["en"]), "--l2-corpus", str(files["svo"]),
            *TINY, "--transfer-steps", "5", "--transfer-lr", "0.01"]
    one, two = tmp_path / "one", tmp_path / "two"
    assert cli(base + ["--run-dir", str(one), "--stop-after", "s1_pretrain"]) == 0
    shutil.copytree(one, two)
    cfg = json.loads((two / "config.json").read_text())
    cfg["grad_accum"] = 2
    (two / "config.json").write_text(json.dumps(cfg))
    assert cli(["transfer-corpus", "--resume", str(one)]) == 0
    assert cli(["transfer-corpus", "--resume", str(two)]) == 0
    emb = "bert.embeddings.word_embeddings.weight"
    a, b = (load_file(r / "s2_transfer-svo" / "model.safetensors")[emb] for r in (one, two))
    assert torch.allclose(a, b, atol=1e-5), (a - b).abs().max()
    la = [m["loss"] for m in Run(one).metrics() if m["stage"] == "s2_transfer-svo"]
    lb = [m["loss"] for m in Run(two).metrics() if m["stage"] == "s2_transfer-svo"]
    assert la == pytest.approx(lb, abs=1e-4)
