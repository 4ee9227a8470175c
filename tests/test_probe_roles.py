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
