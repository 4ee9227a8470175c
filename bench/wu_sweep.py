"""Wu et al. (2020)'s sweep on the generated world: zero-shot F1 and per-layer sentence
retrieval against K, the number of shared top layers (K = all ... 0).

    xlviz demo --methods wu-sweep,floor              # trains wu-shared-top-4 ... -0 (small model)
    python bench/wu_sweep.py checkpoints/<that run> [--out wu_sweep.html]

Reads the run's results.json (F1 per system and language) and, for each wu-shared-top-K
system, encodes the world's held-out parallel pairs with its exported encoders
(``encoders/<system>-<lang>``) to measure retrieval per layer (mean of both directions,
centred cosine). Prints a table and writes an interactive HTML figure (plotly, inlined) and,
when kaleido can run, a PNG beside it.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", help="a run folder trained with --methods wu-sweep")
    p.add_argument("--out", default=None, help="HTML figure (default: <run>/wu_sweep.html)")
    p.add_argument("--pairs", type=int, default=300, help="parallel pairs per language for retrieval")
    args = p.parse_args()

    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    from xlviz.analysis.alignment import layerwise_alignment
    from xlviz.analysis.reports import parallel_data, run_info, run_systems
    from xlviz.models.reference import load_spec
    from xlviz.analysis.representations import sentence_embeddings
    from xlviz.runs import Run

    run = Run(Path(args.run))
    info = run_info(run.path)
    rows = run.results()
    pattern = re.compile(r"wu-shared-top-(\d+)")
    f1 = {(int(pattern.fullmatch(r["system"]).group(1)), r["language"]): r["f1"] for r in rows if pattern.fullmatch(r["system"])}
    if not f1:
        raise SystemExit(f"{run.path}: no wu-shared-top-K results (train with --methods wu-sweep)")
    ks = sorted({k for k, _ in f1}, reverse=True)
    retrieval: dict[tuple[int, str], list[float]] = {}
    for l2 in info.l2s:
        data = parallel_data("world", run_dir=run.path, l2=l2, limit=args.pairs)
        for system in run_systems(run.path, l2, floor=False):
            m = pattern.search(system.name)
            if not m:
                continue
            (ma, ta), (mb, tb) = load_spec(system.a), load_spec(system.b)
            ea = sentence_embeddings(ma, ta, data.src, pooling="mean_no_special", max_length=64)
            eb = sentence_embeddings(mb, tb, data.tgt, pooling="mean_no_special", max_length=64)
            retrieval[(int(m.group(1)), l2)] = [100 * (r["retrieval_a_to_b"] + r["retrieval_b_to_a"]) / 2
                                                 for r in layerwise_alignment(ea, eb, center=True)]

    print(f"{'K':>3} " + " ".join(f"{'F1 ' + lang:>9}" for lang in info.l2s) + "  retrieval per layer (" + ", ".join(info.l2s) + ")")
    for k in ks:
        cells = " ".join(f"{f1.get((k, lang), float('nan')):>9.1f}" for lang in info.l2s)
        ret = " | ".join(" ".join(f"{v:.0f}" for v in retrieval.get((k, lang), [])) for lang in info.l2s)
        print(f"{k:>3} {cells}  {ret}")

    fig = make_subplots(rows=1, cols=1 + len(info.l2s), subplot_titles=["zero-shot F1 vs shared top layers K"]
                        + [f"retrieval per layer, en-{lang}" for lang in info.l2s])
    for lang in [info.l1] + info.l2s:
        fig.add_trace(go.Scatter(x=ks, y=[f1.get((k, lang)) for k in ks], mode="lines+markers", name=f"F1 {lang}"), row=1, col=1)
    for j, lang in enumerate(info.l2s, start=2):
        for k in ks:
            if (k, lang) in retrieval:
                fig.add_trace(go.Scatter(y=retrieval[(k, lang)], mode="lines+markers", name=f"K={k} {lang}"), row=1, col=j)
    fig.update_xaxes(title_text="K (shared top layers)", row=1, col=1)
    for j in range(2, 2 + len(info.l2s)):
        fig.update_xaxes(title_text="layer", row=1, col=j)
    fig.update_yaxes(title_text="%")
    out = Path(args.out or run.path / "wu_sweep.html")
    fig.write_html(out, include_plotlyjs=True)
    try:
        fig.write_image(out.with_suffix(".png"), width=1400, height=450)
        print(f"figure: {out} and {out.with_suffix('.png')}")
    except Exception as e:  # noqa: BLE001 - kaleido missing or no browser: the HTML is enough
        print(f"figure: {out} (no PNG: {str(e).splitlines()[0] if str(e) else type(e).__name__})")


if __name__ == "__main__":
    main()
