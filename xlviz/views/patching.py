"""Patching across languages in a notebook: a run's layer × token-group matrix per system as a
data frame, heatmaps and the per-layer curve (:mod:`xlviz.analysis.patching_report`: read from
the run when ``xlviz analyse patching`` stored it with the same inputs, computed otherwise,
writing nothing)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Sequence


@dataclass
class PatchingView:
    """``rows``: one row per (system, layer, group): ``restored`` (share of the English answer
    score the L2 run gets back), its 95% paragraph interval, questions and paragraphs."""

    rows: Any

    def matrix(self, system: str, value: str = "restored") -> Any:
        """Layer × group of ``value`` (``restored``, ``low`` or ``high``) for one system, the
        groups in :data:`xlviz.analysis.patching.GROUPS`' order."""
        from xlviz.analysis.patching import GROUPS

        r = self.rows[self.rows["system"] == system]
        m = r.pivot(index="layer", columns="group", values=value)
        return m.reindex(columns=[g for g in GROUPS if g in m.columns] + [g for g in m.columns if g not in GROUPS])

    def heatmap(self, system: str, title: str | None = None):
        """One system's layer × token-group heatmap of the share restored (plotly): layers down
        (0, the embeddings, on top), each cell's share and 95% paragraph interval written in it
        and in its hover; colours clipped to 0 .. 1 (the text says the value)."""
        import numpy as np
        import plotly.graph_objects as go

        from xlviz.views.text import plot_text

        m, lo, hi = self.matrix(system), self.matrix(system, "low"), self.matrix(system, "high")
        text = [[("" if np.isnan(v) else f"{100 * v:.0f}%".replace("-0%", "0%")) for v in row] for row in m.values]
        hover = [[(f"layer {layer} · {g}: {100 * v:.1f}% [{100 * a:.1f}, {100 * b:.1f}]" if not np.isnan(v) else "")
                  for g, v, a, b in zip(m.columns, row, row_lo, row_hi)]
                 for layer, row, row_lo, row_hi in zip(m.index, m.values, lo.values, hi.values)]
        fig = go.Figure(go.Heatmap(z=m.values, x=list(m.columns), y=[int(i) for i in m.index], zmin=0, zmax=1,
                                   colorscale="Viridis", text=text, texttemplate="%{text}", customdata=hover,
                                   hovertemplate="%{customdata}<extra></extra>",
                                   colorbar=dict(title="restored", tickformat=".0%")))
        fig.update_yaxes(title_text="layer patched (0: embeddings)", autorange="reversed", dtick=1)
        fig.update_xaxes(title_text="token group patched with the English run's states")
        fig.update_layout(height=340, title=plot_text(title) if title else None)
        return fig

    def curve(self, group: str = "all", colours: dict[str, str] | None = None, title: str | None = None):
        """``restored`` per layer for each system, with its interval (plotly); ``colours``: a
        fixed colour per system (the app-wide system colours)."""
        import plotly.graph_objects as go

        from xlviz.views.text import plot_text

        fig = go.Figure()
        for system, g in self.rows[self.rows["group"] == group].groupby("system", sort=False):
            fig.add_scatter(x=g["layer"], y=g["restored"], name=plot_text(system), mode="lines+markers",
                            line=dict(color=(colours or {}).get(system)),
                            error_y=dict(type="data", symmetric=False, array=g["high"] - g["restored"],
                                         arrayminus=g["restored"] - g["low"]))
        fig.update_layout(xaxis_title="layer patched (0: embeddings)", yaxis_title=f"share of the English score restored ({group})",
                          height=380, title=plot_text(title) if title else None)
        fig.update_xaxes(dtick=1)
        fig.update_yaxes(tickformat=".0%")
        return fig

    def figure(self):
        """One heatmap per system: layers down, token groups across."""
        from plotly.subplots import make_subplots
        import plotly.graph_objects as go

        systems = list(dict.fromkeys(self.rows["system"]))
        fig = make_subplots(rows=1, cols=len(systems), subplot_titles=systems, shared_yaxes=True)
        for i, s in enumerate(systems, 1):
            m = self.matrix(s)
            fig.add_trace(go.Heatmap(z=m.values, x=list(m.columns), y=list(m.index), zmin=0, zmax=1, colorscale="Viridis",
                                     showscale=i == len(systems)), row=1, col=i)
        fig.update_yaxes(title_text="layer", autorange="reversed", row=1, col=1)
        fig.update_layout(height=360)
        return fig

    def _repr_html_(self) -> str:
        return "".join(f"<b>{s}</b>" + self.matrix(s).to_html(float_format="%.2f") for s in dict.fromkeys(self.rows["system"]))


def patching(run: str | os.PathLike, lang: str, systems: Sequence[str] | None = None, *, limit: int | None = None) -> PatchingView:
    """The run's patching table on ``lang`` for ``systems`` (default: every system with English
    and ``lang`` QA exports), ``limit`` test questions each."""
    import pandas as pd

    from xlviz.analysis.patching_report import COLUMNS, LIMIT, run_patching

    table = run_patching(run, lang, list(systems) if systems else None, limit or LIMIT)
    return PatchingView(pd.DataFrame(table["rows"], columns=list(COLUMNS)))


__all__ = ["PatchingView", "patching"]
