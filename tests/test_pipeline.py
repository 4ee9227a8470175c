"""The transfer pipeline end to end on a tiny world: run folder contents, export, kill and
resume, bad configs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from xlviz.cli import main as cli
from xlviz.errors import XlvizError
from xlviz.runs import Run
from xlviz.transfer.config import TransferConfig

TINY = {
    "model_size": "tiny", "vocab_size": 200, "batch_size": 8, "mlm_batch_size": 8, "pretrain_steps": 6, "transfer_steps": 4, "finetune_steps": 6,
    "log_every": 2, "mixed_precision": "no",
    "world": {"corpus_documents": 120, "qa_train_paragraphs": 20, "qa_dev_paragraphs": 3, "qa_test_paragraphs": 4,
              "parallel_pairs": 20, "agreement_pairs": 9, "sense_pairs": 6},
}


def write_config(path: Path, **overrides) -> Path:
    cfg = json.loads(json.dumps(TINY))
    cfg.update(overrides)
    path.write_text(json.dumps(cfg))
    return path


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Run:
    root = tmp_path_factory.mktemp("runs")
    config = write_config(root / "tiny.json", variants=["base", "floor", "oracle"])
    assert cli(["transfer", "--config", str(config), "--run-dir", str(root / "run")]) == 0
    return Run(root / "run")


@pytest.mark.slow
def test_run_folder_holds_the_whole_record(finished_run):
    run = finished_run
    cfg = run.config()
    assert cfg["seed"] == 0 and cfg["versions"]["torch"].startswith("2.13")
    status = run.status()
    assert status["state"] == "completed"
    assert status["stages_done"] == ["world", "s1_pretrain", "s2_transfer-svo", "s2_transfer-sov", "s3_finetune", "s4_monotrans", "s4_floor",
                                     "s4_dictionary-oracle"]
    stages = {m["stage"] for m in run.metrics()}
    assert {"s1_pretrain", "s2_transfer-svo", "s3_finetune"} <= stages
    assert all({"stage", "step", "loss", "elapsed"} <= set(m) for m in run.metrics())
    rows = run.results()
    assert {(r["system"], r["language"]) for r in rows} == {(s, l) for s in ("monotrans", "floor", "dictionary-oracle") for l in ("en", "svo", "sov")}
    assert all({"exact_match_v11", "f1_v11"} <= set(r) for r in rows)
    assert all(0 <= r["f1"] <= 100 and 0 <= r["exact_match"] <= r["f1"] + 1e-9 for r in rows)
    # each row ends with its EM/F1 per slice: the slice report of that system and language, less its `all` row
    from xlviz.transfer.slices import compute as slice_table

    assert all(list(r)[-1] == "slices" for r in rows)
    for r in rows[:3]:
        want = slice_table(run.path, r["language"], [r["system"]]).rows
        assert r["slices"] == [{k: v for k, v in s.items() if k != "system"} for s in want if s["dimension"] != "all"]
        assert {s["dimension"] for s in r["slices"]} >= {"answer role", "question word", "answer position"}
    for stage in ("s1_pretrain", "s2_transfer-sov", "s3_finetune"):
        assert (run.path / stage / "model.safetensors").exists()
    assert not list(run.path.glob("**/*.bin")), "no pickled weights"


@pytest.mark.slow
def test_exported_zero_shot_model_loads_and_answers(finished_run):
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer

    folder = finished_run.path / "export" / "monotrans-sov"
    model = AutoModelForQuestionAnswering.from_pretrained(folder, use_safetensors=True)
    tok = AutoTokenizer.from_pretrained(folder)
    assert model.config.vocab_size == len(tok)
    data = json.loads((finished_run.path / "world" / "qa" / "test.sov.json").read_text())
    para = data["data"][0]["paragraphs"][0]
    enc = tok(para["qas"][0]["question"], para["context"], return_tensors="pt")
    with torch.no_grad():
        out = model(**enc)
    assert out.start_logits.shape == enc["input_ids"].shape
    # the L1 and sov exports share the fine-tuned body: only word embeddings differ
    l1 = AutoModelForQuestionAnswering.from_pretrained(finished_run.path / "export" / "monotrans-en", use_safetensors=True)
    a, b = dict(l1.named_parameters()), dict(model.named_parameters())
    differ = {n for n in a if a[n].shape != b[n].shape or not torch.equal(a[n], b[n])}
    assert differ == {"bert.embeddings.word_embeddings.weight"}
    # the dictionary oracle: monotrans's sov embeddings, with gold translations' rows from L1
    oracle = AutoModelForQuestionAnswering.from_pretrained(finished_run.path / "export" / "dictionary-oracle-sov", use_safetensors=True)
    en_tok = AutoTokenizer.from_pretrained(finished_run.path / "export" / "monotrans-en")
    pair = next(json.loads(line) for line in (finished_run.path / "world" / "dictionary" / "en-sov.jsonl").read_text().splitlines()
                if json.loads(line)["en"] in en_tok.get_vocab() and json.loads(line)["sov"] in tok.get_vocab())
    ow, l1w, mw = (m.bert.embeddings.word_embeddings.weight for m in (oracle, l1, model))
    assert torch.equal(ow[tok.get_vocab()[pair["sov"]]], l1w[en_tok.get_vocab()[pair["en"]]])
    assert not torch.equal(ow, mw)
    # and the oracle's encoder (what the Alignment and Probing pages read) has those rows too,
    # from step 1's L1 model: not a copy of monotrans's encoder
    from transformers import AutoModelForMaskedLM

    enc = {s: AutoModelForMaskedLM.from_pretrained(finished_run.path / "encoders" / f"{s}-sov", use_safetensors=True)
           for s in ("monotrans", "dictionary-oracle")}
    s1 = AutoModelForMaskedLM.from_pretrained(finished_run.path / "s1_pretrain", use_safetensors=True)
    e_or, e_mt, e_l1 = (m.bert.embeddings.word_embeddings.weight for m in (enc["dictionary-oracle"], enc["monotrans"], s1))
    assert torch.equal(e_or[tok.get_vocab()[pair["sov"]]], e_l1[en_tok.get_vocab()[pair["en"]]])
    assert not torch.equal(e_or, e_mt)


@pytest.mark.slow
def test_killed_run_resumes_from_last_completed_stage(tmp_path):
    config = write_config(tmp_path / "c.json", variants=["base"], pretrain_steps=400, log_every=1)
    run_dir = tmp_path / "run"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "xlviz", "transfer", "--config", str(config), "--run-dir", str(run_dir)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    run = Run(run_dir)
    deadline = time.time() + 240
    while time.time() < deadline:  # kill mid-way through pre-training
        if any(m["stage"] == "s1_pretrain" and m["step"] >= 3 for m in run.metrics()):
            break
        time.sleep(0.3)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert run.status()["stages_done"] == ["world"]
    assert not (run_dir / "s1_pretrain").exists(), "a half-trained stage is never saved"
    world_mtime = (run_dir / "world" / "world.json").stat().st_mtime
    # resume with fewer steps would change the config; resume uses the recorded one, so patch it
    cfg = run.config()
    cfg["pretrain_steps"] = 6
    run.write_config(cfg)
    assert cli(["transfer", "--resume", str(run_dir)]) == 0
    status = run.status()
    assert status["state"] == "completed" and status["stages_done"][0] == "world"
    assert (run_dir / "world" / "world.json").stat().st_mtime == world_mtime, "completed stages are not redone"
    assert {r["language"] for r in run.results()} == {"en", "svo", "sov"}


def test_bad_configs_name_the_field(tmp_path, capsys):
    with pytest.raises(XlvizError, match="pretrain_steps"):
        TransferConfig.from_dict({"pretrain_steps": 0})
    with pytest.raises(XlvizError, match="model_size"):
        TransferConfig.from_dict({"model_size": "huge"})
    with pytest.raises(XlvizError, match="mlm_batch_size"):
        TransferConfig.from_dict({"mlm_batch_size": 0})
    for bad in (0, 1, 1.5, True, "0.15"):
        with pytest.raises(XlvizError, match="mlm_probability"):
            TransferConfig.from_dict({"mlm_probability": bad})
    for bad in (-0.1, 0.95, True, "0"):
        with pytest.raises(XlvizError, match="mlm_random_share"):
            TransferConfig.from_dict({"mlm_random_share": bad})
    assert TransferConfig.from_dict({"mlm_random_share": 0}).mlm_random_share == 0
    with pytest.raises(XlvizError, match="noise_std"):
        TransferConfig.from_dict({"noise_std": -0.1})
    with pytest.raises(XlvizError, match="l2_init_std"):
        TransferConfig.from_dict({"l2_init_std": 0})
    with pytest.raises(XlvizError, match="mixed_precision"):
        TransferConfig.from_dict({"mixed_precision": "fp8"})
    assert TransferConfig.from_dict({"mixed_precision": "auto", "noise_std": 0.02}).noise_std == 0.02
    with pytest.raises(XlvizError, match="variant"):
        TransferConfig.from_dict({"variants": ["magic"]})
    with pytest.raises(XlvizError, match="learning_rate"):
        TransferConfig.from_dict({"learning_rate": 1})
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert cli(["transfer", "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "bad.json" in err and "malformed JSON" in err and "Traceback" not in err
    assert cli(["transfer", "--config", str(write_config(tmp_path / "x.json")), "--languages", "sov:vso"]) == 2
    assert "word order" in capsys.readouterr().err
    assert cli(["transfer", "--resume", str(tmp_path / "nowhere")]) == 2
    assert "not a run folder" in capsys.readouterr().err


@pytest.mark.slow
def test_manifest_lists_what_the_run_wrote(finished_run):
    """Each export, encoder, predictions file and trained stage folder is in manifest.json, with
    the stage that wrote it; the same entries the folder names give (what runs written before
    the manifest are read from), so both kinds of run read alike."""
    import shutil

    from xlviz import runs

    data = json.loads(finished_run.manifest_path.read_text())
    entries = data["artefacts"]
    systems, langs = ("monotrans", "floor", "dictionary-oracle"), ("en", "svo", "sov")
    for kind, sub, role in (("export", "export", "qa"), ("predictions", "predictions", "predictions")):
        got = {(e["system"], e["language"]) for e in entries if e["kind"] == kind}
        assert got == {(s, l) for s in systems for l in langs}
        assert all(e["role"] == role and e["setting"] == "zero-shot" and e["stage"] == f"s4_{e['system']}"
                   for e in entries if e["kind"] == kind)
    assert {e["path"]: e.get("role") for e in entries if e["kind"] == "stage"} == {
        "s1_pretrain": "pretrained", "s2_transfer-svo": "transferred", "s2_transfer-sov": "transferred", "s3_finetune": "finetuned"}
    on_disk = {p.relative_to(finished_run.path).as_posix() for sub in ("export", "encoders", "predictions", "encodings")
               for p in (finished_run.path / sub).iterdir()}
    assert on_disk == {e["path"] for e in entries if e["kind"] not in ("stage", *runs.WORLD_KINDS)}
    # the world stage's files too (tokenizers, QA sets, parallel pairs, world.json), each on disk
    world = [e for e in entries if e["kind"] in runs.WORLD_KINDS]
    assert world and all(e["stage"] == "world" and (finished_run.path / e["path"]).exists() for e in world)
    # stored encodings: shared by the systems whose encoder they are, so no system or stage
    assert all(e["role"] == "encodings" and "stage" not in e and "system" not in e for e in entries if e["kind"] == "encodings")
    copy = Path(shutil.copytree(finished_run.path, finished_run.path.parent / "copy-without-manifest"))
    (copy / "manifest.json").unlink()
    # each model records the stages its weights come from: a stage, itself last after what it waits for
    deps = {e["path"]: e.get("depends_on") for e in entries}
    assert deps["s1_pretrain"][-1] == "s1_pretrain" and "s2_transfer-sov" not in deps["s1_pretrain"]
    assert deps["s2_transfer-sov"][-1] == "s2_transfer-sov" and "s1_pretrain" in deps["s2_transfer-sov"]
    assert {"s1_pretrain", "s2_transfer-sov"} <= set(deps["encoders/monotrans-sov"])
    assert "s2_transfer-sov" not in deps["encoders/floor-sov"] and "s1_pretrain" in deps["encoders/floor-sov"]
    assert deps["predictions/monotrans-sov.json"] is None  # a file of answers, not weights
    # stored encodings are named by a digest: a run without a manifest has none to read (the page computes);
    # nor does it know which stages a model comes from
    legacy = sorted(runs.legacy_artefacts(Run(copy)), key=lambda e: e["path"])
    # (the world stage's files: found at their usual places by runs.world_path, not listed here)
    assert legacy == [{k: v for k, v in e.items() if k != "depends_on"} for e in entries
                      if e["kind"] != "encodings" and e["kind"] not in runs.WORLD_KINDS]


@pytest.mark.slow
def test_the_run_stores_the_alignment_pages_encodings(finished_run):
    """Each system's scoring stage stores its encoders' vectors of every L2's parallel pairs as the
    Alignment page's first view asks for them (xlviz.analysis.encodings), equal to encoding anew."""
    import numpy as np

    from xlviz.analysis import encodings as enc
    from xlviz.analysis.reports import parallel_data, run_systems
    from xlviz.models.reference import load_spec

    keys = set()
    for l2 in ("svo", "sov"):
        data = parallel_data("world", run_dir=str(finished_run.path), l2=l2, limit=enc.PAIRS)
        assert len(data) == 20 and data.has_words
        systems = run_systems(finished_run.path, l2)
        assert {s.name.rsplit(" · ", 1)[-1] for s in systems} == {"monotrans", "floor", "dictionary-oracle"}
        for s in systems:
            for spec, texts, words in ((s.a, data.src, data.src_words), (s.b, data.tgt, data.tgt_words)):
                meta = enc.request(enc.spec_fingerprint(spec), texts, words, enc.POOLING, enc.MAX_LENGTH)
                path = enc.find(finished_run.path, meta)
                assert path is not None, (s.name, spec.path)
                keys.add(enc.key_of(meta))
                sent, word = enc.read(path, meta)
                model, tok = load_spec(spec, "base")
                again = enc.encode(model, tok, texts, words, enc.POOLING, enc.MAX_LENGTH)
                assert np.array_equal(sent, again[0]) and np.array_equal(word, again[1], equal_nan=True)
    # one file per distinct encoder and texts (the English side of both L2s is one set of sentences):
    # systems sharing an encoder share its file, and nothing else is stored
    assert len(list((finished_run.path / "encodings").iterdir())) == len(keys) < 2 * 2 * 3


