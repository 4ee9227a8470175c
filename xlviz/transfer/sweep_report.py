"""A sweep's results: per setting (a cell without its seed), system and language, the mean over
seeds of F1, EM and their L2/L1 ratios with a 95% interval, as a table and as plotly figures.

Why: one run's ratio moves by several points with the seed (docs/world.md), so a sweep over
grammars says something only as means with intervals over seeds. The interval is the Student-t
interval over the seeds' values (never a percentile bootstrap of two or three values, which
cannot be wider than their range and covers ~75%): with two seeds it has one degree of freedom
and is wide, and the table says how many seeds each mean has. Beside it, F1 and EM get the
seeds + test-set interval (``xlviz.evaluation.seeds.seeds_paragraphs_interval``; with one seed
the paragraph bootstrap), from the predictions each cell kept: the test questions' own spread,
which the seeds' values alone do not show when the seeds share a world. Paired differences
between systems are decided by ``xlviz.evaluation.seeds`` (t over per-seed differences, Holm
over the table's comparisons, the verdict rule): the pages show what it returns. A row that
depends on a degenerate stage (``xlviz.training.verdicts``) is no result: it is left out of
every mean, ratio and paired difference, and counted as excluded.
"""

from __future__ import annotations

from pathlib import Path

from xlviz.errors import XlvizError
from xlviz.evaluation.seeds import compare_seeds, decide, holm, seeds_for_power
from xlviz.evaluation.uncertainty import seed_interval
from xlviz.training.verdicts import degenerate_reason, is_degenerate
from xlviz.transfer.sweep import SEED_KEYS, Cell, Sweep, cell_label, setting_label

L1 = "en"


def _setting(cell: Cell) -> str:
    return setting_label(cell)


def _series(cell: Cell) -> str:
    """The cell's settings but its seed and grammar: what tells two lines of one system apart
    in a figure against typological distance (``shared_names=true``); "" when only the grammar
    and seed vary."""
    return cell_label(cell, SEED_KEYS + ("world.languages",))


def _distance(cell: Cell, lang: str) -> int | None:
    from xlviz.data.typology import typological_distance

    for spec in (cell.config.get("world") or {}).get("languages") or []:
        if isinstance(spec, dict) and spec.get("code") == lang:
            return typological_distance(spec.get("order", "svo"))
    return None


def _interval(values: list[float]) -> dict:
    """The mean over seeds and its 95% Student-t interval (None with one seed)."""
    if len(values) < 2:
        v = values[0]
        return {"mean": v, "low": None, "high": None}
    iv = seed_interval(values)
    return {"mean": iv.mean, "low": iv.low, "high": iv.high}


def sweep_rows(folder: str | Path, *, paragraphs: bool = True) -> list[dict]:
    """One row per (setting, system, language): ``n`` seeds with results, and for ``f1``,
    ``exact_match``, ``ratio`` (L2 F1 over the same model's L1 F1) and ``em_ratio`` the mean,
    ``*_low`` and ``*_high`` (None with one seed); ``distance`` is the language's typological
    distance from English (L1 rows: 0); ``series`` the cell's settings but its seed and grammar
    (one line of a figure). With ``paragraphs``, ``f1_sp_low``/``_high`` and
    ``exact_match_sp_low``/``_high``: the seeds-then-paragraphs interval from the cells' kept
    predictions. ``excluded``: ``[(cell, reason)]`` of rows left out as degenerate (a ratio is
    also left out when the same system's English row is degenerate)."""
    sweep = Sweep(folder)
    if not sweep.exists():
        raise XlvizError("not a sweep folder (no sweep/sweep.json)", path=folder)
    groups: dict[tuple, dict] = {}
    order: list[tuple] = []
    for cell in sweep.cells():
        run = sweep.cell_run(cell)
        rows = run.results()
        l1 = {r["system"]: r for r in rows if r["language"] == L1 and not is_degenerate(r)}
        for r in rows:
            key = (_setting(cell), r["system"], r["language"])
            if key not in groups:
                groups[key] = {"setting": key[0], "series": _series(cell), "system": key[1], "language": key[2],
                               "transfer": r.get("setting") or "zero-shot",
                               "distance": 0 if key[2] == L1 else _distance(cell, key[2]), "values": {}, "cells": [],
                               "dirs": [], "excluded": []}
                order.append(key)
            g = groups[key]
            if is_degenerate(r):  # no result: not a number to average
                g["excluded"].append((cell.name, degenerate_reason(r)))
                continue
            g["cells"].append(cell.name)
            g["dirs"].append(run.path)
            vals = {"f1": r["f1"], "exact_match": r["exact_match"]}
            base = l1.get(r["system"])
            if r["language"] != L1:
                f1_base = r.get("l1_f1") or (base or {}).get("f1")
                if f1_base:
                    vals["ratio"] = r["f1"] / f1_base
                # a pair model divides by its own L1 model's EM (rows recorded before it was kept: no EM ratio)
                em_base = r.get("l1_exact_match") if r.get("l1_f1") else (base or {}).get("exact_match")
                if em_base:
                    vals["em_ratio"] = r["exact_match"] / em_base
            for k, v in vals.items():
                g["values"].setdefault(k, []).append(v)
    out = []
    for key in order:
        g = groups[key]
        row = {k: g[k] for k in ("setting", "series", "system", "language", "transfer", "distance", "excluded")}
        row["n"] = len(g["cells"])
        for metric in ("f1", "exact_match", "ratio", "em_ratio"):
            values = g["values"].get(metric)
            if values:
                iv = _interval(values)
                row[metric], row[f"{metric}_low"], row[f"{metric}_high"] = iv["mean"], iv["low"], iv["high"]
        if paragraphs and g["dirs"]:
            from xlviz.transfer.uncertainty import seeds_paragraphs_interval

            for metric in ("f1", "exact_match"):
                iv = seeds_paragraphs_interval(g["dirs"], key[1], key[2], metric)
                if iv is not None and iv.n_seeds == row["n"]:  # not a subset of the seeds passed off as all of them
                    row[f"{metric}_sp_low"], row[f"{metric}_sp_high"] = iv.low, iv.high
        out.append(row)
    return out


