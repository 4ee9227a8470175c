"""Faults of resources and provenance: a tokenizer copied from another language's export, a
block size that would exhaust memory, a tiny run whose stages read the whole corpus.

Each case was found by a fault probe: a QA export whose ``tokenizer.json`` was another
language's answered without a word; ``{"block_size": 8192}`` grew to 21.7 GB until the
out-of-memory killer ended it; a tiny multi30k run (30 pre-training steps) took 16 minutes
because CLWE's skip-gram and the vocabularies read the whole corpus. Fast: tiny models, no
training; the available memory is injected, never read from the test machine.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from transformers import BertConfig, BertForQuestionAnswering

from tests.tiny_models import make_tokenizer
from xlviz.cli import main as cli
from xlviz.errors import XlvizError
from xlviz.models.loading import load_model

EN_WORDS = "the a cat dog sat on mat house big small red who what where book river tree man woman sits reads".split()
DE_WORDS = "der die katze hund sass auf matte haus gross klein rot wer was wo buch fluss baum mann frau ein".split()
SQUAD = {"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": "der hund sass auf der matte .", "qas": [
    {"id": "q1", "question": "wer sass ?", "answers": [{"text": "der hund", "answer_start": 0}]}]}]}]}


def one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if ": error: " in line]
    assert len(lines) == 1, err
    return lines[0]


# --------------------------------------------------------------------------- tokenizer provenance
def copy_tokenizer(src: Path, dst: Path) -> None:
    """What the probe did: another export's tokenizer files copied over this one's."""
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        if (src / name).is_file():
            shutil.copy(src / name, dst / name)


@pytest.fixture()
def run_with_exports(tmp_path):
    """A run folder (files source, built but not run) whose pipeline saved a QA export per
    language through its own ``save_artefact``, and its tokenizers under ``world/tokenizers``.
    The two tokenizers have the same size and special ids: only their vocabularies differ."""
    from xlviz.transfer.config import TransferConfig
    from xlviz.transfer.pipeline import Pipeline

    (tmp_path / "c.txt").write_text("a b c\n")
    cfg = TransferConfig.from_dict({"source": "files", "methods": ["monotrans"], "data": {
        "l1": "en", "l2": "de", "l1_corpus": [str(tmp_path / "c.txt")], "l2_corpus": [str(tmp_path / "c.txt")]}})
    pipe = Pipeline(cfg, tmp_path / "run")
    pipe.run.path.mkdir()
    (pipe.run.path / "config.json").write_text(cfg.dumps())  # what the run writes first
    toks = {"en": make_tokenizer("bert", EN_WORDS), "de": make_tokenizer("bert", DE_WORDS)}
    assert len(toks["en"]) == len(toks["de"])
    folders = {}
    for k, (lang, tok) in enumerate(toks.items()):
        tok.save_pretrained(pipe.run.path / "world" / "tokenizers" / lang)
        torch.manual_seed(k)
        model = BertForQuestionAnswering(BertConfig(vocab_size=len(tok), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                                    intermediate_size=32, max_position_embeddings=64))
        folders[lang] = pipe.save_artefact(model, tok, "export", "monotrans", lang, role="qa")
    return pipe.run.path, folders


def test_export_records_its_run_language_and_tokenizer(run_with_exports):
    run, folders = run_with_exports
    record = json.loads((folders["de"] / "xlviz.json").read_text())
    assert record["language"] == "de" and "run" not in record and record["system"] == "monotrans"
    assert record["tokenizer"]["language"] == "de" and record["tokenizer"]["vocab_size"] == len(make_tokenizer("bert", DE_WORDS))
    assert record["tokenizer"]["special_ids"]["mask_token"] == 4
    model, tok = load_model(folders["de"], task="qa", language="de")  # its own tokenizer: loads
    assert "katze" in tok.get_vocab()
    with pytest.raises(XlvizError) as e:
        load_model(folders["de"], task="qa", language="en")
    assert e.value.field == "language" and str(e.value.path).endswith("xlviz.json") and "'de'" in str(e.value)


def test_tokenizer_copied_from_another_language_is_refused_by_predict_qa(run_with_exports, tmp_path, capsys):
    run, folders = run_with_exports
    copy_tokenizer(folders["en"], folders["de"])
    data = tmp_path / "xquad.de.json"
    data.write_text(json.dumps(SQUAD))
    out = tmp_path / "pred.json"
    assert cli(["predict-qa", "--model", str(folders["de"]), "--data", str(data), "--out", str(out), "--device", "cpu"]) == 2
    line = one_line(capsys)
    assert "tokenizer.json" in line and "'vocabulary'" in line and "run's en tokenizer" in line, line
    assert not out.exists()


def test_tokenizer_special_ids_and_size_checked_against_the_record(run_with_exports):
    run, folders = run_with_exports
    record_file = folders["de"] / "xlviz.json"
    record = json.loads(record_file.read_text())
    record["tokenizer"]["special_ids"]["mask_token"] = 7
    record_file.write_text(json.dumps(record))
    with pytest.raises(XlvizError) as e:
        load_model(folders["de"], task="qa")
    assert e.value.field == "mask_token" and "id 4" in str(e.value) and "id 7" in str(e.value)
    record["tokenizer"]["vocab_size"] += 1
    record_file.write_text(json.dumps(record))
    with pytest.raises(XlvizError) as e:
        load_model(folders["de"], task="qa")
    assert e.value.field == "vocab_size"


def test_export_without_a_record_still_loads_and_checks_what_it_can(run_with_exports):
    run, folders = run_with_exports
    (folders["de"] / "xlviz.json").unlink()  # an export written before records existed
    copy_tokenizer(folders["en"], folders["de"])
    model, tok = load_model(folders["de"], task="qa", language="de")  # nothing left to tell the copy by
    assert len(tok) == model.get_input_embeddings().num_embeddings
    with pytest.raises(XlvizError) as e:  # the run's manifest still says which language the export reads
        load_model(folders["de"], task="qa", language="en")
    assert e.value.field == "language" and str(e.value.path).endswith("manifest.json")


def test_record_left_out_of_the_folder_digest(run_with_exports):
    """Two exports of one model differ only in their records: their digest (what shares stored
    encodings between systems) is the same."""
    from xlviz.io import folder_digest

    run, folders = run_with_exports
    twin = folders["de"].parent / "twin-de"
    shutil.copytree(folders["de"], twin)
    (twin / "xlviz.json").write_text((twin / "xlviz.json").read_text().replace("monotrans", "other"))
    assert folder_digest(twin) == folder_digest(folders["de"])


# --------------------------------------------------------------------------- memory before training
def test_memory_estimate_by_hand():
    from xlviz.training import memory

    # BERT tiny (2 layers, hidden 64, 2 heads, intermediate 256), vocabulary 100, 32 positions
    emb = (100 + 32 + 2) * 64 + 2 * 64
    layer = 4 * (64 * 64 + 64) + 2 * 64 * 256 + 256 + 64 + 4 * 64
    head = 64 * 64 + 3 * 64 + 100
    assert memory.bert_params(100, 64, 2, 256, 32) == emb + 2 * layer + head
    b = memory.Batch("x", rows=8, length=32)
    tokens = 8 * 32
    per_layer = 16 * tokens * 64 + 3 * tokens * 256
    scores = 4 * 8 * 2 * 32 ** 2  # eager attention: rows x heads x length^2, four tensors of them
    assert memory.batch_bytes(b, 64, 2, 2, 256, 100, eager=False) == 4 * (2 * per_layer + 3 * tokens * 100)
    assert memory.batch_bytes(b, 64, 2, 2, 256, 100, eager=True) == 4 * (2 * (per_layer + scores) + 3 * tokens * 100)


def _config(**kw):
    from xlviz.transfer.config import TransferConfig

    return TransferConfig.from_dict(dict(kw))


def test_block_size_8192_refused_in_one_line_before_the_run_folder(tmp_path, monkeypatch, capsys):
    from xlviz.training import memory

    monkeypatch.setattr(memory, "available_bytes", lambda: 16 * 2**30)  # a 16 GB machine, whatever runs the test
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"block_size": 8192}))
    out = tmp_path / "ck"
    out.mkdir()
    assert cli(["transfer", "--config", str(cfg), "--out", str(out)]) == 2
    line = one_line(capsys)
    assert "cfg.json" in line and "'block_size'" in line and "128 x 8192" in line and "16.0 GB available" in line, line
    assert list(out.iterdir()) == []  # no run folder made
    for eager in (False, True):  # refused whichever attention the machine trains with
        need, worst = memory.estimate(_config(block_size=8192), eager=eager)
        assert need > 16 * 2**30 and worst.length == 8192


def test_memory_check_uses_the_injected_machine(monkeypatch):
    from xlviz.training import memory
    from xlviz.training.memory import FLOOR_BYTES, check_memory, estimate

    big = {"model_size": "small", "block_size": 512, "mlm_batch_size": 64}
    cfg = _config(**big, workers=1)
    need, _ = estimate(cfg, eager=False)
    assert need > FLOOR_BYTES
    assert check_memory(cfg, available=int(need / 0.9) + 1, eager=False) == need  # just fits
    with pytest.raises(XlvizError) as e:
        check_memory(cfg, available=int(need / 0.9) - 1, eager=False)
    assert e.value.field == "block_size" and "64 x 512" in str(e.value)
    with pytest.raises(XlvizError) as e:  # two workers train at once: twice the memory
        check_memory(_config(**big, workers=2), available=int(need / 0.9) + 1, eager=False)
    assert "2 workers" in str(e.value)
    tiny = _config(model_size="tiny", workers=1)  # below the floor: never refused, whatever the machine says
    assert estimate(tiny, eager=True)[0] < FLOOR_BYTES
    check_memory(tiny, available=2**20, eager=True)
    monkeypatch.setattr(memory, "available_bytes", lambda: None)  # memory unknown (no /proc, no psutil): not refused
    assert check_memory(_config(block_size=8192, workers=1), eager=True) == estimate(_config(block_size=8192), eager=True)[0]
    for d in ({}, {"source": "multi30k"}, {"model_size": "medium"}):  # every default fits a 4 GB machine
        for eager in (False, True):
            check_memory(_config(**d, workers=1), available=4 * 2**30, eager=eager)


def test_runs_form_refuses_what_would_not_fit(monkeypatch):
    """The app's Runs form builds its config as the CLI does: refused there, nothing started."""
    import argparse

    from xlviz.commands.transfer import build_config
    from xlviz.training import memory

    monkeypatch.setattr(memory, "available_bytes", lambda: 8 * 2**30)
    args = argparse.Namespace(block_size=8192, model_size="small", workers=1)
    with pytest.raises(XlvizError) as e:
        build_config(args)
    assert e.value.field == "block_size" and "8.0 GB available" in str(e.value)
    args.block_size = 64
    assert build_config(args).block_size == 64


