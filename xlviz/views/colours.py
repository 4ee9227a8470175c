"""One colour per system across every chart of the app.

System names are not fixed (methods come from a registry and results.json rows), so colours are
assigned from the sorted set of every system name the runs folder holds: the same system gets
the same colour on the Runs, XQuAD and analysis pages of one app session.
"""

from __future__ import annotations

from typing import Iterable

# Okabe-Ito first (colour-blind safe), then plotly's D3 for the rest
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000",
           "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")


def colour_map(names: Iterable[str]) -> dict[str, str]:
    """``{name: colour}`` for the sorted distinct names (colours repeat past the palette)."""
    ordered = sorted({str(n) for n in names if n is not None})
    return {n: PALETTE[i % len(PALETTE)] for i, n in enumerate(ordered)}


def system_names(root=None) -> list[str]:
    """Every system named in the runs' results.json rows and their exports (manifest)."""
    from xlviz.errors import XlvizError
    from xlviz.runs import exports, list_runs

    names: set[str] = set()
    for run in list_runs(root):
        try:
            names |= {str(r.get("system")) for r in run.results() if r.get("system")}
        except XlvizError:
            pass
        try:
            names |= {str(a.system) for a in exports(run)}
        except XlvizError:
            pass
    return sorted(names)


def system_colours(root=None) -> dict[str, str]:
    return colour_map(system_names(root))


def label_colours(labels: Iterable[str], by_system: dict[str, str] | None = None) -> dict[str, str]:
    """Colours for chart labels such as ``"<run> · <system>"``: the first label of a system keeps
    the system's app-wide colour (``by_system``, e.g. :func:`system_colours`), so the Alignment
    page's floor is the Runs page's floor; a second run's same system and labels without a known
    system take the next colours no label uses yet."""
    by_system = by_system or {}
    out: dict[str, str] = {}
    for label in dict.fromkeys(str(l) for l in labels):
        c = by_system.get(label.rsplit(" · ", 1)[-1])
        if c and c not in out.values():
            out[label] = c
    free = [c for c in PALETTE if c not in out.values() and c not in by_system.values()]
    free += [c for c in PALETTE if c not in out.values() and c not in free]
    for label in dict.fromkeys(str(l) for l in labels):
        if label not in out:
            out[label] = free.pop(0) if free else PALETTE[len(out) % len(PALETTE)]
    return out


def chart_colours(names: Iterable[str]) -> dict[str, str]:
    """Colours for a notebook view's labels, as the pages draw them: :func:`label_colours` with
    the runs folder's app-wide system colours (:func:`system_colours`)."""
    return label_colours(list(names), system_colours())
