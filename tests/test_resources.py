"""What a row read, and a dictionary method never scored on what it was fitted on.

- The world's gold dictionary is split by L1 word (training / held out, seeded by the run's
  seed): WECHSEL's fit reads only the training part (checked on the parameters: changing the
  held-out pairs leaves the neighbour table bit for bit, changing a training pair does not),
  and the word-translation task scores only held-out words.
- Result rows carry ``resources`` (parallel pairs, a dictionary with its size and source, L2
  labels, test-time translation) as each method's premise declares it; the report, the Runs
  page's tables and ``--compare`` show its label; old rows without the field still read.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import load_file

from xlviz.data.dictionary import gold_split
from xlviz.data.world import LanguageSpec, WorldConfig, generate_world
from xlviz.methods import combine_labels, method_of, resources_label, row_resources
from xlviz.transfer.config import TransferConfig


@pytest.fixture(scope="module")
def world():
    return generate_world(WorldConfig(seed=3, corpus_documents=60, parallel_pairs=30, languages=[LanguageSpec("svo")]))


def _all_pairs(world, l2="svo") -> set[tuple[str, str]]:
    return {(r[world.l1], r[l2]) for r in world.dictionary(l2)}


def test_the_gold_split_is_disjoint_by_l1_word_complete_and_deterministic(world):
    train, test = gold_split(world, "svo", 0.2, seed=0)
    assert set(train) | set(test) == _all_pairs(world) and not set(train) & set(test)
    assert not {a for a, _ in train} & {a for a, _ in test}  # disjoint by source word, not only by pair
    sources = {a for a, _ in _all_pairs(world)}
    assert len({a for a, _ in test}) == round(0.2 * len(sources))
    assert gold_split(world, "svo", 0.2, seed=0) == (train, test)  # same seed, same split
    assert gold_split(world, "svo", 0.2, seed=1)[1] != test  # another seed draws other words
    assert len(gold_split(world, "svo", 0.5, seed=0)[1]) > len(test)


class FakeRun:
    """What ``run_vectors`` reads of a run: config, world, tokenizers, a folder."""

    def __init__(self, world, folder: Path, **cfg):
        from xlviz.data.tokenization import train_tokenizer

        from xlviz.data.sources.world import WorldData

        self.world, self.data, self.main, self.folder = world, WorldData(world), True, folder
        self.cfg = TransferConfig(seed=0, **cfg)
        self._toks = {lang: train_tokenizer(world.corpus(lang), 300) for lang in world.languages}

    def tokenizer(self, lang):
        return self._toks[lang]

    def path(self, *parts):
        return self.folder.joinpath(*parts)

    def log(self, msg):
        pass


def _vectors(run, monkeypatch, world_dictionary=None):
    """Run WECHSEL's vectors stage (the static spaces aligned on the dictionary, the neighbour
    table) into a fresh folder; returns (neighbours, weights, report, the dictionary the fit got)."""
    from xlviz.methods import wechsel

    seen = {}
    real = wechsel.aligned_spaces

    def spy(*args, dictionary, **kw):
        seen["dictionary"] = dictionary
        return real(*args, dictionary=dictionary, **kw)

    monkeypatch.setattr(wechsel, "aligned_spaces", spy)
    monkeypatch.setattr(wechsel, "new_bert", lambda ctx, lang: SimpleNamespace(config=SimpleNamespace(hidden_size=16)))
    if world_dictionary is not None:
        monkeypatch.setattr(run.world, "dictionary", world_dictionary)
    run.folder = run.folder.parent / f"{run.folder.name}-{len(list(run.folder.parent.iterdir()))}"
    run.folder.mkdir(parents=True)
    wechsel.run_vectors(run)
    table = load_file(str(run.path(wechsel.VECTORS_DIR, "svo.safetensors")))
    report = json.loads(run.path(wechsel.VECTORS_DIR, "report.json").read_text())
    monkeypatch.undo()
    return table["neighbours"], table["weights"], report, seen["dictionary"]


def _relabelled(world, targets: set[str]):
    """``world.dictionary`` with the L2 words of the pairs whose L1 word is in ``targets``
    rotated among themselves (same L1 words, so the same split; wrong translations)."""
    original = world.dictionary

    def dictionary(l2):
        rows = [dict(r) for r in original(l2)]
        hit = [r for r in rows if r[world.l1] in targets]
        words = [r[l2] for r in hit]
        for r, w in zip(hit, words[1:] + words[:1]):
            r[l2] = w
        return rows
    return dictionary


def test_the_wechsel_fit_reads_no_held_out_pair(world, tmp_path, monkeypatch):
    run = FakeRun(world, tmp_path / "run")
    train, test = gold_split(world, "svo", run.cfg.gold_dictionary_test_fraction, run.cfg.seed)
    ids, weights, report, fitted = _vectors(run, monkeypatch)
    assert sorted(fitted) == sorted(train) and not {a for a, _ in fitted} & {a for a, _ in test}
    lang = report["languages"]["svo"]
    assert (lang["dictionary_train_pairs"], lang["dictionary_held_out_pairs"]) == (len(train), len(test))
    assert 0 < lang["pairs"] <= len(train) and lang["held_out_one_token_pairs"] <= len(test)
    # parameter level: wrong translations among the held-out pairs leave the table bit for bit ...
    held_words = {a for a, _ in test}
    ids2, weights2, _, _ = _vectors(run, monkeypatch, _relabelled(world, held_words))
    assert torch.equal(ids, ids2) and torch.equal(weights, weights2)
    # ... wrong translations among the training pairs change it (the check can fail)
    train_words = set(sorted({a for a, _ in train})[:40])
    ids3, weights3, _, _ = _vectors(run, monkeypatch, _relabelled(world, train_words))
    assert not (torch.equal(ids, ids3) and torch.equal(weights, weights3))


def test_the_seed_dictionary_is_drawn_from_the_training_part_only(world, tmp_path):
    from xlviz.methods.wechsel import dictionary_pairs, gold_ids

    run = FakeRun(world, tmp_path / "run", wechsel_dictionary="seed", wechsel_seed_size=30)
    train, test = gold_split(world, "svo", 0.2, 0)
    seed = dictionary_pairs(run, "svo")
    assert len(seed) == 30 and set(seed) <= set(train)
    # precision@1 is read on held-out one-token pairs only
    v1, v2 = run.tokenizer("en").get_vocab(), run.tokenizer("svo").get_vocab()
    assert gold_ids(run, "svo") == {v2[b]: v1[a] for a, b in test if a in v1 and b in v2}


def test_word_translation_scores_only_held_out_words(world, monkeypatch):
    """Every system's word-translation row is scored against the held-out part, and says the
    split's sizes."""
    import xlviz.analysis.reports as reports
    from xlviz.transfer.tasks import task_of

    got = []

    def fake_alignment(a, at, b, bt, data, **kw):
        got.append(list(data.dictionary))
        return [{"word_translation_a_to_b": 0.5, "word_translation_b_to_a": 0.25, "n_words": 7}]

    class Stub:
        def eval(self):
            return self

    monkeypatch.setattr(reports, "system_alignment", fake_alignment)
    method = method_of("monotrans")
    monkeypatch.setattr(method, "encoder", lambda ctx, system, lang: (Stub(), None))
    ctx = SimpleNamespace(world=world, cfg=TransferConfig(seed=2))
    rows = task_of("word-translation").world_rows(ctx, "monotrans", log=False)
    train, test = gold_split(world, "svo", ctx.cfg.gold_dictionary_test_fraction, 2)
    assert got == [test] and not {a for a, _ in got[0]} & {a for a, _ in train}
    assert rows[0]["word_translation_per_layer"] == [37.5]
    assert (rows[0]["word_translation_train_pairs"], rows[0]["word_translation_test_pairs"]) == (len(train), len(test))
    assert rows[0]["word_translation_dictionary_size"] == len(_all_pairs(world))


