"""Plasticity, active forgetting's own measure: step-2 MLM loss against updates, per system.

Chen et al. (2023) show a body pre-trained with active forgetting adapts faster: the loss of
the embedding-only adaptation (MONOTRANS's step 2) falls sooner. This reads the step-2 curves
the runs logged (``metrics.jsonl``, one row every ``log_every`` updates, the mean loss of
those updates) for each system's step 2 on each L2, and prints, per seed and L2:

- the final step-2 loss of every system;
- the updates each system needs to reach the reference's (``monotrans``) final step-2 loss
  (the first logged step at or below it; ``-`` when it never does).

It also prints word translation per layer after step 2 (the run's ``word-translation`` task:
nearest L1 word type of each L2 dictionary word, in percent), mean over the seeds and the
range, per system and L2: the measure on which MONOTRANS's step 2 fails on ``sov``.

With ``--out FILE.png`` it also draws the curves (mean over the seeds, one colour per system,
one panel per L2) with kaleido and the system chromium, and an HTML copy beside it.

    .venv/bin/python bench/plasticity.py SWEEP_FOLDER --out plasticity.png
    .venv/bin/python bench/plasticity.py RUN RUN RUN --systems monotrans,monotrans+forgetting
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from xlviz.runs import Run, is_sweep_folder, sweep_cells
from xlviz.transfer.pipeline import Pipeline

DEFAULT_SYSTEMS = "monotrans,monotrans+forgetting,monotrans+wechsel,monotrans+forgetting+wechsel"


def step2_stage(pipe: Pipeline, system: str, lang: str) -> str | None:
    """The name of ``system``'s step-2 (transfer phase) stage for ``lang``, as its method lists it."""
    for stage in pipe._lists[system]:
        if stage.phase == "transfer" and stage.name.endswith(f"-{lang}"):
            return stage.name
    return None


def curves(run: Run, systems: list[str]) -> tuple[int, dict[tuple[str, str], list[tuple[int, float]]]]:
    """(seed, {(system, l2): [(step, loss), ...]}) of one finished run."""
    pipe = Pipeline.resume(run.path)  # reads the config; trains nothing
    rows = run.metrics()
    out: dict[tuple[str, str], list[tuple[int, float]]] = {}
    for system in systems:
        if system not in pipe._lists:
            continue
        for lang in pipe.world.l2s if pipe.world is not None else [pipe.data.l2]:
            stage = step2_stage(pipe, system, lang)
            if stage is None:
                continue
            out[(system, lang)] = [(int(r["step"]), float(r["loss"])) for r in rows
                                   if r.get("stage") == stage and "loss" in r and "step" in r]
    return pipe.cfg.seed, out


def steps_to(curve: list[tuple[int, float]], target: float) -> int | None:
    """The first logged step whose loss is at or below ``target``."""
    return next((step for step, loss in curve if loss <= target), None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="run folders, or one sweep folder")
    ap.add_argument("--systems", default=DEFAULT_SYSTEMS)
    ap.add_argument("--reference", default="monotrans")
    ap.add_argument("--out", help="PNG of the curves (an HTML copy beside it)")
    args = ap.parse_args()
    folders = [Path(p) for p in args.runs]
    if len(folders) == 1 and is_sweep_folder(folders[0]):
        folders = sweep_cells(folders[0])
    systems = [s for s in args.systems.split(",") if s]
    per_seed = [curves(Run(f), systems) for f in folders]
    langs = sorted({lang for _, c in per_seed for (_, lang) in c})

    print(f"step-2 MLM loss (nats) and updates to reach {args.reference}'s final step-2 loss")
    print("| L2 | seed | system | final loss | updates to reach |")
    print("|---|---|---|---|---|")
    summary: dict[tuple[str, str], list[int | None]] = {}
    for lang in langs:
        for seed, c in sorted(per_seed, key=lambda sc: sc[0]):
            ref = c.get((args.reference, lang))
            if not ref:
                continue
            target = ref[-1][1]
            for system in systems:
                curve = c.get((system, lang))
                if not curve:
                    continue
                reach = steps_to(curve, target)
                summary.setdefault((lang, system), []).append(reach)
                print(f"| {lang} | {seed} | {system} | {curve[-1][1]:.3f} | {reach if reach is not None else '-'} |")
    print("\nmedian updates to reach the reference's final loss (not reached counts as above every reached):")
    for (lang, system), reaches in sorted(summary.items()):
        reached = [r for r in reaches if r is not None]
        med = statistics.median(reached) if len(reached) == len(reaches) else None
        print(f"  {lang} {system}: {med if med is not None else 'not reached at every seed'}"
              f" (per seed: {', '.join(str(r) if r is not None else '-' for r in reaches)})")

    print("\nword translation per layer after step 2 (%), mean over seeds [min, max]:")
    wt: dict[tuple[str, str], list[list]] = {}
    from xlviz.transfer.tasks import task_of

    task = task_of("word-translation")
    for folder in folders:
        rows = [r for r in Run(folder).results() if "word_translation_per_layer" in r]
        if not rows:  # not scored by the run (an opt-in task): computed here from its encoders, nothing written
            pipe = Pipeline.resume(folder)
            rows = [r for s in pipe.cfg.systems for r in task.world_rows(pipe, s, log=False)]
        for row in rows:
            wt.setdefault((row["language"], row["system"]), []).append(row["word_translation_per_layer"])
    for (lang, system), per_seed_layers in sorted(wt.items()):
        n_layers = min(len(x) for x in per_seed_layers)
        cells = []
        for k in range(n_layers):
            vals = [x[k] for x in per_seed_layers if x[k] is not None]
            cells.append(f"{statistics.fmean(vals):.1f} [{min(vals):.1f}, {max(vals):.1f}]" if vals else "-")
        print(f"  {lang} {system} ({len(per_seed_layers)} seeds): " + " | ".join(cells))

    if args.out:
        import plotly.graph_objects as go
        from plotly.subplots import make_subplots

        from xlviz.views.export import figure_image

        palette = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
        fig = make_subplots(rows=1, cols=len(langs), subplot_titles=[f"step 2 on {lang}" for lang in langs])
        for j, lang in enumerate(langs, start=1):
            for i, system in enumerate(systems):
                runs = [c[(system, lang)] for _, c in per_seed if c.get((system, lang))]
                if not runs:
                    continue
                steps = [s for s, _ in runs[0]]
                mean = [statistics.fmean(r[k][1] for r in runs if k < len(r)) for k in range(len(steps))]
                fig.add_trace(go.Scatter(x=steps, y=mean, mode="lines", name=system, legendgroup=system,
                                         showlegend=j == 1, line={"color": palette[i % len(palette)]}), row=1, col=j)
            fig.update_xaxes(title_text="step-2 updates", row=1, col=j)
        fig.update_yaxes(title_text=f"MLM loss (nats), mean of {len(per_seed)} seeds", row=1, col=1)
        fig.update_layout(width=1100, height=420, legend={"orientation": "h", "y": -0.25})
        out = Path(args.out)
        out.write_bytes(figure_image(fig, "png", scale=1.5))
        fig.write_html(out.with_suffix(".html"), include_plotlyjs=True)
        print(f"wrote {out} and {out.with_suffix('.html')}")


if __name__ == "__main__":
    main()