# --------------------------------------------------------------------------- a run's cost follows its budget
TINY_MULTI30K = {"source": "multi30k", "methods": ["jointpair-disjoint", "clwe"], "model_size": "tiny", "pretrain_steps": 30,
                 "transfer_steps": 10, "finetune_steps": 10, "workers": 1}


def test_budget_rule_by_hand():
    from xlviz.methods.budget import budget_lines, budget_tokens, sample_lines

    cfg = _config(**TINY_MULTI30K)  # the corpus defaults: 64 blocks of 64 tokens a step
    assert budget_tokens(cfg) == 30 * 64 * 64
    assert budget_lines(cfg) == 30 * 64 * 64 // 16 == 7680
    assert sample_lines(cfg, cfg.data["tokenizer_lines"]) == 7680 < 145_000
    assert sample_lines(_config(**{**TINY_MULTI30K, "pretrain_steps": 1, "transfer_steps": 1}), 145_000) == 5_000  # the floor


def test_budget_inactive_at_default_budgets():
    """The corpus sources' default runs read exactly the lines they read before the rule."""
    from xlviz.methods.budget import sample_lines

    for d in ({"source": "multi30k"}, {"source": "multi30k", "methods": ["jointpair-disjoint", "clwe"]},
              {"source": "files", "data": {"l1_corpus": ["a"], "l2_corpus": ["b"]}}):
        cfg = _config(**d)
        assert sample_lines(cfg, cfg.data["tokenizer_lines"]) == cfg.data["tokenizer_lines"], d