def paired_differences(folder: str | Path, a: str, b: str, metric: str = "ratio") -> list[dict]:
    """Per setting and L2: ``a`` minus ``b`` in ``metric`` (``f1``, ``exact_match``, ``ratio``),
    paired by cell (the same seed, world and English body): the mean of the per-seed
    differences, its 95% t interval (None with one seed), the paired t ``p``, ``p_holm`` over
    every row returned (one family), the exact sign-flip ``p_sign_flip`` and its floor, the
    ``verdict`` code of :func:`xlviz.evaluation.seeds.decide` on ``p_holm`` and
    ``seeds_needed`` for 80% power at the observed difference and between-seed sd."""
    sweep = Sweep(folder)
    if not sweep.exists():
        raise XlvizError("not a sweep folder (no sweep/sweep.json)", path=folder)
    diffs: dict[tuple, list[float]] = {}
    for cell in sweep.cells():
        rows = [r for r in sweep.cell_run(cell).results() if not is_degenerate(r)]  # degenerate rows: no result
        l1 = {r["system"]: r for r in rows if r["language"] == L1}
        by = {(r["system"], r["language"]): r for r in rows}
        for (system, lang), r in by.items():
            if system != a or lang == L1 or (b, lang) not in by:
                continue
            if (r.get("setting") or "zero-shot") != (by[(b, lang)].get("setting") or "zero-shot"):
                continue  # rows of different settings are never paired

            def value(row: dict, sys: str) -> float | None:
                if metric != "ratio":
                    return row[metric]
                base = row.get("l1_f1") or (l1.get(sys) or {}).get("f1")
                return row["f1"] / base if base else None

            va, vb = value(r, a), value(by[(b, lang)], b)
            if va is not None and vb is not None:
                diffs.setdefault((_setting(cell), lang), []).append(va - vb)
    out = []
    for (setting, lang), values in diffs.items():
        c = compare_seeds(values)
        many = c.n_seeds > 1
        out.append({"setting": setting, "language": lang, "a": a, "b": b, "metric": metric, "n": c.n_seeds,
                    "difference": c.difference, "low": c.low if many else None, "high": c.high if many else None,
                    "p": c.p_value if many else None, "p_sign_flip": c.p_sign_flip if many else None,
                    "sign_flip_floor": c.sign_flip_floor, "sd": c.sd if many else None})
    adjusted = holm([d["p"] for d in out if d["p"] is not None])
    it = iter(adjusted)
    for d in out:
        d["p_holm"] = next(it) if d["p"] is not None else None
        d["verdict"] = decide(d["n"], d["p_holm"], d["difference"])
        d["seeds_needed"] = seeds_for_power(d["difference"], d["sd"]) if d["sd"] is not None else None
        d["family"] = len(adjusted)
    return out


def _p(value: float | None) -> str:
    return "—" if value is None else ("<0.001" if value < 0.001 else f"{value:.3f}")


def _cell(row: dict, metric: str, fmt: str) -> str:
    if metric not in row:
        return "—"
    text = format(row[metric], fmt)
    if row.get(f"{metric}_low") is not None:
        text += f" [{format(row[f'{metric}_low'], fmt)}, {format(row[f'{metric}_high'], fmt)}]"
    return text


