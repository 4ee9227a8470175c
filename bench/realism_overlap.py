"""Shared material and QA lexical overlap of a generated world, against real XQuAD.

Prints, as one JSON object:
- ``qa``: the share of a question's content words (English stop words out, Porter stems) found
  in its answer's sentence, and within ``--window`` words of the answer, for the world's English
  test and train sets and for XQuAD's English file (``--xquad``), each the mean over questions
  with its 95% paragraph-bootstrap interval (``cluster_bootstrap``: questions of a paragraph
  share their context, so paragraphs are the unit);
- ``subwords``: per L2, the shared subword types and tokens between English and that L2
  (vocabularies learned as a run's world stage learns them: ``--vocab-size``).

    python bench/realism_overlap.py --world '{"loanword_share": 0.3}' --languages tr,step1
    python bench/realism_overlap.py --sweep SWEEP     # the subword shares of every cell of a sweep

With ``--sweep``, one row per cell and L2 (the cell's world and vocabulary settings, read from
its config.json through xlviz.runs; the vocabularies are relearned, the same bytes the cell's
world stage learned), as a markdown table to put beside ``xlviz report SWEEP``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from xlviz.data.real import shared_data_dir
from xlviz.data.overlap import mean_share, qa_lexical_overlap, world_subword_overlap
from xlviz.data.typology import parse_languages
from xlviz.data.world import World, WorldConfig
from xlviz.evaluation.uncertainty import cluster_bootstrap
from xlviz.io import read_json


def interval(rows) -> dict:
    iv = cluster_bootstrap([r.share for r in rows], [r.paragraph for r in rows])
    return {"mean": round(iv.mean, 4), "low": round(iv.low, 4), "high": round(iv.high, 4), "questions": len(rows),
            "paragraphs": iv.n_paragraphs}


def qa_rows(squad: dict, window: int, path: str | None = None) -> dict:
    return {"sentence": interval(qa_lexical_overlap(squad, path=path)),
            f"window_{window}": interval(qa_lexical_overlap(squad, window=window, path=path))}


def sweep_table(folder: str) -> str:
    """Markdown: cell, L2, shared subword types (all / 2+ characters), the L2 corpus's tokens
    whose type English's vocabulary has (all / 2+ characters), and each system's word
    translation at the embedding layer (the cell's ``word-translation`` task, where it ran)."""
    from xlviz.runs import Run, sweep_cells
    from xlviz.transfer.config import TransferConfig

    lines = ["| cell | L2 | shared types | shared types (2+ chars) | L2 tokens shared | L2 tokens shared (2+ chars) "
             "| word translation at the embeddings (%) |", "|---|---|---|---|---|---|---|"]
    for cell in sweep_cells(folder):
        run = Run(cell)
        cfg = TransferConfig.from_dict({k: v for k, v in run.config().items() if k != "versions"}, path=str(cell / "config.json"))
        world = World(cfg.world)
        for l2 in world.l2s:
            o = world_subword_overlap(world, l2, vocab_size=cfg.vocab_size, algorithm=cfg.tokenizer)
            # layer 0 of the word-translation task (the embedding layer), per system, where scored
            wt = ", ".join(f"{r['system']} {r['word_translation_per_layer'][0]}" for r in run.results()
                           if r["language"] == l2 and (r.get("word_translation_per_layer") or [None])[0] is not None) or "—"
            lines.append(f"| {cell.name} | {l2} | {o.type_share:.3f} | {o.type_share_long:.3f} | {o.token_share_b:.3f} | "
                         f"{o.token_share_b_long:.3f} | {wt} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--world", default="{}", help="world settings as JSON (WorldConfig keys)")
    ap.add_argument("--languages", default="tr,step1", help="L2s, --languages syntax")
    ap.add_argument("--vocab-size", type=int, default=400)
    ap.add_argument("--window", type=int, default=5)
    ap.add_argument("--xquad", default=None, help="XQuAD's English file (default: xquad/xquad.en.json of the shared data folder)")
    ap.add_argument("--no-subwords", action="store_true")
    ap.add_argument("--sweep", help="a sweep folder: print the subword shares of its cells instead")
    a = ap.parse_args(argv)
    if a.sweep:
        print(sweep_table(a.sweep))
        return 0
    t0 = time.time()
    cfg = WorldConfig.from_dict({**json.loads(a.world), "languages": parse_languages(a.languages)})
    world = World(cfg)
    out: dict = {"world": cfg.to_dict(), "qa": {}}
    for split in ("test", "train"):
        out["qa"][f"world-{split}-en"] = qa_rows(world.qa(split), a.window)
    shared = shared_data_dir()
    a.xquad = a.xquad or (str(shared / "xquad" / "xquad.en.json") if shared else "xquad.en.json")
    if Path(a.xquad).is_file():
        out["qa"]["xquad-en"] = qa_rows(read_json(a.xquad, what="XQuAD"), a.window, path=a.xquad)
    else:
        print(f"{a.xquad}: not found, XQuAD left out", file=sys.stderr)
    if not a.no_subwords:
        out["subwords"] = {l2: {k: (round(v, 4) if isinstance(v, float) else v) for k, v in
                                world_subword_overlap(world, l2, vocab_size=a.vocab_size).to_dict().items()} for l2 in world.l2s}
    out["seconds"] = round(time.time() - t0, 1)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
