"""How well does the CLWE baseline's word mapping work on the generated world?

For each L2: the world's tokenizers (WordPiece, 400), skip-gram per language on its own
corpus (xlviz.models.clwe.train_skipgram), then L2 mapped into en's space with each
initialisation, scored as precision@1 of nearest-neighbour translation on held-out gold
dictionary pairs (World.dictionary, words that are one token in both tokenizers; half the
pairs seed the 'gold-half' rows, the other half are the test set for every row).

    .venv/bin/python bench/bench_clwe_world.py [--dim 64] [--epochs 5 20] [--seed 0]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from xlviz.data.tokenization import train_tokenizer
from xlviz.data.world import WorldConfig, generate_world
from xlviz.models.clwe import keyed_matrix, map_embeddings, tokenized_corpus, train_skipgram


def gold_rows(world, toks, l2, words1, words2) -> list[tuple[int, int]]:
    """(L2 row, en row) of dictionary pairs that are one token on both sides and have vectors."""
    row1 = {t: i for i, t in enumerate(words1)}
    row2 = {t: i for i, t in enumerate(words2)}
    rows = []
    for d in world.dictionary(l2):
        a, b = toks["en"].tokenize(d["en"]), toks[l2].tokenize(d[l2])
        if len(a) == 1 and len(b) == 1 and a[0] in row1 and b[0] in row2:
            rows.append((row2[b[0]], row1[a[0]]))
    return sorted(set(rows))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--epochs", type=int, nargs="+", default=[5, 20])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    world = generate_world(WorldConfig(seed=args.seed))
    corpora = {lang: world.corpus(lang) for lang in world.languages}
    toks = {lang: train_tokenizer(corpora[lang], 400) for lang in world.languages}
    print(f"world seed {args.seed}, dim {args.dim}; P@1 on held-out gold pairs (chance = 1 / en vocabulary)")
    print(f"{'L2':5} {'epochs':>6} {'init':28} {'P@1':>6} {'test':>5} {'s':>6}")
    for l2 in [lang for lang in world.languages if lang != "en"]:
        for epochs in args.epochs:
            mats = {}
            for k, lang in enumerate(("en", l2)):
                wv = train_skipgram(tokenized_corpus(toks[lang], corpora[lang]), args.dim, epochs=epochs, seed=args.seed + k)
                mats[lang] = keyed_matrix(wv)
            (words1, z), (words2, x) = mats["en"], mats[l2]
            rows = gold_rows(world, toks, l2, words1, words2)
            np.random.default_rng(args.seed).shuffle(rows)
            train, test = rows[: len(rows) // 2], rows[len(rows) // 2:]
            inits = {
                "gold-half, one Procrustes": dict(init="dictionary", seed_pairs=train, self_learn=False),
                "gold-half + self-learning": dict(init="dictionary", seed_pairs=train),
                "unsupervised": dict(init="unsupervised"),
                "unsupervised, stochastic": dict(init="unsupervised", stochastic_initial=0.1, stochastic_interval=10),
                "identical strings": dict(init="identical", src_words=words2, trg_words=words1),
            }
            for name, kwargs in inits.items():
                t0 = time.time()
                res = map_embeddings(x, z, **kwargs)
                sims = res.x_mapped @ res.z.T
                p1 = float(np.mean([sims[i].argmax() == j for i, j in test]))
                print(f"{l2:5} {epochs:6d} {name:28} {p1:6.3f} {len(test):5d} {time.time() - t0:6.1f}", flush=True)


if __name__ == "__main__":
    main()