@pytest.mark.parametrize("system, expect", [
    ("monotrans", {"parallel_pairs": 0, "dictionary": None, "l2_labels": False, "test_time_translation": False}),
    ("floor", {"parallel_pairs": 0, "dictionary": None, "l2_labels": False, "test_time_translation": False}),
    # JOINTPAIR (Artetxe et al. 2020): joint MLM on two monolingual corpora, no parallel text
    ("jointpair-disjoint", {"parallel_pairs": 0, "dictionary": None, "l2_labels": False, "test_time_translation": False}),
    # CLWE: VecMap induces its dictionary from the monolingual spaces (no external one)
    ("clwe", {"parallel_pairs": 0, "dictionary": {"size": None, "source": "induced", "split": "train"}, "l2_labels": False,
              "test_time_translation": False}),
    ("mono-l2-supervised", {"parallel_pairs": 0, "dictionary": None, "l2_labels": True, "test_time_translation": False}),
    ("veco-plugin", {"parallel_pairs": 2000, "dictionary": None, "l2_labels": True, "test_time_translation": True}),
    ("ppa", {"parallel_pairs": 2000, "dictionary": None, "l2_labels": False, "test_time_translation": False}),
])
def test_each_system_declares_what_it_reads(system, expect):
    cfg = TransferConfig(seed=0)
    cfg.world.parallel_train_pairs = 2000
    assert method_of(system).resources(system, cfg) == expect


