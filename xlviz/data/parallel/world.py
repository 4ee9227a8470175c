"""A run's parallel pairs: the generated world's (words, gold alignment, dictionary) or the
pairs a corpus run saved (its manifest's ``parallel`` file, :func:`xlviz.runs.world_path`).

Read from the run folder alone (its config, manifest and world), so the registry stays in the
data layer; which models of the run read them is the analyses' business
(:func:`xlviz.analysis.reports.run_systems`), asked before the pairs by every caller.
"""

from __future__ import annotations

import os
from pathlib import Path

from xlviz.data.parallel import ParallelData, ParallelSource, Request
from xlviz.errors import XlvizError


def load_run_world(run_dir=None, world_dir=None):
    """The generated world of a run (or of a world folder), rebuilt from its ``world.json``."""
    from xlviz.data.world import load_world
    from xlviz.runs import world_folder

    if world_dir is None:
        if run_dir is None:
            raise XlvizError("the generated world needs --run DIR (or a world folder)", field="run")
        world_dir = world_folder(run_dir)
    if not (Path(world_dir) / "world.json").is_file():
        raise XlvizError("no generated world here (world.json missing)", path=world_dir)
    return load_world(world_dir)


def _scored_dictionary(run_dir, world, l2: str) -> list[tuple[str, str]]:
    """The gold pairs word translation is scored on: in a run, the held-out part of its split
    (:func:`xlviz.data.dictionary.gold_split` with the run's seed and
    ``gold_dictionary_test_fraction``, as its ``word-translation`` task scores, so no page
    scores a system on pairs it was fitted on); a world folder alone: the whole dictionary."""
    from xlviz.data.dictionary import GOLD_TEST_FRACTION, gold_split
    from xlviz.runs import Run

    whole = [(r[world.l1], r[l2]) for r in world.dictionary(l2)]
    if run_dir is None:
        return whole
    run = Run(Path(run_dir))
    cfg = run.config() if run.config_path.is_file() else {}
    seed, fraction = cfg.get("seed", 0), cfg.get("gold_dictionary_test_fraction", GOLD_TEST_FRACTION)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise XlvizError(f"must be an integer, got {seed!r:.40}", path=run.config_path, field="seed")
    if not isinstance(fraction, (int, float)) or isinstance(fraction, bool) or not 0 < fraction < 1:
        raise XlvizError(f"must be a number between 0 and 1, got {fraction!r:.40}", path=run.config_path,
                         field="gold_dictionary_test_fraction")
    return gold_split(world, l2, float(fraction), seed)[1]


def world_data(run_dir=None, l2: str = "", limit: int | None = None, world_dir=None) -> ParallelData:
    """The generated world's parallel pairs L1-``l2`` (first ``limit``), with words, gold
    alignment and the dictionary word translation is scored on (:func:`_scored_dictionary`)."""
    world = load_run_world(run_dir, world_dir)
    if l2 not in world.l2s:
        raise XlvizError(f"the world has no language '{l2}'; it has {', '.join(world.l2s)}", field="l2")
    n = min(limit, world.config.parallel_pairs) if limit else world.config.parallel_pairs
    pairs = world.parallel_pairs(l2, n=n)
    gold = _scored_dictionary(run_dir if world_dir is None else None, world, l2)
    return ParallelData(
        world.l1, l2, [p["src"] for p in pairs], [p["tgt"] for p in pairs], [p["id"] for p in pairs],
        f"generated world ({world.l1}-{l2})", [p["src_words"] for p in pairs], [p["tgt_words"] for p in pairs],
        [[tuple(a) for a in p["alignment"]] for p in pairs], gold,
    )


def run_pairs(run_dir: str | os.PathLike, l2: str, limit: int | None = None) -> ParallelData:
    """A run's parallel pairs L1-``l2``: the generated world's (with words, gold alignment and
    dictionary) or, for a run on real corpora, the pairs it saved (``{"id", "src", "tgt"}``
    per line)."""
    from xlviz import confined, limits
    from xlviz.runs import Run, world_path

    path = Path(run_dir).expanduser()
    run = Run(path)
    if not run.exists():
        raise XlvizError("not a run folder (no config.json)", path=path)
    if world_path(run, "world").is_file():
        return world_data(run_dir, l2, limit)
    cfg = run.config()
    data = cfg.get("data") if isinstance(cfg.get("data"), dict) else {}  # a corpus source's options (l1, l2, files)
    l1 = next((v for v in (cfg.get("l1"), data.get("l1")) if isinstance(v, str)), "en")  # as the analyses' run_info reads it
    f = world_path(run, "parallel", language=l2, pair=l1)
    if not f.is_file():
        raise XlvizError(f"the run has no parallel pairs for {l1}-{l2} (no generated world, no "
                         f"{f.relative_to(run.path).as_posix()})", path=run.path)
    rows = []
    # a run folder's file: regular, inside the run folder, bounded (xlviz.confined)
    for i, r in enumerate(confined.read_jsonl(f, root=run.path, max_bytes=limits.METRICS_MAX_BYTES, what="parallel pairs")):
        if limit and len(rows) >= limit:
            break
        if not isinstance(r, dict) or not isinstance(r.get("src"), str) or not isinstance(r.get("tgt"), str):
            raise XlvizError(f"line {i + 1}: expected {{\"src\": text, \"tgt\": text}}", path=f)
        if r["src"].strip() and r["tgt"].strip():
            rows.append(r)
    if not rows:
        raise XlvizError("no parallel pairs", path=f)
    words = all(isinstance(r.get("src_words"), list) and isinstance(r.get("tgt_words"), list) for r in rows)
    return ParallelData(l1, l2, [r["src"] for r in rows], [r["tgt"] for r in rows],
                        [str(r.get("id", i)) for i, r in enumerate(rows)], f"{run.name} parallel pairs ({l1}-{l2})",
                        [r["src_words"] for r in rows] if words else None, [r["tgt_words"] for r in rows] if words else None,
                        [[tuple(a) for a in r.get("alignment", [])] for r in rows] if words else None)


def read(r: Request) -> ParallelData:
    if r.run_dir is None:
        raise XlvizError("the run's parallel pairs need --run DIR", field="run")
    return run_pairs(r.run_dir, r.lang_b or "", r.limit)


SOURCE = ParallelSource("world", "Run's parallel pairs", "a run's parallel pairs (the generated world's, with gold "
                        "word alignment and dictionary, or those a corpus run saved)", read, takes="run", order=10)