def _sp(row: dict, metric: str) -> str:
    if row.get(f"{metric}_sp_low") is None:
        return "—"
    return f"[{row[f'{metric}_sp_low']:.1f}, {row[f'{metric}_sp_high']:.1f}]"


def excluded_lines(rows: list[dict]) -> list[str]:
    """One line per result row left out as degenerate: cell, system, language, reason."""
    return [f"{cell}: {r['system']} {r['language']} ({why})" for r in rows for cell, why in r.get("excluded", [])]


def sweep_timing(folder: str | Path) -> dict:
    """What sharing stages saved: ``ran_s``, the sum of the stage times the sweep's cells ran
    (each cell's ``stage_seconds``), and ``alone_s``, what the same cells cost run alone: that
    plus, for every stage a cell received as a copy, the time the stage took in the cell that
    ran it. ``cells``: cells counted (completed); ``copied``: stages received as copies."""
    sweep = Sweep(folder)
    if not sweep.exists():
        raise XlvizError("not a sweep folder (no sweep/sweep.json)", path=folder)
    cells = sweep.cells()
    ran: dict[str, dict[str, float]] = {}
    done: dict[str, list[str]] = {}
    for c in cells:
        run = sweep.cell_run(c)
        if not run.exists():
            continue
        status = run.status()
        if status.get("state") != "completed":
            continue
        ran[c.name] = run.stage_seconds()
        done[c.name] = list(status.get("stages_done", []))
    group_time: dict[tuple[str, str], float] = {}
    for c in cells:
        for stage, sec in ran.get(c.name, {}).items():
            group_time.setdefault((c.group(), stage), sec)
    ran_s = sum(sum(v.values()) for v in ran.values())
    extra, copied = 0.0, 0
    for c in cells:
        for stage in done.get(c.name, []):
            if stage not in ran[c.name] and (c.group(), stage) in group_time:
                extra += group_time[(c.group(), stage)]
                copied += 1
    return {"cells": len(ran), "ran_s": ran_s, "alone_s": ran_s + extra, "copied": copied}