def test_wechsel_and_the_oracle_declare_their_dictionary(world, tmp_path):
    run = FakeRun(world, tmp_path / "run")
    train, _ = gold_split(world, "svo", 0.2, 0)
    res = method_of("monotrans+wechsel").resources("monotrans+wechsel", run.cfg, run, "svo")
    assert res["dictionary"] == {"size": len(train), "source": "gold", "split": "train"}
    assert resources_label(res) == f"dict {len(train)} gold"
    oracle = method_of("dictionary-oracle").resources("dictionary-oracle", run.cfg, run, "svo")
    assert oracle["dictionary"] == {"size": len(_all_pairs(world)), "source": "gold", "split": "all"}
    run.cfg.wechsel_dictionary = "identical"
    assert method_of("wechsel-only").resources("wechsel-only", run.cfg, run, "svo")["dictionary"]["source"] == "induced"


def test_labels_and_old_rows():
    assert resources_label({"parallel_pairs": 10000, "dictionary": {"size": 2000, "source": "gold", "split": "train"},
                            "l2_labels": False, "test_time_translation": False}) == "pairs 10k · dict 2k gold"
    assert resources_label({"parallel_pairs": 1500, "dictionary": None, "l2_labels": True,
                            "test_time_translation": True}) == "pairs 1.5k · L2 labels · test-time translation"
    assert resources_label({"parallel_pairs": 0, "dictionary": None}) == "L1 labels only"
    assert resources_label(None) == "not recorded"
    # rows written before rows carried resources: derived from their fields and system, marked
    old_wechsel = {"system": "wechsel-only", "language": "svo", "f1": 20.0, "wechsel_dictionary": "gold"}
    assert resources_label(row_resources(old_wechsel)) == "dict gold (all) (derived)"  # it read the whole dictionary
    assert resources_label(row_resources({"system": "veco-plugin", "parallel_pairs": 64, "l2_labels": True,
                                          "translate_test": True})) == "pairs 64 · L2 labels · test-time translation (derived)"
    assert row_resources({"system": "no-such-system", "f1": 1.0}) is None
    # a hand-edited field: a label, never a traceback or free text from the file
    assert resources_label({"parallel_pairs": "many", "dictionary": {"size": "x", "source": "<b>web</b>"}}) == "pairs ? · dict ? ?"
    assert resources_label(row_resources({"system": "monotrans", "resources": "junk"})) == "L1 labels only (derived)"
    recorded = {"parallel_pairs": 0, "dictionary": None, "l2_labels": False, "test_time_translation": False}
    assert row_resources({"system": "monotrans", "resources": recorded}) is recorded


def _rows():
    wechsel = {"parallel_pairs": 0, "dictionary": {"size": 126, "source": "gold", "split": "train"}, "l2_labels": False,
               "test_time_translation": False}
    none = {**wechsel, "dictionary": None}
    row = {"exact_match": 40.0, "f1": 50.0, "setting": "zero-shot", "verdict": "ok"}
    return [{**row, "system": "monotrans", "language": "en", "resources": none},
            {**row, "system": "monotrans", "language": "svo", "resources": none},
            {**row, "system": "wechsel-only", "language": "en", "resources": wechsel},
            {**row, "system": "wechsel-only", "language": "svo", "resources": wechsel},
            {**row, "system": "floor", "language": "svo"}]  # an old row: no field


