"""The generated world written out as files, a stand-in for real corpora in tests of the
file-reading paths (``transfer-corpus``, streaming, two-process runs)."""

from __future__ import annotations

import gzip
from pathlib import Path


def write_world_corpora(folder: Path, documents: int = 150) -> dict[str, Path]:
    """The world's two independent corpora as gzipped text (``en``, ``svo``), a parallel en-svo
    text pair to score on (``par_en``, ``par_svo``) and one to train on (``train_en``,
    ``train_svo``), one sentence per line."""
    from xlviz.data.world import LanguageSpec, WorldConfig, generate_world

    world = generate_world(WorldConfig(seed=3, corpus_documents=documents, parallel_pairs=40, languages=[LanguageSpec("svo")]))
    folder.mkdir(parents=True, exist_ok=True)
    files = {}
    for lang in ("en", "svo"):
        files[lang] = folder / f"{lang}.txt.gz"
        with gzip.open(files[lang], "wt", encoding="utf-8") as f:
            f.write("\n".join(world.corpus(lang)) + "\n")
    pairs = world.parallel_pairs("svo")
    (folder / "par.en").write_text("\n".join(p["src"] for p in pairs) + "\n")
    (folder / "par.svo").write_text("\n".join(p["tgt"] for p in pairs) + "\n")
    files["par_en"], files["par_svo"] = folder / "par.en", folder / "par.svo"
    train = world.parallel_train("svo", 60)  # parallel training pairs (held out from the scored ones)
    (folder / "train.en").write_text("\n".join(p["src"] for p in train) + "\n")
    (folder / "train.svo").write_text("\n".join(p["tgt"] for p in train) + "\n")
    files["train_en"], files["train_svo"] = folder / "train.en", folder / "train.svo"
    return files
