"""How much of a VECO model's cross-attention goes to the gold-aligned word, per layer and head.

For the world's held-out evaluation pairs (``world/parallel/en-<l2>.jsonl``, gold word
alignment), each English token with an aligned word queries the L2 sentence through the
cross-attention module (keys: the L2 sentence's last layer); the share of its attention over
the L2 content tokens that lands on the aligned word's tokens, averaged over tokens, is
printed per layer × head beside chance (one over the number of L2 content tokens).

    python bench/veco_cross_alignment.py RUN_DIR [--l2 sov] [--pairs 100] [--stage s1_veco-sov]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from transformers import AutoTokenizer

from xlviz.analysis.attention import cross_attention_maps
from xlviz.models.veco import VecoForMaskedLM
from xlviz.runs import world_path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run")
    p.add_argument("--l2", default="sov")
    p.add_argument("--pairs", type=int, default=100)
    p.add_argument("--stage", default=None, help="folder with <lang>/ VECO slices (default s1_veco-<l2>)")
    args = p.parse_args()
    stage = Path(args.run) / (args.stage or f"s1_veco-{args.l2}")
    load = lambda lang: (VecoForMaskedLM.from_pretrained(stage / lang, attn_implementation="eager"), AutoTokenizer.from_pretrained(stage / lang))
    (a, ta), (b, tb) = load("en"), load(args.l2)
    lines = world_path(args.run, "parallel", language=args.l2, pair="en").read_text(encoding="utf-8").splitlines()
    shares, chance = [], []
    for line in lines[: args.pairs]:
        pair = json.loads(line)
        res = cross_attention_maps(a, ta, b, tb, pair["src_words"], pair["tgt_words"], 128)
        wa = ta(pair["src_words"], is_split_into_words=True).word_ids()
        wb = tb(pair["tgt_words"], is_split_into_words=True).word_ids()
        aligned: dict[int, set[int]] = {}
        for i, j in pair["alignment"]:
            aligned.setdefault(i, set()).add(j)
        content = [k for k, w in enumerate(wb) if w is not None]
        for q, w in enumerate(wa):
            if w is None or w not in aligned:
                continue
            keys = [k for k, v in enumerate(wb) if v in aligned[w]]
            att = res.attentions[:, :, q, :]
            shares.append(att[..., keys].sum(-1) / att[..., content].sum(-1))
            chance.append(len(keys) / len(content))
    s = np.array(shares)
    print(f"{stage}: {min(args.pairs, len(lines))} pairs, {len(s)} aligned English tokens; chance {np.mean(chance):.3f}")
    print("layer  " + "  ".join(f"head {h}" for h in range(s.shape[2])) + "   mean")
    for layer in range(s.shape[1]):
        print(f"{layer:>5}  " + "  ".join(f"{v:6.3f}" for v in s[:, layer].mean(0)) + f"  {s[:, layer].mean():6.3f}")


if __name__ == "__main__":
    main()
