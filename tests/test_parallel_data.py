"""The world's data for the parallel-data methods (issue 15): a parallel training corpus per L2
held out from every evaluation, translate-train QA with the L1 set's ids and correct offsets,
and the run's guard that keeps both away from the systems that do not declare them."""

from __future__ import annotations

import pytest

from xlviz.data.world import World, WorldConfig, clause_of
from xlviz.errors import XlvizError
from xlviz.methods import method_of

SMALL = WorldConfig(corpus_documents=50, qa_train_paragraphs=40, qa_dev_paragraphs=10, qa_test_paragraphs=30,
                    parallel_pairs=300, parallel_train_pairs=600)


@pytest.fixture(scope="module")
def world() -> World:
    return World(SMALL)


def test_parallel_train_is_disjoint_from_evaluation_pairs_and_qa_test(world):
    train = world.parallel_train("sov")
    assert len(train) == 600 and len({p["id"] for p in train}) == 600
    held_src = {p["src"] for p in world.parallel_pairs("sov")}
    test_contexts = [p["context"] for a in world.qa("test")["data"] for p in a["paragraphs"]]
    assert held_src, "evaluation pairs exist"
    for pair in train:
        assert pair["src"] not in held_src
        statement = pair["src"].rstrip(".?")
        assert not any(statement + "." in ctx for ctx in test_contexts if not pair["src"].endswith("?"))
    # by clause, the ground truth: none of the training pairs' clauses is held out
    items = world._parallel_items("parallel-train", 600, world.held_out_clauses)
    assert not {clause_of(i) for i in items} & world.held_out_clauses
    # the held-out set really contains QA test facts and evaluation pairs (so the check above can fail)
    unfiltered = {clause_of(i) for i in world._parallel_items("parallel-train", 3000)}
    assert unfiltered & world.held_out_clauses


def test_parallel_train_is_the_same_facts_in_both_languages(world):
    pair = world.parallel_train("svo", 5)[0]
    assert pair["src"] != pair["tgt"] and pair["alignment"]
    # the same draw for every L2: the English sides agree
    assert [p["src"] for p in world.parallel_train("svo", 20)] == [p["src"] for p in world.parallel_train("sov", 20)]


def test_evaluation_pairs_unchanged_by_the_refactor(world):
    # ids and count as before; the first pair is deterministic for the seed
    pairs = world.parallel_pairs("sov", 3)
    assert [p["id"] for p in pairs] == ["pair-00000", "pair-00001", "pair-00002"]
    assert pairs == World(SMALL).parallel_pairs("sov", 3)


def test_translate_train_keeps_ids_and_offsets(world):
    en, sov = world.qa("train"), world.translate_train("sov")
    ids = lambda d: [q["id"] for a in d["data"] for p in a["paragraphs"] for q in p["qas"]]
    assert ids(en) == ids(sov) and len(ids(sov)) > 40
    n = 0
    for a in sov["data"]:
        for p in a["paragraphs"]:
            for q in p["qas"]:
                ans = q["answers"][0]
                assert p["context"][ans["answer_start"]: ans["answer_start"] + len(ans["text"])] == ans["text"]
                n += 1
    assert n == len(ids(sov))
    assert en["data"][0]["paragraphs"][0]["context"] != sov["data"][0]["paragraphs"][0]["context"]
    with pytest.raises(XlvizError):
        world.translate_train("en")
    with pytest.raises(XlvizError):
        world.qa("train", "sov")  # the zero-shot API still refuses


def test_world_saves_training_material_apart(world, tmp_path):
    d = world.save(tmp_path / "w")
    assert (d / "parallel-train" / "en-sov.jsonl").is_file()
    assert (d / "translate-train" / "train.sov.json").is_file()
    assert not list((d / "qa").glob("*sov*train*")) and not (d / "qa" / "train.sov.json").exists()


@pytest.mark.parametrize("bad", [0, -3, "many"])
def test_parallel_train_pairs_is_validated(bad):
    with pytest.raises(XlvizError, match="parallel_train_pairs"):
        WorldConfig.from_dict({"parallel_train_pairs": bad})


class _Run:
    """The run's guard, without training anything."""

    def __init__(self, world):
        from xlviz.transfer.config import TransferConfig
        from xlviz.transfer.pipeline import Pipeline
        from xlviz.data.sources.world import WorldData

        self.cfg = TransferConfig()
        self.world, self.data = world, WorldData(world)
        self.parallel_train = Pipeline.parallel_train.__get__(self)
        self.translate_train = Pipeline.translate_train.__get__(self)


def test_only_declaring_systems_read_l2_labels_or_parallel_data(world):
    run = _Run(world)
    for system in ("monotrans", "floor", "jointpair-disjoint", "clwe", "mono-l2"):
        assert method_of(system).uses(system, run.cfg) == {"parallel_pairs": 0, "l2_labels": False}
        with pytest.raises(XlvizError, match="zero-shot"):
            run.translate_train(system, "sov")
        with pytest.raises(XlvizError, match="no parallel data"):
            run.parallel_train(system, "sov")
    assert method_of("mono-l2-supervised").uses("mono-l2-supervised")["l2_labels"] is True
    assert run.translate_train("mono-l2-supervised", "sov")["version"].endswith("sov")


@pytest.mark.slow
def test_zero_shot_run_never_reads_translate_train(tmp_path, monkeypatch):
    """A whole tiny run of the zero-shot systems with the world's translate-train data booby-trapped."""
    import json

    from tests.test_methods import TINY
    from xlviz.cli import main as cli

    def trap(self, lang):
        raise AssertionError("a zero-shot system read translate-train data")

    monkeypatch.setattr(World, "translate_train", trap)
    monkeypatch.setattr(World, "save", _save_without_training_material(World.save))
    config = tmp_path / "tiny.json"
    config.write_text(json.dumps({**TINY, "methods": ["monotrans", "floor", "jointpair-disjoint", "mono-l2"]}))
    assert cli(["transfer", "--config", str(config), "--run-dir", str(tmp_path / "run")]) == 0
    rows = json.loads((tmp_path / "run" / "results.json").read_text())
    rows = rows["results"] if isinstance(rows, dict) else rows
    assert rows and all(r["l2_labels"] is False and r["parallel_pairs"] == 0 for r in rows)


def _save_without_training_material(save):
    def wrapped(self, directory):
        # the world's files are written once for every run; only stage code is trapped
        original = World.translate_train
        try:
            World.translate_train = lambda self, lang: {"version": "not-read", "data": []}
            return save(self, directory)
        finally:
            World.translate_train = original
    return wrapped
