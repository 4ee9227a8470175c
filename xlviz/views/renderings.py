"""Words versus order in a notebook: each system's QA exports on the counterfactual renderings
of a run's test questions and the split of the L2's loss (:mod:`xlviz.analysis.counterfactuals`;
read from the run when ``xlviz analyse renderings`` stored it with the same inputs, computed
otherwise, writing nothing)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Sequence

LABELS = {"en": "English", "words": "L2 words, English order", "order": "English words, L2 order", "l2": "L2"}


@dataclass
class RenderingsView:
    """``scores``: EM/F1 with 95% paragraph intervals per system and rendering (and the share
    of [UNK] tokens); ``split``: F1 and EM lost against English per cost, paired intervals."""

    scores: Any
    split: Any

    def figure(self):
        """F1 per rendering and system with intervals (plotly)."""
        import plotly.graph_objects as go

        fig = go.Figure()
        for system, g in self.scores.groupby("system", sort=False):
            fig.add_bar(name=system, x=[LABELS.get(r, r) for r in g["rendering"]], y=g["f1"],
                        error_y=dict(type="data", symmetric=False, array=g["f1_high"] - g["f1"], arrayminus=g["f1"] - g["f1_low"]))
        fig.update_layout(barmode="group", yaxis_title="F1 (%) with 95% paragraph interval", height=380)
        return fig

    def _repr_html_(self) -> str:
        s = self.scores.assign(rendering=[LABELS.get(r, r) for r in self.scores["rendering"]])
        d = self.split[self.split["metric"] == "f1"]
        return ("<b>EM / F1 (%) per rendering</b>" + s.to_html(index=False, float_format="%.1f")
                + "<b>F1 lost against English (paired)</b>" + d.to_html(index=False, float_format="%.2f"))


def renderings(run: str | os.PathLike, lang: str, systems: Sequence[str] | None = None, *,
               paragraphs: int | None = None) -> RenderingsView:
    """The run's words-versus-order table on ``lang`` for ``systems`` (default: every system with
    English and ``lang`` QA exports), on the first ``paragraphs`` test paragraphs (default all)."""
    import pandas as pd

    from xlviz.analysis.counterfactuals import SCORE_COLUMNS, SPLIT_COLUMNS, run_renderings

    table = run_renderings(run, lang, list(systems) if systems else None, paragraphs)
    return RenderingsView(pd.DataFrame(table["scores"], columns=list(SCORE_COLUMNS)),
                          pd.DataFrame(table["split"], columns=list(SPLIT_COLUMNS)))


__all__ = ["RenderingsView", "renderings"]
