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

    def matrix(self, system: str) -> Any:
        """Layer × group of ``restored`` for one system."""
        r = self.rows[self.rows["system"] == system]
        return r.pivot(index="layer", columns="group", values="restored")

    def curve(self, group: str = "all"):
        """``restored`` per layer for each system, with its interval (plotly)."""
        import plotly.graph_objects as go

        fig = go.Figure()
        for system, g in self.rows[self.rows["group"] == group].groupby("system", sort=False):
            fig.add_scatter(x=g["layer"], y=g["restored"], name=system, mode="lines+markers",
                            error_y=dict(type="data", symmetric=False, array=g["high"] - g["restored"],
                                         arrayminus=g["restored"] - g["low"]))
        fig.update_layout(xaxis_title="layer patched (0: embeddings)", yaxis_title=f"share of the English score restored ({group})",
                          height=380)
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
