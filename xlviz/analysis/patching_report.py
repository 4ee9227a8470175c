"""Patching across languages for a run: each system's English and L2 QA exports on the run's
generated test questions, the layer × token-group matrix with intervals, stored in the run.

Why apart from :mod:`xlviz.analysis.patching`: this module knows runs (the manifest says where
each system's exports are: ``export`` entries of that system and language; MONOTRANS's L2
export is its English body with the L2's embeddings) and stores the table
(:mod:`xlviz.analysis.stored`: ``analyses/patching-<key>.json`` and ``.csv``).
"""

from __future__ import annotations

import csv
import functools
import io
import os
import time
from pathlib import Path

from xlviz.errors import XlvizError

FORMAT = "xlviz-patching/1"
NAME = "patching"
SMALL_GAP = 0.5  # logits: below it the L2 run scores the answer as the English one and shares mean little
LIMIT = 60  # questions per system by default (each costs layers + 1 forward passes)
COLUMNS = ("system", "language", "layer", "group", "restored", "low", "high", "n_questions", "n_paragraphs", "mean_gap")


def _exports(run, lang: str, systems: list[str] | None) -> dict[str, tuple[Path, Path]]:
    """``{system: (English export, L2 export)}`` for the systems with both."""
    from xlviz.runs import artefacts

    by = {}
    for a in artefacts(run, "export", role="qa"):
        if a.folder.is_dir() and a.system:
            by.setdefault(a.system, {})[a.language] = a.folder
    l1 = "en"
    found = {s: (d[l1], d[lang]) for s, d in sorted(by.items()) if l1 in d and lang in d and s and "@" not in s}
    if systems is None:
        return found
    missing = [s for s in systems if s not in found]
    if missing:
        raise XlvizError(f"no English and {lang} QA exports of {', '.join(missing)} (the run has them for: "
                         f"{', '.join(found) or 'none'})", path=Path(run), field="systems")
    return {s: found[s] for s in systems}


def request(run_dir: str | os.PathLike, lang: str, systems: list[str] | None = None, limit: int = LIMIT,
            n_resamples: int = 1000) -> tuple[dict, dict]:
    """What the table is computed from (digests of every export and the world) and the exports."""
    from xlviz.analysis.stored import file_digest
    from xlviz.io import folder_digest
    from xlviz.runs import world_path

    run = Path(run_dir)
    world = world_path(run, "world")
    if not world.is_file():
        raise XlvizError("patching needs the run's generated world (gold word alignments); this run has none",
                         path=world)
    chosen = _exports(run, lang, systems)
    if not chosen:
        raise XlvizError(f"no system of the run has both an English and a {lang} QA export", path=run, field="language")
    inputs = {"world": file_digest(world, run)}
    for s, (a, b) in chosen.items():
        inputs[f"{s}:en"], inputs[f"{s}:{lang}"] = folder_digest(a), folder_digest(b)
    return ({"format": FORMAT, "language": lang, "systems": list(chosen), "limit": int(limit), "n_resamples": int(n_resamples),
             "inputs": inputs}, chosen)


@functools.lru_cache(maxsize=8)
def _items(world_dir: str, world_digest: str, lang: str, limit: int) -> list[dict]:
    """The world's first ``limit`` test questions as patching reads them, once per world file
    (``world_digest``) and language: a reader computing one system at a time (the XQuAD page)
    regenerates them once, not once per system. Callers do not change the items."""
    from xlviz.analysis.patching import world_items
    from xlviz.data.world import load_world

    world = load_world(world_dir)
    if lang not in world.l2s:
        raise XlvizError(f"the run's world has no L2 {lang!r}; it has {world.l2s}", field="language")
    return world_items(world, lang, limit)


def compute(run_dir: str | os.PathLike, lang: str, systems: list[str] | None = None, limit: int = LIMIT,
            n_resamples: int = 1000, log=None) -> dict:
    """The table (``{"format", "request", "rows", "skipped", "seconds"}``) computed, not stored."""
    from xlviz.analysis.patching import aggregate, patch_items
    from xlviz.models.loading import load_model
    from xlviz.runs import world_folder

    req, chosen = request(run_dir, lang, systems, limit, n_resamples)
    items = _items(str(world_folder(run_dir)), req["inputs"]["world"], lang, int(limit))
    rows, skipped, seconds = [], {}, {}
    for system, (en_dir, l2_dir) in chosen.items():
        t0 = time.perf_counter()
        en_model, en_tok = load_model(en_dir, task="qa")
        l2_model, l2_tok = load_model(l2_dir, task="qa")
        max_len = int(min(getattr(en_model.config, "max_position_embeddings", 512), getattr(l2_model.config, "max_position_embeddings", 512), 512))
        patches, n_skipped = patch_items(en_model.eval(), en_tok, l2_model.eval(), l2_tok, items, max_length=max_len)
        rows += [{"system": system, "language": lang, **r} for r in aggregate(patches, n_resamples=n_resamples)]
        skipped[system] = n_skipped
        seconds[system] = round(time.perf_counter() - t0, 1)
        if log:
            log(f"  {system}: {len(patches)} questions patched ({n_skipped} skipped) in {seconds[system]} s")
    return {"format": FORMAT, "request": req, "rows": rows, "skipped": skipped, "seconds": seconds}