class _Ctx:
    """What :func:`xlviz.methods.common.corpus_sample` reads of a run: its config and source."""

    def __init__(self, cfg, data, kind):
        self.cfg, self.data, self.source_kind, self.world = cfg, data, kind, None


def test_corpus_sample_reads_only_the_budget(tmp_path):
    """CLWE's skip-gram and the joint vocabularies learn on corpus_sample: a tiny run reads its
    budget of lines, not the whole corpus; the generated world is never capped."""
    from xlviz.data.sources.files import CorpusData
    from xlviz.methods.common import corpus_sample

    for lang in ("en", "de"):
        (tmp_path / f"{lang}.txt").write_text("".join(f"{lang} line {i} .\n" for i in range(20_000)))
    d = {**TINY_MULTI30K, "source": "files",
         "data": {"l1_corpus": [str(tmp_path / "en.txt")], "l2_corpus": [str(tmp_path / "de.txt")], "tokenizer_lines": 100_000}}
    cfg = _config(**d)
    ctx = _Ctx(cfg, CorpusData(cfg.source_options()), "corpus")
    lines = corpus_sample(ctx, "de")
    assert len(lines) == 7680 and lines[0] == "de line 0 ." and lines[-1] == "de line 7679 ."
    big = _config(**{**d, "pretrain_steps": 1000})  # 1000 x 64 x 64 / 16 = 256,000 > the corpus: all of it
    assert len(corpus_sample(_Ctx(big, CorpusData(big.source_options()), "corpus"), "de")) == 20_000

    class World:
        def corpus(self, lang):
            return [f"{lang} doc {i}" for i in range(50_000)]

    from xlviz.data.sources.world import WorldData

    world_ctx = _Ctx(_config(model_size="tiny", pretrain_steps=1, transfer_steps=1), WorldData(World()), "world")
    assert len(corpus_sample(world_ctx, "svo")) == 50_000


