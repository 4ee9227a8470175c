"""Metrics by slice in a notebook: a run's slice table as data frames, a figure, and each
slice's questions (to open on the XQuAD cards with :func:`xlviz.views.xquad_comparison`).

Why here: the table is :mod:`xlviz.transfer.slices`'s (stored in the run by ``xlviz report
--slices`` and read back when it still matches; computed otherwise, writing nothing), so the
notebook, the CLI and the XQuAD page show the same numbers.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Sequence


@dataclass
class SliceView:
    """``rows``: one row per (slice, system) with EM/F1 and 95% paragraph intervals;
    ``differences``: A − B per slice (when two systems were given); ``members``:
    ``{dimension: {value: question ids}}``; ``source``: "world" or "squad" slices."""

    rows: Any
    differences: Any
    members: dict = field(repr=False, default_factory=dict)
    source: str = ""
    stored: str | None = None

    def questions(self, dimension: str, value: str) -> list[str]:
        """The ids of one slice's questions (for ``xquad_comparison(...).card(qid)``)."""
        return list(self.members.get(dimension, {}).get(value, []))

    @property
    def table(self) -> Any:
        """Slice × system: "EM / F1 [F1 low, high]" text cells (the XQuAD page's slice table)."""
        from xlviz.ui.slices_view import pivot

        return pivot(self.rows)

    def figure(self, metric: str = "f1"):
        """Bars of ``metric`` per slice and system with their intervals (plotly)."""
        import plotly.graph_objects as go

        fig = go.Figure()
        labels = self.rows["dimension"] + ": " + self.rows["value"]
        for system, g in self.rows.assign(label=labels).groupby("system", sort=False):
            fig.add_bar(name=system, y=g["label"], x=g[metric], orientation="h",
                        error_x=dict(type="data", symmetric=False, array=g[f"{metric}_high"] - g[metric],
                                     arrayminus=g[metric] - g[f"{metric}_low"]))
        fig.update_layout(barmode="group", height=max(300, 22 * len(set(labels)) * max(1, self.rows["system"].nunique())),
                          xaxis_title=f"{metric} (%) with 95% paragraph interval", yaxis=dict(autorange="reversed"))
        return fig

    def _repr_html_(self) -> str:
        html = "<b>EM / F1 (%) [F1 95% paragraph bootstrap]</b>" + self.table.to_html(na_rep="n/a")
        if not self.differences.empty:
            d = self.differences[self.differences["metric"] == "f1"]
            html += "<b>paired F1 difference</b>" + d.to_html(index=False, float_format="%.2f")
        return html


def slices(run: str | os.PathLike, lang: str, systems: Sequence[str] | None = None, *,
           pair: tuple[str, str] | None = None) -> SliceView:
    """A run's metrics by slice on ``lang`` (the world's slices on a generated test set; question
    word, answer length and position, overlap on other data) for ``systems`` (default: every
    system with saved predictions) and, with ``pair=(a, b)``, a − b per slice."""
    import pandas as pd

    from xlviz.evaluation.slices import DIFF_COLUMNS, SCORE_COLUMNS
    from xlviz.transfer.slices import run_slices

    rep = run_slices(run, lang, list(systems) if systems else None, pair)
    return SliceView(pd.DataFrame(rep.rows, columns=list(SCORE_COLUMNS)), pd.DataFrame(rep.differences, columns=list(DIFF_COLUMNS)),
                     rep.members, rep.source, str(rep.stored) if rep.stored else None)


__all__ = ["SliceView", "slices"]