def csv_text(rows: list[dict]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(COLUMNS), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def find(run_dir: str | os.PathLike, req: dict) -> tuple[dict, Path] | None:
    from xlviz.analysis.stored import find as find_stored

    return find_stored(run_dir, NAME, FORMAT, req)


def write(run_dir: str | os.PathLike, table: dict, record) -> Path:
    from xlviz.analysis.stored import write as write_stored

    return write_stored(run_dir, NAME, table, csv_text(table["rows"]), table["request"]["language"], record)


def find_current(run_dir: str | os.PathLike, lang: str, system: str | None = None) -> tuple[dict, Path] | None:
    """A stored table of ``lang`` that is still current (its request is what it would be computed
    from now: same exports, world, settings), holding ``system`` (any when None): the one with
    the most questions, then the most systems. A reader (the XQuAD page) that shows one system
    uses a table stored for others too (``--systems``, ``--limit``), never a stale one."""
    from xlviz import confined
    from xlviz.analysis.stored import MAX_BYTES
    from xlviz.runs import artefacts

    run = Path(run_dir)
    best, best_rank = None, None
    for a in artefacts(run, "analysis", language=lang):
        if not (a.path.startswith(f"analyses/{NAME}-") and a.path.endswith(".json") and a.folder.is_file()):
            continue
        try:
            obj = confined.read_json(a.folder, root=run, max_bytes=MAX_BYTES, what=f"{NAME} table")
            req = obj.get("request") if isinstance(obj, dict) and obj.get("format") == FORMAT else None
            if not isinstance(req, dict) or req.get("language") != lang or not isinstance(req.get("systems"), list):
                continue
            if system is not None and system not in req["systems"]:
                continue
            if request(run, lang, req["systems"], req["limit"], req["n_resamples"])[0] != req:
                continue
        except (XlvizError, KeyError, TypeError, ValueError):  # a table of systems since removed, a hand-edited file
            continue
        rank = (int(req["limit"]), len(req["systems"]))
        if best_rank is None or rank > best_rank:
            best, best_rank = (obj, a.folder), rank
    return best


def run_patching(run_dir: str | os.PathLike, lang: str, systems: list[str] | None = None, limit: int = LIMIT,
                 n_resamples: int = 1000) -> dict:
    """The stored table when it matches, computed (not stored) otherwise."""
    req, _ = request(run_dir, lang, systems, limit, n_resamples)
    got = find(run_dir, req)
    return got[0] if got else compute(run_dir, lang, systems, limit, n_resamples)


def format_table(rows: list[dict]) -> str:
    """One block per system: layers down, groups across, "restored [low, high]" in %."""
    from xlviz.analysis.patching import GROUPS

    out = []
    for system in dict.fromkeys(r["system"] for r in rows):
        mine = {(r["layer"], r["group"]): r for r in rows if r["system"] == system}
        first = next(iter(mine.values()))
        n, gap = first["n_questions"], first["mean_gap"]
        out.append(f"{system} ({n} questions; English − L2 answer score {gap:+.2f} logits on average): % of it restored by "
                   "patching a layer's states [95% paragraph bootstrap]")
        if abs(gap) < SMALL_GAP:
            out.append(f"  (the L2 run already scores the answer as the English run does: the shares below divide by "
                       f"almost nothing and mean little)")
        out.append(f"{'layer':>5}" + "".join(f"{g:>22}" for g in GROUPS))
        for layer in sorted({l for l, _ in mine}):
            cells = []
            for g in GROUPS:
                r = mine.get((layer, g))
                cells.append(f"{100 * r['restored']:6.1f} [{100 * r['low']:5.0f},{100 * r['high']:5.0f}]" if r else f"{'-':>21}")
            out.append(f"{layer:>5}" + "".join(f"{c:>22}" for c in cells))
        out.append("")
    return "\n".join(out)


__all__ = ["request", "compute", "find", "find_current", "write", "run_patching", "format_table", "csv_text", "COLUMNS", "FORMAT", "LIMIT"]