def test_tiny_vocabularies_learned_on_the_budget(tmp_path):
    """The corpus source's vocabulary stage learns on the budget's lines and says so."""
    from xlviz.data.sources.files import CorpusData
    from xlviz.methods import corpus

    for lang in ("en", "de"):
        (tmp_path / f"{lang}.txt").write_text("".join(f"{lang} w{i % 300} w{i % 7} .\n" for i in range(12_000)))
    cfg = _config(**{**TINY_MULTI30K, "source": "files", "vocab_size": 120, "pretrain_steps": 10, "transfer_steps": 10,
                     "mlm_batch_size": 8, "block_size": 16,
                     "data": {"l1_corpus": [str(tmp_path / "en.txt")], "l2_corpus": [str(tmp_path / "de.txt")]}})
    read: dict[str, int] = {}
    data = CorpusData(cfg.source_options())
    texts = data.texts
    data.texts = lambda lang, max_lines: (read.__setitem__(lang, max_lines), texts(lang, max_lines))[1]
    logs: list[str] = []
    recorded: list[tuple[str, Path, dict]] = []

    class Ctx(_Ctx):
        main = True

        def log(self, text):
            logs.append(text)

        def path(self, *parts):
            return tmp_path.joinpath("run", *parts)

        def record_artefact(self, kind, path, **fields):
            recorded.append((kind, path, fields))

    corpus.stage_vocabularies(Ctx(cfg, data, "corpus"))
    assert read == {"en": 5_000, "de": 5_000}  # 10 x 8 x 16 / 16 = 80 lines: the floor of 5,000
    assert any("first 5000 lines" in line and "budget" in line for line in logs), logs
    assert (tmp_path / "run" / "world" / "tokenizers" / "de" / "tokenizer.json").is_file()
    # the stage records the tokenizers it wrote, where readers find them (no parallel pairs given)
    assert recorded == [("tokenizer", tmp_path / "run" / "world" / "tokenizers" / lang, {"language": lang}) for lang in ("en", "de")]


def test_clwe_mapping_follows_the_budget():
    """VecMap's self-learning (iterations x cutoff^2) is capped on a tiny corpus run and left
    at VecMap's own limits at default budgets."""
    from xlviz.methods.budget import clwe_mapping

    assert clwe_mapping(_config(**TINY_MULTI30K)) == {"vocab_cutoff": 7680 // 4, "max_iterations": 100}
    assert clwe_mapping(_config(**{**TINY_MULTI30K, "pretrain_steps": 400})) == {"max_iterations": 400}  # 400 x 64 x 64 / 16 / 4 words
    assert clwe_mapping(_config(source="multi30k", methods=["clwe"])) == {}


@pytest.mark.parametrize("kind", ["corpus", "world"])
def test_clwe_stage_passes_the_budget_to_the_mapping(kind, tmp_path, monkeypatch):
    from types import SimpleNamespace

    from xlviz.methods import clwe

    seen = {}

    class Stop(Exception):
        pass

    def matrices(toks, corpora, l1, l2, dim, **kw):
        seen.update(kw["mapping"])
        raise Stop

    monkeypatch.setattr(clwe, "clwe_matrices", matrices)
    monkeypatch.setattr(clwe, "new_bert", lambda ctx, lang: SimpleNamespace(config=SimpleNamespace(hidden_size=8)))
    monkeypatch.setattr(clwe, "corpus_sample", lambda ctx, lang: ["x"])
    monkeypatch.setattr(clwe, "run_l1", lambda ctx: "en")
    monkeypatch.setattr(clwe, "run_l2s", lambda ctx: ["de"])
    monkeypatch.setattr(clwe, "run_languages", lambda ctx: ["en", "de"])
    cfg = _config(**TINY_MULTI30K) if kind == "corpus" else _config(model_size="tiny", methods=["clwe"], pretrain_steps=30,
                                                                         transfer_steps=10)
    logs: list[str] = []
    ctx = SimpleNamespace(main=True, cfg=cfg, source_kind=kind, tokenizer=lambda lang: None, log=logs.append,
                          path=lambda *p: tmp_path.joinpath(*p))
    with pytest.raises(Stop):
        clwe.run_vectors(ctx)
    if kind == "corpus":
        assert seen == {"stochastic_initial": 0.1, "vocab_cutoff": 1920, "max_iterations": 100}
        assert any("budget" in line for line in logs)
    else:  # the generated world: VecMap's loop as before, whatever the steps
        assert seen == {"stochastic_initial": 0.1}