def sweep_table(folder: str | Path) -> str:
    """Markdown: per grid cell (its settings but the seed), system and L2, the transfer setting
    (zero-shot, translate-train, translate-test), F1, EM and the ratios with their 95% intervals
    over seeds, F1 and EM's seeds-then-paragraphs intervals, the rows left out as degenerate,
    and the stage time the sweep took beside its cells run alone."""
    rows = sweep_rows(folder)
    head = ["cell", "system", "language", "transfer", "distance", "seeds", "F1", "EM", "F1 L2/L1", "EM L2/L1",
            "F1 [seeds+paragraphs]", "EM [seeds+paragraphs]"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in sorted(rows, key=lambda r: (r["system"], r["distance"] if r["distance"] is not None else 99, r["setting"], r["language"])):
        lines.append(f"| {r['setting']} | {r['system']} | {r['language']} | {r['transfer']} | {'' if r['distance'] is None else r['distance']} | "
                     f"{r['n']} | {_cell(r, 'f1', '.1f')} | {_cell(r, 'exact_match', '.1f')} | {_cell(r, 'ratio', '.2f')} | "
                     f"{_cell(r, 'em_ratio', '.2f')} | {_sp(r, 'f1')} | {_sp(r, 'exact_match')} |")
    excluded = excluded_lines(rows)
    if excluded:
        lines += ["", "Left out as degenerate (their model failed to learn; not results):"]
        lines += [f"- {line}" for line in excluded]
    systems = sorted({r["system"] for r in rows})
    if "floor" in systems and len(systems) > 1:  # what each system gains over the blind model, paired by cell
        from xlviz.evaluation.seeds import verdict_text

        lines += ["", "| cell | language | system - floor (F1 L2/L1) [95% t] | p | p Holm | verdict | seeds | "
                      "seeds for 80% power |", "|---|---|---|---|---|---|---|---|"]
        for other in systems:
            if other == "floor":
                continue
            for d in paired_differences(folder, other, "floor"):
                iv = f" [{d['low']:+.2f}, {d['high']:+.2f}]" if d["low"] is not None else ""
                p, ph = _p(d["p"]), _p(d["p_holm"])
                lines.append(f"| {d['setting']} | {d['language']} | {other}: {d['difference']:+.2f}{iv} | {p} | {ph} | "
                             f"{verdict_text(d['verdict'], other, 'floor', d['n'])} | {d['n']} | "
                             f"{'—' if d['seeds_needed'] is None else d['seeds_needed']} |")
        lines.append("Paired by cell; t over the per-seed differences; p Holm over each system's rows; a verdict needs "
                     "3 seeds or more and p Holm < 0.05.")
    lines.append("\nMean over seeds [95% Student-t interval over the seeds' values; none with one seed; 2 seeds: one "
                 "degree of freedom, wide]; [seeds+paragraphs]: the t widened by the test set's paragraph-sampling "
                 "variance when the seeds share their test questions (one seed: paragraph bootstrap), "
                 "from the predictions the cells kept. "
                 "cell: the grid's settings but the seed (all: the grid is seeds only). "
                 "Ratios divide by the same system's English score in the same cell; distance: typological features "
                 "that differ from English (docs/typology.md).")
    t = sweep_timing(folder)
    if t["cells"]:
        lines.append(f"Stage time: {t['ran_s']:.0f} s over {t['cells']} completed cells; the same cells run alone: "
                     f"{t['alone_s']:.0f} s ({t['copied']} shared stages received as copies"
                     + (f", {t['alone_s'] / t['ran_s']:.2f}x" if t["ran_s"] else "") + ").")
    return "\n".join(lines)


def ratio_figure(rows: list[dict], systems: list[str] | None = None):
    """Plotly: L2/L1 ratio against typological distance, one line per system and ``series`` (the
    grid's other settings, e.g. ``shared_names=true``) with its interval band, F1 (left) beside
    EM (right: the floor's F1 is mostly partial credit). Colour = system, dash = the other
    settings: a sweep over grammars and another setting would otherwise join two settings'
    points at one distance into one zigzag line. A sweep at one distance only (a grid over
    another setting, one grammar) has no band to draw: its points carry error bars instead,
    dodged sideways so that no two systems' bars overlap. ``rows`` from :func:`sweep_rows`."""
    import plotly.graph_objects as go
    from plotly.colors import qualitative
    from plotly.subplots import make_subplots

    pts = [r for r in rows if r["language"] != L1 and r.get("distance") is not None]
    names = systems or sorted({r["system"] for r in pts})
    series = list(dict.fromkeys(r.get("series", "") for r in pts))
    dashes = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
    one_x = len({r["distance"] for r in pts}) == 1
    n_lines = len(names) * len(series)
    fig = make_subplots(rows=1, cols=2, subplot_titles=("F1 L2/L1", "EM L2/L1"), shared_yaxes=True)
    for i, system in enumerate(names):
        color = qualitative.Plotly[i % len(qualitative.Plotly)]
        for j, ser in enumerate(series):
            mine = sorted((r for r in pts if r["system"] == system and r.get("series", "") == ser),
                          key=lambda r: (r["distance"], r["setting"]))
            name = f"{system} · {ser}" if ser else system
            for col, metric in ((1, "ratio"), (2, "em_ratio")):
                have = [r for r in mine if metric in r]
                if not have:
                    continue
                x = [r["distance"] for r in have]
                banded = [r for r in have if r.get(f"{metric}_low") is not None]
                bars = {}
                if one_x:  # no band at one distance: error bars, each line dodged by its index
                    x = [v + 0.3 * ((i * len(series) + j) / max(1, n_lines - 1) - 0.5) if n_lines > 1 else v for v in x]
                    if len(banded) == len(have):
                        bars = {"error_y": {"type": "data", "symmetric": False, "color": color,
                                            "array": [r[f"{metric}_high"] - r[metric] for r in have],
                                            "arrayminus": [r[metric] - r[f"{metric}_low"] for r in have]}}
                elif banded:
                    fig.add_trace(go.Scatter(x=[r["distance"] for r in banded] + [r["distance"] for r in reversed(banded)],
                                             y=[r[f"{metric}_high"] for r in banded] + [r[f"{metric}_low"] for r in reversed(banded)],
                                             mode="lines", fill="toself", fillcolor=color, opacity=0.15 if len(series) == 1 else 0.08,
                                             line={"width": 0}, hoverinfo="skip", showlegend=False, legendgroup=name), row=1, col=col)
                fig.add_trace(go.Scatter(x=x, y=[r[metric] for r in have], mode="lines+markers", name=name, legendgroup=name,
                                         showlegend=col == 1, line={"color": color, "dash": dashes[j % len(dashes)]},
                                         text=[f"{r['setting']} ({r['language']}, {r['n']} seeds)" for r in have],
                                         hovertemplate="%{text}<br>%{y:.2f}<extra>" + name + "</extra>", **bars),
                              row=1, col=col)
    fig.update_xaxes(title_text="typological distance from English (features that differ)", dtick=1)
    if one_x:
        d = pts[0]["distance"] if pts else 0
        fig.update_xaxes(range=[d - 0.5, d + 0.5], tickvals=[d])
    fig.update_yaxes(title_text="L2/L1", row=1, col=1)
    return fig


__all__ = ["sweep_rows", "sweep_table", "sweep_timing", "excluded_lines", "paired_differences", "ratio_figure"]
