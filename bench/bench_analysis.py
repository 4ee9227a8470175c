"""Benchmark of the Alignment page's computations on this machine (targets: <= 10 s each).

    python bench/bench_analysis.py [--pairs 1000] [--points 2000] [--json OUT.json]

Model: a randomly initialised BERT of the default run size (``bert_config(400, "small")``: 4 layers,
hidden 128, 4 heads) reading English, and the same body with fresh L2 embeddings
(``make_l2_mlm``, i.e. the floor system) reading the invented L2 "sov"; WordPiece vocabularies of
400 learned on the generated world's parallel sentences. Random weights time the same as trained
ones. Data: the generated world's first N parallel pairs (en-sov).

Rows (wall-clock seconds, best of ``--repeat`` where the step is repeatable):
- encode: sentence vectors of all layers for both languages (mean pooling);
- retrieval + CKA: ``layerwise_alignment`` over all layers; baseline: the same numbers computed
  naively (full n x n cosine matrix with scikit-learn, CKA from n x n Gram matrices, HSIC form);
- post-hoc Procrustes: ``layerwise_alignment(train_fraction=0.5)``;
- word translation: contextual word vectors + ``word_translation_accuracy`` per layer, both ways;
- UMAP of ``--points`` points (cold: import + numba compilation + fit; warm: a second fit);
  baseline: PCA of the same points.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

# OpenMP threads that spin while waiting are 10-30x slower on a shared, busy CPU (measured here: encoding
# 2 x 1000 sentences takes 28 s with torch's 2 threads spinning, 1 s with 1 thread or with passive waiting).
# Must be set before torch loads its OpenMP runtime; --spin keeps the environment as it is.
if "--spin" not in sys.argv:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
TARGET_S = 10.0


def _time(fn, repeat: int = 1):
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def naive_alignment(A: np.ndarray, B: np.ndarray) -> list[tuple[float, float, float]]:
    """The baseline: per layer, full cosine matrix (scikit-learn) and Gram-matrix HSIC CKA."""
    from sklearn.metrics.pairwise import cosine_similarity

    out = []
    n = A.shape[1]
    H = np.eye(n) - 1.0 / n
    for X, Y in zip(A.astype(np.float64), B.astype(np.float64)):
        S = cosine_similarity(X, Y)
        ab = float(np.mean(S.argmax(axis=1) == np.arange(n)))
        ba = float(np.mean(S.argmax(axis=0) == np.arange(n)))
        K, L = H @ (X @ X.T) @ H, H @ (Y @ Y.T) @ H
        cka = float(np.sum(K * L) / (np.linalg.norm(K) * np.linalg.norm(L)))
        out.append((ab, ba, cka))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=1000)
    ap.add_argument("--points", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1,
                    help="torch, BLAS and numba threads (default 1: on a shared, oversubscribed CPU more threads spin and "
                    "are several times slower for a model this small; 0 = torch's default)")
    ap.add_argument("--spin", action="store_true", help="do not set OMP_WAIT_POLICY=PASSIVE (show the spinning cost)")
    ap.add_argument("--json", help="also write the rows here")
    args = ap.parse_args(argv)

    import torch
    from transformers import BertForMaskedLM

    from xlviz.analysis.alignment import layerwise_alignment
    from xlviz.analysis.projection import project
    from xlviz.analysis.reports import word_translation_rows, word_vectors
    from xlviz.analysis.representations import sentence_embeddings
    from xlviz.data.tokenization import train_tokenizer
    from xlviz.data.world import World, WorldConfig
    from xlviz.models.floor import make_l2_mlm
    from xlviz.models.monotrans import bert_config

    default_threads = torch.get_num_threads()
    if args.threads:
        from threadpoolctl import threadpool_limits

        torch.set_num_threads(args.threads)
        threadpool_limits(args.threads)  # numpy/scipy BLAS (PCA, Procrustes) contend the same way
        os.environ.setdefault("NUMBA_NUM_THREADS", str(args.threads))  # before umap imports numba
    torch.manual_seed(0)
    world = World(WorldConfig(parallel_pairs=args.pairs))
    pairs = world.parallel_pairs("sov")
    src, tgt = [p["src"] for p in pairs], [p["tgt"] for p in pairs]
    tok_en, tok_l2 = train_tokenizer(src, 400), train_tokenizer(tgt, 400)
    en = BertForMaskedLM(bert_config(len(tok_en), "small")).eval()
    l2 = make_l2_mlm(en, len(tok_l2), seed=1).eval()
    cfg = en.config
    print(f"model: random-init BERT small ({cfg.num_hidden_layers} layers, hidden {cfg.hidden_size}), vocab "
          f"{len(tok_en)} en / {len(tok_l2)} sov; {len(pairs)} pairs; torch threads {torch.get_num_threads()}, "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'unset')}; "
          f"{platform.processor() or platform.machine()}")

    rows = []

    def add(name, seconds, baseline=None, note="", ok_target=True):
        """ok_target=False: an informative row without the 10 s target."""
        rows.append({"step": name, "seconds": round(seconds, 3), "target_s": TARGET_S if ok_target else None,
                     "ok": seconds <= TARGET_S or not ok_target,
                     "baseline_s": None if baseline is None else round(baseline, 3),
                     "speedup_vs_baseline": None if baseline is None else round(baseline / max(seconds, 1e-9), 2),
                     "note": note})

    t_enc, (A, B) = _time(lambda: (sentence_embeddings(en, tok_en, src), sentence_embeddings(l2, tok_l2, tgt)))
    add(f"encode {len(pairs)}+{len(pairs)} sentences, all layers", t_enc,
        note=f"mean pooling, batch 32, {torch.get_num_threads()} torch thread(s)")
    if args.threads and default_threads != args.threads:
        used = torch.get_num_threads()
        torch.set_num_threads(default_threads)
        t_def, _ = _time(lambda: (sentence_embeddings(en, tok_en, src), sentence_embeddings(l2, tok_l2, tgt)))
        torch.set_num_threads(used)
        add(f"encode, same, torch's default {default_threads} threads", t_def, t_enc,
            f"baseline: {used} thread(s); OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'unset')}",
            ok_target=False)

    t_al, al = _time(lambda: layerwise_alignment(A, B), args.repeat)
    t_naive, naive = _time(lambda: naive_alignment(A, B), args.repeat)
    for r, (ab, ba, cka) in zip(al, naive):  # same numbers
        assert abs(r["retrieval_a_to_b"] - ab) < 1e-9 and abs(r["retrieval_b_to_a"] - ba) < 1e-9
        assert abs(r["cka"] - cka) < 1e-6, (r["cka"], cka)
    add(f"retrieval (both ways) + CKA, {A.shape[0]} layers", t_al, t_naive,
        "baseline: sklearn cosine matrix + Gram-form CKA")
    add(f"encode + retrieval + CKA (page, cold)", t_enc + t_al)

    t_pro, _ = _time(lambda: layerwise_alignment(A, B, train_fraction=0.5), args.repeat)
    add("post-hoc Procrustes (fit on 50%), all layers", t_pro)

    def words():
        wa, _ = word_vectors(en, tok_en, [p["src_words"] for p in pairs])
        wb, _ = word_vectors(l2, tok_l2, [p["tgt_words"] for p in pairs])
        gold = [(r["en"], r["sov"]) for r in world.dictionary("sov")]
        return word_translation_rows(wa, wb, [w for p in pairs for w in p["src_words"]],
                                     [w for p in pairs for w in p["tgt_words"]], gold)

    t_w, wrows = _time(words)
    add("word translation (vectors + BLI both ways), all layers", t_w, note=f"{wrows[0]['n_words']} word types")

    pts = np.concatenate([A[-1], B[-1]])[: args.points]
    if len(pts) < args.points:  # fewer pairs than points asked: add the middle layer too
        pts = np.concatenate([pts, A[len(A) // 2], B[len(B) // 2]])[: args.points]
    t_pca, _ = _time(lambda: project(pts, "pca"), args.repeat)
    t_cold, _ = _time(lambda: project(pts, "umap"))
    t_warm, _ = _time(lambda: project(pts, "umap"))
    add(f"UMAP {len(pts)} points (cold: import + JIT)", t_cold, t_pca, "baseline: PCA")
    add(f"UMAP {len(pts)} points (warm)", t_warm, t_pca, "baseline: PCA")
    add(f"PCA {len(pts)} points", t_pca)

    w = max(len(r["step"]) for r in rows)
    print(f"\n{'step':<{w}}  {'seconds':>8}  {'<=10s':>5}  {'baseline':>8}  {'ratio':>6}  note")
    for r in rows:
        base = "-" if r["baseline_s"] is None else f"{r['baseline_s']:.3f}"
        ratio = "-" if r["speedup_vs_baseline"] is None else f"{r['speedup_vs_baseline']:.2f}x"
        print(f"{r['step']:<{w}}  {r['seconds']:>8.3f}  {('yes' if r['ok'] else 'NO') if r['target_s'] else '-':>5}  {base:>8}  {ratio:>6}  {r['note']}")
    print("ratio = baseline seconds / our seconds (for UMAP: how many PCAs one UMAP costs, inverted)")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
