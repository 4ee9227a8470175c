"""Metrics by slice in a notebook: a run's slice table as data frames, a figure, and each
slice's questions (to open on the XQuAD cards with :func:`xlviz.views.xquad_comparison`).

Why here: the table is :mod:`xlviz.transfer.slices`'s (stored in the run by ``xlviz report
--slices`` and read back when it still matches; computed otherwise, writing nothing), so the
notebook, the CLI and the XQuAD page show the same numbers.

The XQuAD page slices its own rows (its models are the sidebar's picks, not only a run's saved
predictions): :func:`dataset_slices`, :func:`slice_frames` and :func:`pivot` regroup the page's
per-question rows with the same functions as ``xlviz report --slices``
(:mod:`xlviz.evaluation.slices`), and the notebook's :attr:`SliceView.table` is the page's pivot.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from xlviz.evaluation.slices import DIFF_COLUMNS, SCORE_COLUMNS, Scores, members, slice_differences, slice_table, test_set_slices


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
    from xlviz.transfer.slices import run_slices

    rep = run_slices(run, lang, list(systems) if systems else None, pair)
    return SliceView(pd.DataFrame(rep.rows, columns=list(SCORE_COLUMNS)), pd.DataFrame(rep.differences, columns=list(DIFF_COLUMNS)),
                     rep.members, rep.source, str(rep.stored) if rep.stored else None)


# --------------------------------------------------------------------------- the XQuAD page's slices
def dataset_slices(files: dict[str, str], lang: str, world_dir: str | Path | None) -> tuple[dict, dict, str]:
    """The slices of ``lang``'s file of a QA data set (``files``: language -> file): the world's
    when ``world_dir`` holds the run's generated world, the text's otherwise (question words
    from the English file when the set has one)."""
    return test_set_slices(files[lang], lang, world_dir=world_dir, english_file=files.get("en"))


def page_scores(rows: pd.DataFrame, lang: str, models: Sequence[str]) -> dict[str, Scores]:
    """Per-model per-question scores on ``lang`` from the page's prediction rows (paragraph:
    the rows' paragraph key, as the page's intervals cluster)."""
    out = {}
    for m in models:
        g = rows[(rows["language"] == lang) & (rows["model"] == m)]
        if not g.empty:
            out[m] = Scores(list(g["id"]), list(g["paragraph"]), [float(x) for x in g["exact_match"]], [float(x) for x in g["f1"]])
    return out


def slice_frames(rows: pd.DataFrame, lang: str, models: Sequence[str], slices: dict, order: dict,
                 pair: tuple[str, str] | None = None, n_resamples: int = 1000) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """(slice rows, paired differences, ``{(dimension, value): ids}``) of the page's rows."""
    scores = page_scores(rows, lang, models)
    table = pd.DataFrame(slice_table(scores, slices, order=order, n_resamples=n_resamples), columns=list(SCORE_COLUMNS))
    diffs = pd.DataFrame(columns=list(DIFF_COLUMNS))
    if pair and pair[0] in scores and pair[1] in scores and pair[0] != pair[1]:
        diffs = pd.DataFrame(slice_differences(pair[0], scores[pair[0]], pair[1], scores[pair[1]], slices, order=order,
                                               n_resamples=n_resamples), columns=list(DIFF_COLUMNS))
    return table, diffs, members(slices, order)


def slice_label(dimension: str, value: str) -> str:
    return value if dimension == "all" else f"{dimension}: {value}"


def pivot(rows: pd.DataFrame) -> pd.DataFrame:
    """Slice × system with "EM / F1 [F1 low, high]" text cells and each slice's question count."""
    if rows.empty:
        return pd.DataFrame()
    labels = [slice_label(d, v) for d, v in zip(rows["dimension"], rows["value"])]
    r = rows.assign(slice=labels, cell=[f"{e:.1f} / {f:.1f} [{lo:.1f}, {hi:.1f}]" for e, f, lo, hi in
                                        zip(rows["exact_match"], rows["f1"], rows["f1_low"], rows["f1_high"])])
    order = list(dict.fromkeys(labels))
    out = r.pivot(index="slice", columns="system", values="cell").reindex(order)
    out.columns.name = None
    out.insert(0, "n", r.groupby("slice", sort=False)["n_questions"].max().reindex(order))
    return out


__all__ = ["SliceView", "slices", "dataset_slices", "page_scores", "slice_frames", "slice_label", "pivot"]
