"""The Probing page's role of each row comes from the method registry (mono-l2 is the
untransferred reference, not "transferred"), and every row says which model reads which data."""

from __future__ import annotations

import json

from xlviz.analysis.reports import L1_ON_L1, L2_ON_L2, probe_role, run_probe_models


def _folder(path, tokenizer: bool = True) -> None:
    path.mkdir(parents=True)
    (path / "config.json").write_text("{}")
    if tokenizer:
        (path / "tokenizer.json").write_text("{}")


def test_roles_come_from_the_methods(tmp_path):
    assert probe_role("mono-l2") == "reference"
    assert probe_role("floor") == "floor"
    assert probe_role("monotrans") == probe_role("jointpair-disjoint") == "transferred"
    assert probe_role("not-a-system") == "model"

    run = tmp_path / "run"
    _folder(run / "s1_pretrain")
    (run / "config.json").write_text(json.dumps({"seed": 0, "methods": ["monotrans", "floor", "mono-l2"]}))
    for system in ("monotrans", "floor", "mono-l2"):
        for lang in ("en", "sov"):
            _folder(run / "encoders" / f"{system}-{lang}")
    _folder(run / "world" / "tokenizers" / "sov")
    models = {(m.name.split(" · ")[1], m.language): m for m in run_probe_models(run, ["sov"])}
    assert models[("mono-l2", "sov")].role == "reference"  # was "transferred"
    assert models[("monotrans", "sov")].role == "transferred" and models[("floor", "sov")].role == "floor"
    assert models[("L1 model", "en")].role == "reference" and models[("L1 model", "en")].direction == L1_ON_L1
    assert all(m.direction == L2_ON_L2 for (name, lang), m in models.items() if lang == "sov")


def test_models_transferred_into_l1_are_probed_on_l1_data(tmp_path):
    """Artetxe et al.'s App. D design: ``monotrans-into-l1`` (an L2's body with learned L1
    embeddings) is probed on L1 data, one row per L2 body, beside the L1 model; its L2 side (the
    untransferred L2 model) is not probed as if it were transferred."""
    from xlviz.analysis.reports import INTO_L1, probe_side

    assert probe_side("monotrans-into-l1") == "l1" and probe_side("monotrans") == probe_side("mono-l2") == "l2"
    run = tmp_path / "run"
    _folder(run / "s1_pretrain")
    (run / "config.json").write_text(json.dumps({"seed": 0, "methods": ["monotrans", "monotrans-into-l1"]}))
    for system in ("monotrans", "monotrans-into-l1"):
        for lang in ("en", "svo", "sov"):
            _folder(run / "encoders" / f"{system}-{lang}")
    _folder(run / "encoders" / "monotrans-into-l1@sov-en")  # the L1 encoder of the sov body
    for lang in ("svo", "sov"):
        _folder(run / "world" / "tokenizers" / lang)
    rows = run_probe_models(run, ["svo", "sov"])
    into = [m for m in rows if "monotrans-into-l1" in m.name]
    assert [(m.language, m.direction) for m in into] == [("en", INTO_L1.format(l2="svo")), ("en", INTO_L1.format(l2="sov"))]
    assert all(m.role == "transferred" for m in into)
    assert into[0].spec.path.endswith("encoders/monotrans-into-l1-en")  # the first L2's pair is the system's L1 encoder
    assert into[1].spec.path.endswith("encoders/monotrans-into-l1@sov-en")
    assert {m.language for m in rows if "· monotrans" in m.name and "into" not in m.name} == {"svo", "sov"}


def test_word_in_context_is_run_only_where_it_tests_the_context():
    """In English a homonym's two senses share a word form, so only context separates them; in
    the generated L2s the senses are different words (same sense = same word in every pair)."""
    from xlviz.analysis.probing import sense_pairs_test_context
    from xlviz.data.world import World, WorldConfig

    world = World(WorldConfig(corpus_documents=20, sense_pairs=60))
    assert sense_pairs_test_context(world.sense_pairs("en"))
    for l2 in world.l2s:
        pairs = world.sense_pairs(l2)
        assert all((p["words1"][p["index1"]] == p["words2"][p["index2"]]) == p["same_sense"] for p in pairs)
        assert not sense_pairs_test_context(pairs)


def test_an_into_l1_run_trains_l1_embeddings_under_the_frozen_l2_body(tmp_path):
    """A tiny ``monotrans-into-l1`` run end to end: the body is the L2 model's byte for byte, the
    L1 embeddings trained, and its rows are probed on English sense pairs."""
    import torch
    from safetensors.torch import load_file

    from xlviz.analysis.probing import word_in_context
    from xlviz.cli import main as cli
    from xlviz.data.world import World, WorldConfig
    from xlviz.models.loading import load_model
    from tests.test_methods import TINY

    config = tmp_path / "tiny.json"
    # 4 pre-training steps end on the plateau: judged at a margin they pass, so the probes take their
    # rows (a degenerate body's rows are refused: tests/test_verdicts.py)
    config.write_text(json.dumps({**TINY, "methods": ["monotrans-into-l1"], "verdict_mlm_margin": -100.0,
                                  "world": {**TINY["world"], "languages": ["sov"]}}))
    assert cli(["transfer", "--config", str(config), "--run-dir", str(tmp_path / "run")]) == 0
    run = tmp_path / "run"
    body = load_file(run / "s1_pretrain-sov" / "model.safetensors")
    into = load_file(run / "s2_into_l1-sov" / "model.safetensors")
    l1 = load_file(run / "s1_pretrain" / "model.safetensors")
    emb = "bert.embeddings.word_embeddings.weight"
    frozen = [k for k in body if k != emb and not k.startswith("cls.predictions.bias") and "decoder" not in k]
    assert frozen and all(torch.equal(body[k], into[k]) for k in frozen)  # the L2 body, untouched
    assert into[emb].shape == l1[emb].shape  # an L1 vocabulary
    assert torch.equal(into[emb][:5], body[emb][:5])  # special rows stay the L2 model's
    rows = [m for m in run_probe_models(run, ["sov"]) if "into" in m.name]
    assert len(rows) == 1 and rows[0].language == "en" and "sov body" in rows[0].name
    model, tok = load_model(rows[0].spec.path, task="mlm")
    pairs = World(WorldConfig(**TINY["world"])).sense_pairs("en", 12)
    res = word_in_context(model, tok, pairs, folds=2)
    assert len(res["layers"]) == model.config.num_hidden_layers + 1

    # the CLI's probing (xlviz analyse probing): WiC on English only, the sov encoders named as skipped
    from xlviz.analysis.reports import run_probing

    out = run_probing(run, ["sov"], tasks=("wic",), n_senses=12, folds=2)
    assert {r["language"] for r in out["wic"]} == {"en"}
    assert any("into" in r["model"] and "sov body" in r["model"] for r in out["wic"])
    assert not out.get("wic_skipped")  # this run's only sov-side model is not probed on sov (its direction is xx→en)
