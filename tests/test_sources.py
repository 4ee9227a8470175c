"""Data sources and evaluation tasks as registries: what a source offers against what each
method needs (one line naming ``methods`` before anything trains), a new source and a new task
each added by one module at runtime and found by the CLI, the validation and the Runs form, and
the real-corpus MONOTRANS run through the one pipeline with the former command's numbers."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from xlviz.cli import main as cli
from xlviz.data.sources import OFFERS, source_of, sources
from xlviz.errors import XlvizError
from xlviz.methods import methods
from xlviz.runs import Run
from xlviz.transfer.config import TransferConfig
from xlviz.transfer.tasks import run_tasks, task_of, tasks

try:
    from world_files import write_world_corpora
except ImportError:
    from tests.world_files import write_world_corpora


# --------------------------------------------------------------------------- the registries
def test_registry_lists_the_sources_and_tasks():
    assert list(sources())[:3] == ["world", "multi30k", "files"]
    assert {"qa", "retrieval"} <= set(tasks())
    assert source_of("world").offers(None) == frozenset(OFFERS)
    multi30k = source_of("multi30k")
    assert multi30k.offers(multi30k.options({})) == {"l1_corpus", "l1_model", "l2_corpus", "parallel", "parallel_train", "dictionary"}


def test_every_method_declares_needs_the_sources_know():
    for method in methods().values():
        for system in method.default_systems(every=True):
            needs = method.needs(system, TransferConfig())
            assert needs and needs <= set(OFFERS), (system, needs - set(OFFERS))
            assert "world" in method.runs_on(system)
    assert methods()["monotrans"].needs("monotrans") == {"l1_model", "l2_corpus"}
    assert "dictionary" in methods()["monotrans"].needs("dictionary-oracle")
    assert "parallel_train" in methods()["ppa"].needs("ppa", TransferConfig())
    assert "parallel_train" in methods()["veco"].needs("veco", TransferConfig.from_dict({"source": "multi30k"}))


def test_a_premise_the_source_cannot_meet_is_one_line_naming_methods(tmp_path, capsys):
    with pytest.raises(XlvizError, match="needs qa_test, qa_train, which the multi30k source does not offer") as e:
        TransferConfig.from_dict({"source": "multi30k", "methods": ["monotrans", "monotrans+noise"]})
    assert e.value.field == "methods"
    with pytest.raises(XlvizError, match="needs dictionary") as e:
        TransferConfig.from_dict({"source": "multi30k", "methods": ["dictionary-oracle"], "data": {"parallel_train": None}})
    assert e.value.field == "methods"
    # premises met (QA files given) but no stages for streamed corpora: also refused before training
    data = {"l1_corpus": ["a"], "l2_corpus": ["b"], "qa_train": "q.json", "qa_eval": ["q"]}
    with pytest.raises(XlvizError, match="no stages for corpus sources") as e:
        TransferConfig.from_dict({"source": "files", "data": data, "methods": ["jointmulti"]})
    assert e.value.field == "methods"
    # a system that runs on corpora but is not fine-tuned for QA there: refused when the run scores QA
    with pytest.raises(XlvizError, match="'jointpair-disjoint' is not fine-tuned for QA on corpus sources") as e:
        TransferConfig.from_dict({"source": "files", "data": data, "methods": ["monotrans", "jointpair-disjoint"]})
    assert e.value.field == "methods"
    with pytest.raises(XlvizError, match="no stages that start from a pre-trained model") as e:
        TransferConfig.from_dict({"init_model": "some/model"})
    assert e.value.field == "init_model"
    run_dir = tmp_path / "run"
    assert cli(["transfer", "--source", "multi30k", "--systems", "monotrans,monotrans+pos", "--run-dir", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert "system 'monotrans+pos' needs" in err and "methods" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not run_dir.exists(), "nothing is written before the config is valid"


def test_a_pretrained_start_refuses_systems_that_pretrain_from_scratch(tmp_path, capsys):
    """With init_model, only systems that start from the L1 model run: a joint model, CLWE,
    Wu, VECO or PPA would train its own body here and be read as one built on the given model."""
    ok = TransferConfig.from_dict({"source": "multi30k", "init_model": "models/minilm", "methods": ["monotrans", "floor"]})
    assert ok.methods == ["monotrans", "floor"]
    scratch = [s.replace("-K", "-2") for m in methods().values() for s in m.systems  # Wu's systems are one per K
               if "corpus" in m.runs_on(s) and not m.starts_from_l1_model(s)]
    assert {"jointpair-disjoint", "jointpair-joint", "clwe", "wu-shared-top-2", "veco", "ppa"} <= set(scratch)
    for system in scratch:
        with pytest.raises(XlvizError, match=f"'{system}' pre-trains its own model from scratch") as e:
            TransferConfig.from_dict({"source": "multi30k", "init_model": "models/minilm", "methods": ["monotrans", system]})
        assert e.value.field == "methods" and "['monotrans', 'floor']" in str(e.value)
        TransferConfig.from_dict({"source": "multi30k", "methods": ["monotrans", system]})  # without init_model: accepted
    run_dir = tmp_path / "run"
    argv = ["transfer", "--source", "multi30k", "--init-model", "models/minilm", "--systems", "monotrans,clwe", "--run-dir", str(run_dir)]
    assert cli(argv) == 2
    err = capsys.readouterr().err
    assert "'clwe' pre-trains its own model from scratch" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not run_dir.exists(), "nothing is written before the config is valid"


def test_multi30k_source_defaults_and_the_world_default():
    cfg = TransferConfig.from_dict({"source": "multi30k"})
    assert cfg.methods == ["monotrans", "floor"] and cfg.vocab_size == 8000 and cfg.mixed_precision == "no"
    assert cfg.data["l1_corpus"] == ["shared:multi30k/task2/train.*.en.gz"] and cfg.data["parallel_max"] == 1014
    assert TransferConfig.from_dict({"source": "multi30k", "vocab_size": 500}).vocab_size == 500, "a given setting wins"
    world = TransferConfig.from_dict({})
    assert world.source == "world" and world.data == {} and world.vocab_size == TransferConfig().vocab_size
    assert run_tasks([], "world", source_of("world").offers(None)) == ["qa"]
    assert run_tasks([], "corpus", cfg.offers()) == ["retrieval"]
    with pytest.raises(XlvizError, match="task 'qa' needs") as e:
        TransferConfig.from_dict({"source": "multi30k", "tasks": ["qa"]})
    assert e.value.field == "tasks"
    with pytest.raises(XlvizError, match="unknown task") as e:
        TransferConfig.from_dict({"tasks": ["nope"]})
    assert e.value.field == "tasks"


# --------------------------------------------------------------------------- adding a source and a task by one module
SOURCE_MODULE = '''
"""A toy corpus source: the files of one folder, known by its name."""
from dataclasses import dataclass, field

from xlviz.data.sources import Source, register
from xlviz.data.sources.files import CORPUS_DEFAULTS, CorpusOptions

FOLDER = {folder!r}


@dataclass
class ToyOptions(CorpusOptions):
    l1: str = "en"
    l2: str = "svo"
    l1_corpus: list = field(default_factory=lambda: [FOLDER + "/en.txt.gz"])
    l2_corpus: list = field(default_factory=lambda: [FOLDER + "/svo.txt.gz"])


SOURCE = register(Source(name="toy-corpus", kind="corpus", options_class=ToyOptions, defaults=CORPUS_DEFAULTS,
                         description="a toy corpus added by one module"))
'''

TASK_MODULE = '''
"""A toy task: the size of each system's L2 vocabulary, scored per system."""
from xlviz.transfer.tasks import Task, register