def test_the_report_marks_rows_by_resources():
    from xlviz.transfer.report import resources_line, resources_table, results_table

    text = results_table(_rows())
    line = next(l for l in text.splitlines() if l.startswith("wechsel-only") and " svo " in l)
    assert line.rstrip().endswith("dict 126 gold")
    assert next(l for l in text.splitlines() if l.startswith("monotrans ")).rstrip().endswith("L1 labels only")
    assert next(l for l in text.splitlines() if l.startswith("floor")).rstrip().endswith("L1 labels only (derived)")
    table = resources_table([_rows(), _rows()])
    assert "| wechsel-only | dict 126 gold |" in table and "| monotrans | L1 labels only |" in table
    differ = resources_line([_rows()], "wechsel-only", "monotrans")
    assert "wechsel-only: dict 126 gold; monotrans: L1 labels only" in differ and "not like for like" in differ
    assert "not like for like" not in resources_line([_rows()], "monotrans", "floor")
    # each L2 and seed has its own split: one label with the size range, a valid table cell
    other = [{**r, "resources": {**r["resources"], "dictionary": {**r["resources"]["dictionary"], "size": 131}}}
             if r["system"] == "wechsel-only" else r for r in _rows()]
    assert "| wechsel-only | dict 126-131 gold |" in resources_table([_rows(), other])
    assert combine_labels(["pairs 2k", "L2 labels"]) == "pairs 2k; L2 labels"
    assert combine_labels(["dict 900 gold", "dict 1.2k gold"]) == "dict 900-1.2k gold"


def test_the_runs_page_tables_carry_the_label():
    import pandas as pd

    from xlviz.views.runs import RESULT_COLUMNS, resources_of, results_by_setting

    rows = _rows()
    long = pd.DataFrame([{"run": "r", "setting": "zero-shot", "system": r["system"], "language": r["language"],
                          "exact_match": r["exact_match"], "f1": r["f1"], "parallel_pairs": 0, "resources": resources_of(r),
                          "l1_f1": None, "l1": "en", "verdict": None} for r in rows], columns=RESULT_COLUMNS)
    (_, wide), = results_by_setting(long, ["en", "svo"])
    assert wide.loc["wechsel-only", "resources"] == "dict 126 gold"
    assert wide.loc["floor", "resources"] == "L1 labels only (derived)"


def test_the_alignment_pages_score_a_runs_held_out_words(world, tmp_path):
    """The Alignment page's word translation on a run's world reads the same held-out part as
    the run's task (its seed and fraction from config.json); a world folder alone, the whole."""
    from xlviz.data.parallel.world import _scored_dictionary
    from xlviz.errors import XlvizError

    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"seed": 4, "gold_dictionary_test_fraction": 0.3}))
    assert _scored_dictionary(run, world, "svo") == gold_split(world, "svo", 0.3, 4)[1]
    assert set(_scored_dictionary(None, world, "svo")) == _all_pairs(world)
    (run / "config.json").write_text(json.dumps({"seed": 4, "gold_dictionary_test_fraction": 2}))
    with pytest.raises(XlvizError, match="between 0 and 1") as bad:
        _scored_dictionary(run, world, "svo")
    assert bad.value.field == "gold_dictionary_test_fraction"


@pytest.fixture(scope="module")
def app_root(tmp_path_factory) -> Path:
    from tests.app_fixtures import make_run

    root = tmp_path_factory.mktemp("resources") / "checkpoints"
    make_run(root, "tt-run", translate_train=True)  # rows written before rows carried resources
    return root


def _page(root: Path, monkeypatch, name: str, models: list[str] | None = None):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("XLVIZ_CHECKPOINTS", str(root))
    monkeypatch.delenv("XLVIZ_SHARED_DATA", raising=False)
    at = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "app.py"), default_timeout=180)
    if models is not None:
        at.session_state["xlviz_models"] = models
    at.run()
    at.switch_page(f"pages/{name}.py").run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def test_the_runs_and_xquad_pages_mark_each_row_by_its_resources(app_root, monkeypatch):
    from tests.app_fixtures import PARALLEL, SUPERVISED

    at = _page(app_root, monkeypatch, "runs")
    at.selectbox(key="runs_live_select").set_value("tt-run").run()
    zero, translate = [d.value for d in at.dataframe if "resources" in d.value.columns and "run" not in d.value.columns]
    assert zero.loc[PARALLEL, "resources"] == "pairs 12 (derived)"
    assert zero.loc["monotrans", "resources"] == "L1 labels only (derived)"
    assert translate.loc[SUPERVISED, "resources"] == "L2 labels (derived)"
    at = _page(app_root, monkeypatch, "xquad", models=["run:tt-run:export:monotrans", f"run:tt-run:export:{SUPERVISED}"])
    # one table of what each model read above each setting's two score tables (zero-shot, then translate-train)
    read = [d.value for d in at.dataframe if list(d.value.columns) == ["model", "resources", "parallel pairs"]]
    assert [list(r["resources"]) for r in read] == [["L1 labels only (derived)"], ["L2 labels (derived)"]]
    assert all("resources" not in d.value.columns for d in at.dataframe if "avg" in d.value.columns)
