"""A fake finished run with the models the Alignment and Probing analyses read.

Builds on ``tests.app_fixtures.make_run`` (records, results, a small generated world) and adds
tiny random BERT masked LMs: ``s1_pretrain`` (English vocabulary) and ``s2_transfer-sov``
(the invented L2's vocabulary), each saved with its tokenizer, and the run's
``world/tokenizers/<lang>`` folders. The vocabularies hold every word of the world's
parallel pairs, dictionary, agreement and sense pairs, so every probe pair is covered.
About a second to build.
"""

from __future__ import annotations

import shutil
from pathlib import Path

L2 = "sov"


def world_words(world, lang: str) -> list[str]:
    words: set[str] = set()
    if lang == world.l1:
        for p in world.parallel_pairs(L2):
            words.update(p["src_words"])
        words.update(r[world.l1] for r in world.dictionary(L2))
    else:
        for p in world.parallel_pairs(lang):
            words.update(p["tgt_words"])
        words.update(r[lang] for r in world.dictionary(lang))
    for p in world.agreement_pairs(lang):
        words.update(p["words"])
        words.update([p["good_word"], p["bad_word"]])
    for p in world.sense_pairs(lang):
        words.update(p["words1"] + p["words2"])
    return sorted(words)


def make_analysis_run(root: str | Path, name: str = "demo-run", *, exports: bool = False) -> Path:
    """``root/name``: a completed en + sov run with s1_pretrain and s2_transfer-sov tiny MLMs."""
    from xlviz.data.world import load_world
    from tests.app_fixtures import make_run
    from tests.tiny_models import make_tiny

    path = make_run(root, name, models=exports)
    world = load_world(path / "world")
    en, sov = world_words(world, "en"), world_words(world, L2)
    if not (path / "s1_pretrain").exists():
        make_tiny("bert", path / "s1_pretrain", task="mlm", words=en, seed=0)
    make_tiny("bert", path / f"s2_transfer-{L2}", task="mlm", words=sov, seed=1)
    for lang, src in (("en", path / "s1_pretrain"), (L2, path / f"s2_transfer-{L2}")):
        dst = path / "world" / "tokenizers" / lang
        dst.mkdir(parents=True, exist_ok=True)
        for f in src.iterdir():
            if f.name.startswith(("tokenizer", "vocab", "special_tokens")):
                shutil.copy(f, dst / f.name)
    return path