def test_a_resume_scores_a_task_added_after_the_scoring_stages_ran(tmp_path):
    """A done stage is skipped on resume, so a per-system task added to config.json would be
    left out in silence: the s4 stages run again for it, and only then."""
    config = write_config(tmp_path / "c.json", methods=["floor"], tasks=["qa"])
    run_dir = tmp_path / "run"
    assert cli(["transfer", "--config", str(config), "--run-dir", str(run_dir)]) == 0
    run = Run(run_dir)
    assert run.status()["tasks_scored"] == ["qa"]
    assert all(r["tasks"] == ["qa"] and "word_translation_per_layer" not in r for r in run.results())
    cfg = run.config()
    cfg["tasks"] = ["qa", "word-translation"]
    run.write_config(cfg)
    assert cli(["transfer", "--resume", str(run_dir)]) == 0
    log = (run_dir / "log.txt").read_text()
    assert "task(s) word-translation added since the scoring stages ran: s4_floor run again" in log
    assert log.count("stage 4/4: s4_floor") == 2 and log.count("s1_pretrain done") == 1, "only the scoring stage runs again"
    svo = [r for r in run.results() if r["language"] != "en"]
    assert svo and all("word-translation" in r["tasks"] and "word_translation_per_layer" in r for r in svo)
    assert run.status()["tasks_scored"] == ["qa", "word-translation"]
    assert cli(["transfer", "--resume", str(run_dir)]) == 0  # nothing added: nothing runs again
    assert (run_dir / "log.txt").read_text().count("s4_floor done") == 2