class VocabSize(Task):
    def score(self, ctx, system):
        lang = ctx.data.l2s[0]
        ctx.add_task_rows(self.name, [{{"system": system, "language": lang, "vocab_rows": len(ctx.tokenizer(lang))}}])


TASK = register(VocabSize("toy-vocab", "the L2 vocabulary's size (a toy task added by one module)",
                          needs=frozenset({{"l2_corpus"}})))
'''


def load_module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture()
def plugins(tmp_path):
    """A new source and a new task, each one module written here and imported at runtime."""
    from xlviz.data import sources as source_registry
    from xlviz.transfer import tasks as task_registry

    files = write_world_corpora(tmp_path / "toy", documents=40)
    (tmp_path / "toy_source.py").write_text(SOURCE_MODULE.format(folder=str(files["en"].parent)))
    (tmp_path / "toy_task.py").write_text(TASK_MODULE.format())
    load_module(tmp_path / "toy_source.py", "toy_source")
    load_module(tmp_path / "toy_task.py", "toy_task")
    yield files
    source_registry.unregister("toy-corpus")
    task_registry.unregister("toy-vocab")


def test_a_new_source_and_task_are_found_by_the_cli_validation_and_form(plugins, tmp_path, capsys):
    from xlviz.views import runs as runs_view

    with pytest.raises(SystemExit):
        cli(["transfer", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "toy-corpus: a toy corpus added by one module" in help_text
    assert "toy-vocab: the L2 vocabulary's size" in help_text
    cfg = TransferConfig.from_dict({"source": "toy-corpus", "methods": ["monotrans"], "tasks": ["toy-vocab"]})
    assert cfg.data["l2"] == "svo" and task_of("toy-vocab").applies("corpus", cfg.offers())
    assert "toy-corpus" in runs_view.source_options()
    form = runs_view.TransferForm(source="toy-corpus", methods=("monotrans", "floor"), model_size="tiny")
    run_dir, argv = runs_view.prepare_run(form, tmp_path / "ck", "toy")  # the CLI's whole validation
    assert argv[argv.index("--source") + 1] == "toy-corpus" and "--languages" not in argv and not run_dir.exists()
    with pytest.raises(XlvizError, match="needs dictionary") as e:
        runs_view.prepare_run(runs_view.TransferForm(source="toy-corpus", methods=("dictionary-oracle",)), tmp_path / "ck", "toy2")
    assert e.value.field == "methods"
    with pytest.raises(XlvizError, match="unknown data source") as e:
        runs_view.TransferForm(source="nowhere").validate()
    assert e.value.field == "source"


@pytest.mark.slow
def test_a_new_source_and_task_run_end_to_end(plugins, tmp_path):
    run_dir = tmp_path / "run"
    assert cli(["transfer", "--source", "toy-corpus", "--systems", "monotrans,floor", "--tasks", "toy-vocab", "--run-dir", str(run_dir),
                "--model-size", "tiny", "--vocab-size", "120", "--block-size", "24", "--mlm-batch-size", "4",
                "--pretrain-steps", "2", "--transfer-steps", "2", "--eval-max-length", "24", "--qa-max-length", "64",
                "--doc-stride", "24"]) == 0
    run = Run(run_dir)
    assert run.status()["stages_done"] == ["world", "s1_pretrain", "s2_transfer-svo", "s4_monotrans", "s4_floor"]
    rows = {r["system"]: r for r in run.results()}
    assert set(rows) == {"monotrans", "floor"}
    for row in rows.values():
        assert row["tasks"] == ["toy-vocab"] and row["vocab_rows"] == len(json.loads(
            (run_dir / "world" / "tokenizers" / "svo" / "tokenizer.json").read_text())["model"]["vocab"])


# --------------------------------------------------------------------------- every method on real text
# The systems that run on corpus sources besides MONOTRANS and its floor, each trained from the
# files and scored by the run's tasks (sentence retrieval per layer on the parallel pair).
CORPUS_SYSTEMS = ["jointpair-disjoint", "jointpair-joint", "clwe", "wu-shared-top-1", "veco", "ppa"]
PPA_TINY = ["--ppa-pairs", "60", "--ppa-queue-size", "8", "--ppa-batch-size", "4", "--ppa-steps", "3"]  # tiny: 2 layers, the bottom one per language
TINY_FILES_RUN = ["--seed", "5", "--model-size", "tiny", "--vocab-size", "150", "--block-size", "24", "--pretrain-steps", "3",
                  "--transfer-steps", "3", "--eval-max-length", "24", "--qa-max-length", "64", "--doc-stride", "24",
                  "--mlm-batch-size", "4", "--log-every", "1"]


@pytest.mark.slow
def test_every_corpus_system_trains_and_is_scored_on_a_files_run(tmp_path, capsys):
    """A tiny ``--source files`` run of every system that runs on corpora: each one's stages
    train on the text files, each gets a retrieval row per layer; MONOTRANS and its floor keep
    the numbers and weights of a run of them alone; a system still without corpus stages, and a
    corpus system in a run scoring QA, are one line naming ``methods``."""
    files = write_world_corpora(tmp_path / "c", documents=60)
    source = ["--source", "files", "--l1", "en", "--l2", "svo", "--l1-corpus", str(files["en"]), "--l2-corpus", str(files["svo"]),
              "--parallel", str(files["par_en"]), str(files["par_svo"]),
              "--parallel-train", str(files["train_en"]), str(files["train_svo"]), *TINY_FILES_RUN]
    every, alone = tmp_path / "every", tmp_path / "alone"
    systems = ["monotrans", "floor", *CORPUS_SYSTEMS]
    assert cli(["transfer", "--run-dir", str(every), "--systems", ",".join(systems), *source, *PPA_TINY]) == 0
    assert cli(["transfer", "--run-dir", str(alone), "--systems", "monotrans,floor", *source]) == 0
    run = Run(every)
    cfg = TransferConfig.from_dict(json.loads((every / "config.json").read_text()))
    from xlviz.methods import method_of
    from xlviz.transfer.pipeline import Pipeline

    pipe = Pipeline(cfg, tmp_path / "unused")
    done = set(run.status()["stages_done"])
    trained = {m["stage"] for m in run.metrics()}
    for system in CORPUS_SYSTEMS:
        stages = [s for s in method_of(system).stages(pipe, system) if s.phase != "data"]
        assert stages and all(s.name in done for s in stages), system
        assert all(s.name in trained for s in stages if s.phase == "pretrain"), f"{system}: a training stage logged no loss"
    rows = {r["system"]: r for r in run.results()}
    assert set(rows) == set(systems)
    layers = len(rows["monotrans"]["retrieval_per_layer"])
    for system, row in rows.items():
        assert row["tasks"] == ["retrieval"] and row["language"] == "svo"
        assert len(row["retrieval_per_layer"]) == layers and all(0 <= x <= 100 for x in row["retrieval_per_layer"]), system
        assert 0 <= row["retrieval"] <= 100 and row["retrieval_selection_pairs"] + row["retrieval_reported_pairs"] == 40
    assert [r for r in run.results() if r["system"] in ("monotrans", "floor")] == Run(alone).results()
    # every pre-training from scratch is judged against its targets' unigram entropy, as on the
    # world (3 steps: on the plateau), and every row built on one says so
    verdicts = run.verdicts()
    pretraining = {s.name for system in systems for s in method_of(system).stages(pipe, system) if s.phase == "pretrain"}
    assert "s1_pretrain" in pretraining and len(pretraining) >= 5
    assert {v["verdict"] for s, v in verdicts.items() if s in pretraining} == {"degenerate"}, verdicts
    assert all(verdicts[s]["loss"] > verdicts[s]["unigram_entropy"] - 1.0 for s in pretraining)
    assert all(r.get("verdict") == "degenerate" and r.get("degenerate_stages") for r in rows.values())
    # each system's s4 stage exported its encoders: the Alignment page (and the CLI) offer every system
    from xlviz.analysis.reports import run_systems
    from xlviz.runs import artefacts

    assert {(a.system, a.language) for a in artefacts(run, "encoder")} == {(s, lang) for s in systems for lang in ("en", "svo")}
    assert {s.name.split(" · ")[1] for s in run_systems(every, "svo")} == set(systems)
    for stage in ("s1_pretrain", "s2_transfer-svo"):
        assert (every / stage / "model.safetensors").read_bytes() == (alone / stage / "model.safetensors").read_bytes()
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("retrieval ")]
    assert "retrieval monotrans  svo: degenerate (degenerate stage s1_pretrain), not a result" in printed
    assert len(printed) == len(systems) + 2 and not any("%" in line for line in printed), "a degenerate row prints no number"
    refused = tmp_path / "refused"
    for system in ("monotrans+pos", "jointmulti"):
        assert cli(["transfer", "--run-dir", str(refused), "--systems", f"monotrans,{system}", *source]) == 2
        err = capsys.readouterr().err
        assert f"system {system!r}" in err and "methods" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    qa = ["--qa-train", str(files["en"]), "--qa-eval", str(files["en"])]
    assert cli(["transfer", "--run-dir", str(refused), "--systems", f"monotrans,{CORPUS_SYSTEMS[0]}", *source, *qa]) == 2
    err = capsys.readouterr().err
    assert "not fine-tuned for QA on corpus sources" in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not refused.exists()


# --------------------------------------------------------------------------- the former command, the same numbers
@pytest.mark.slow
def test_transfer_corpus_alias_gives_the_same_run_as_transfer_on_files(tmp_path):
    """``transfer-corpus`` (deprecated) maps onto ``transfer --source files``: the same stages,
    losses, weights and results at the same seed."""
    files = write_world_corpora(tmp_path / "c", documents=60)
    common = ["--seed", "5", "--l1", "en", "--l2", "svo", "--l1-corpus", str(files["en"]), "--l2-corpus", str(files["svo"]),
              "--parallel", str(files["par_en"]), str(files["par_svo"]), "--model-size", "tiny", "--vocab-size", "150",
              "--block-size", "24", "--pretrain-steps", "3", "--transfer-steps", "3", "--eval-max-length", "24",
              "--qa-max-length", "64", "--doc-stride", "24", "--log-every", "1"]
    old, new = tmp_path / "old", tmp_path / "new"
    assert cli(["transfer-corpus", "--run-dir", str(old), "--batch-size", "4", *common]) == 0
    assert cli(["transfer", "--source", "files", "--run-dir", str(new), "--mlm-batch-size", "4", *common]) == 0
    a, b = Run(old), Run(new)
    assert a.status()["stages_done"] == b.status()["stages_done"] == ["world", "s1_pretrain", "s2_transfer-svo", "alignment",
                                                                      "s4_monotrans", "s4_floor"]  # s4: the encoders
    assert [(m["stage"], m["loss"]) for m in a.metrics()] == [(m["stage"], m["loss"]) for m in b.metrics()]
    assert a.results() == b.results() and {r["system"] for r in a.results()} == {"monotrans", "floor"}
    for stage in ("s1_pretrain", "s2_transfer-svo"):
        assert (old / stage / "model.safetensors").read_bytes() == (new / stage / "model.safetensors").read_bytes()


# --------------------------------------------------------------------------- more retrieval sets (opt-in tasks)
def test_tatoeba_and_pud_retrieval_tasks_score_their_pairs(shared_data, tmp_path, monkeypatch):
    """The opt-in retrieval tasks read their own pairs (Tatoeba xx-eng with English on the L1
    side, PUD by sentence id) and write their own prefixed fields beside the Multi30k ones."""
    import numpy as np

    import xlviz.analysis.representations as representations
    from xlviz.methods import corpus
    from xlviz.methods import monotrans as monotrans_method
    from xlviz.transfer.pipeline import Pipeline

    monkeypatch.setenv("XLVIZ_SHARED_DATA", str(shared_data))
    cfg = TransferConfig.from_dict({"source": "multi30k", "methods": ["monotrans"], "tasks": ["retrieval-tatoeba", "retrieval-pud"],
                                    "data": {"parallel_max": 60}})
    pipe = Pipeline(cfg, tmp_path / "run")
    assert [s for s in pipe.plan() if s.startswith("alignment")] == ["alignment-tatoeba", "alignment-pud"]
    assert TransferConfig.from_dict({"source": "multi30k"}).tasks == [] and "alignment-pud" not in \
        Pipeline(TransferConfig.from_dict({"source": "multi30k"}), tmp_path / "r2").plan(), "opt-in: not in a default run"
    pipe.run.path.mkdir()
    seen = {}

    def embed(model, tok, texts, **kw):  # the L1 side is English in both sets; identical rows: perfect retrieval
        seen.setdefault(model, []).append(texts)
        return np.stack([np.eye(len(texts))] * 2)

    monkeypatch.setattr(corpus, "load_l1", lambda ctx: ("l1", None))
    monkeypatch.setattr(monotrans_method, "l2_model", lambda ctx, system, l1, tok: ("l2", None))
    monkeypatch.setattr(representations, "sentence_embeddings", embed)
    for name in ("retrieval-tatoeba", "retrieval-pud"):
        task_of(name).run(pipe)
    row = pipe.run.results()[0]
    assert row["tasks"] == ["retrieval-tatoeba", "retrieval-pud"] and row["language"] == "de"
    assert row["tatoeba_retrieval"] == 100.0 and row["pud_retrieval"] == 100.0 and "retrieval" not in row
    assert row["tatoeba_retrieval_selection_pairs"] + row["tatoeba_retrieval_reported_pairs"] == 60
    en_tatoeba, en_pud = seen["l1"]
    assert all(s.isascii() for s in en_tatoeba[:20]) and len(en_pud) == 60
    assert any(c in "äöüß" for s in seen["l2"][0] for c in s), "the L2 side of Tatoeba is German"
    assert json.loads((tmp_path / "run" / "alignment-pud.json").read_text())["parallel"] == ["pud:en-de"]


@pytest.mark.slow
def test_word_translation_and_probing_tasks_on_a_world_run(tmp_path):
    """Opt-in tasks scored per system after QA: rows carry the tasks, the per-layer word
    translation accuracy against the world's dictionary and the agreement probe's accuracy."""
    tiny = {"model_size": "tiny", "vocab_size": 200, "batch_size": 8, "mlm_batch_size": 8, "pretrain_steps": 4, "transfer_steps": 3,
            "finetune_steps": 3, "log_every": 2, "mixed_precision": "no", "eval_every": 0, "methods": ["monotrans", "floor"],
            "tasks": ["qa", "word-translation", "probing"],
            # 4 pre-training steps end on the plateau: judged at a margin they pass, so the agreement probe
            # scores them (a degenerate encoder is not scored: tests/test_verdicts.py)
            "verdict_mlm_margin": -100.0,
            "world": {"corpus_documents": 80, "qa_train_paragraphs": 10, "qa_dev_paragraphs": 3, "qa_test_paragraphs": 3,
                      "parallel_pairs": 20, "agreement_pairs": 9, "sense_pairs": 6}}
    (tmp_path / "c.json").write_text(json.dumps(tiny))
    assert cli(["transfer", "--config", str(tmp_path / "c.json"), "--run-dir", str(tmp_path / "run")]) == 0
    rows = {(r["system"], r["language"]): r for r in Run(tmp_path / "run").results()}
    for system in ("monotrans", "floor"):
        assert rows[(system, "en")]["tasks"] == ["qa", "probing"] and "word_translation_per_layer" not in rows[(system, "en")]
        for lang in ("en", "svo", "sov"):  # a tiny vocabulary may cover no pair's two forms: no accuracy, said so
            row = rows[(system, lang)]
            assert row["agreement_total"] > 0 and 0 <= row["agreement_pairs"] <= row["agreement_total"]
            assert (row["agreement"] is None) == (row["agreement_pairs"] == 0)
            assert row["agreement"] is None or 0 <= row["agreement"] <= 100
        for l2 in ("svo", "sov"):
            row = rows[(system, l2)]
            assert row["tasks"] == ["qa", "word-translation", "probing"] and "f1" in row
            assert len(row["word_translation_per_layer"]) == 3 and all(0 <= x <= 100 for x in row["word_translation_per_layer"])
            assert row["word_translation_words"] > 0
    with pytest.raises(XlvizError, match="task 'word-translation' needs dictionary") as e:  # no parallel training lines
        TransferConfig.from_dict({"source": "multi30k", "tasks": ["word-translation"], "data": {"parallel_train": None}})
    assert e.value.field == "tasks"


# --------------------------------------------------------------------------- the Runs form
def test_runs_form_offers_the_registered_sources_and_starts_a_multi30k_run(plugins, tmp_path, monkeypatch):
    """The Runs page's "Data source" lists the registry (a source added at runtime too) and
    passes the choice to ``xlviz transfer --source``; a system the source cannot run is refused."""
    from streamlit.testing.v1 import AppTest

    from xlviz import jobs

    try:
        from test_app_pages import APP, TIMEOUT
    except ImportError:
        from tests.test_app_pages import APP, TIMEOUT
    root = tmp_path / "checkpoints"
    root.mkdir()
    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(root))
    calls = []
    monkeypatch.setattr(jobs, "start_job", lambda argv, run_dir: calls.append(list(argv)) or 4242)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.run()
    at.switch_page("pages/runs.py").run()
    assert not at.exception, [e.message for e in at.exception]
    source = next(s for s in at.selectbox if s.label == "Data source")
    assert [o.split(" — ")[0] for o in source.options][:3] == ["world", "multi30k", "files"] and source.value.startswith("world")
    assert any(o.startswith("toy-corpus — a toy corpus added by one module") for o in source.options)
    source.set_value(next(o for o in source.options if o.startswith("multi30k")))
    next(m for m in at.multiselect if m.label == "Systems (methods)").set_value(["monotrans", "dictionary-oracle"])
    next(b for b in at.button if b.label == "Start run").click().run()
    assert not calls and "system 'dictionary-oracle' needs qa_test, qa_train, which the multi30k source" in "\n".join(str(e.value) for e in at.error)
    next(m for m in at.multiselect if m.label == "Systems (methods)").set_value(["monotrans", "floor"])
    next(b for b in at.button if b.label == "Start run").click().run()
    assert not at.exception and len(calls) == 1, [str(e.value) for e in at.error]
    argv = calls[0]
    assert argv[argv.index("--source") + 1] == "multi30k" and "--languages" not in argv
    assert argv[argv.index("--methods") + 1] == "monotrans,floor"


def test_corpus_qa_rows_carry_paragraph_bootstrap_intervals(tmp_path, monkeypatch):
    """QA on a corpus source (XQuAD files) reports EM and F1 with the paragraph-clustered
    bootstrap interval a world run's rows carry (the models are stubs: only the scoring runs)."""
    import xlviz.data.vocabulary as vocabulary
    import xlviz.models.loading as loading
    import xlviz.models.monotrans as monotrans
    import xlviz.transfer.qa as tqa
    from xlviz.methods import corpus
    from xlviz.methods import monotrans as monotrans_method
    from xlviz.transfer.pipeline import Pipeline
    from xlviz.transfer.tasks import qa as qa_task

    def squad(lang):  # 2 articles x 3 paragraphs x 2 questions
        data = []
        for a in range(2):
            paras = []
            for p in range(3):
                text = f"the answer is word{a}{p} here"
                paras.append({"context": text, "qas": [{"id": f"{lang}-{a}-{p}-{q}", "question": "which?",
                                                        "answers": [{"text": f"word{a}{p}", "answer_start": text.index("word")}]}
                                                       for q in range(2)]})
            data.append({"title": f"t{a}", "paragraphs": paras})
        return {"version": "1.1", "data": data}

    for lang in ("en", "de"):
        (tmp_path / f"xquad.{lang}.json").write_text(json.dumps(squad(lang)))
    (tmp_path / "l1.txt").write_text("a b c\n")
    cfg = TransferConfig.from_dict({"source": "files", "methods": ["monotrans"], "data": {
        "l1": "en", "l2": "de", "l1_corpus": [str(tmp_path / "l1.txt")], "l2_corpus": [str(tmp_path / "l1.txt")],
        "qa_train": str(tmp_path / "xquad.en.json"), "qa_eval": [str(tmp_path / "xquad.en.json"), str(tmp_path / "xquad.de.json")]}})
    pipe = Pipeline(cfg, tmp_path / "run")
    pipe.run.path.mkdir()

    class Stub:
        def to(self, device):
            return self

    monkeypatch.setattr(loading, "load_model", lambda *a, **k: (Stub(), "tok"))
    monkeypatch.setattr(corpus, "load_l1", lambda ctx: ("l1", "tok"))
    monkeypatch.setattr(monotrans_method, "l2_model", lambda ctx, system, l1, tok: ("l2", "tok"))
    monkeypatch.setattr(monotrans, "zero_shot_model", lambda *a, **k: Stub())
    monkeypatch.setattr(vocabulary, "special_row_map", lambda *a, **k: {})
    monkeypatch.setattr(qa_task, "qa_data", lambda ctx: ({}, set()))  # nothing held out for training
    monkeypatch.setattr(pipe, "save_artefact", lambda *a, **k: None)

    def predict(model, tok, data, **kw):  # right on article 0's paragraphs, wrong on article 1's
        return {q["id"]: (f"word{q['id'][3:6].replace('-', '')}" if q["id"][3] == "0" else "nothing")
                for a in data["data"] for p in a["paragraphs"] for q in p["qas"]}

    monkeypatch.setattr(tqa, "predict_answers", predict)
    rows = qa_task.score_corpus(pipe, "monotrans")
    assert [r["language"] for r in rows] == ["en", "de"]
    for r in rows:
        assert r["exact_match"] == pytest.approx(50.0) and r["n_questions"] == 12 and r["n_paragraphs"] == 6
        assert r["ci_method"] == "paragraph bootstrap" and 0 <= r["exact_match_ci_low"] < 50 < r["exact_match_ci_high"] <= 100
        assert r["f1_ci_low"] <= r["f1"] <= r["f1_ci_high"]
    # and EM/F1 per slice of the text's questions, each dimension a partition of the questions
    from xlviz.evaluation.slices import REAL_DIMENSIONS

    for r in rows:
        by_dim: dict[str, list[dict]] = {}
        for s in r["slices"]:
            by_dim.setdefault(s["dimension"], []).append(s)
        assert set(by_dim) == set(REAL_DIMENSIONS)
        assert all(sum(s["n_questions"] for s in ss) == 12 for ss in by_dim.values())
        # every question asks "which?" (the question word comes from the English file)
        assert [(s["value"], s["n_questions"], s["n_paragraphs"]) for s in by_dim["question word"]] == [("which", 12, 6)]
        assert by_dim["question word"][0]["exact_match"] == pytest.approx(50.0)
