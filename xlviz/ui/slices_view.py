"""Metrics by slice for the XQuAD page and the notebook view, without Streamlit: the page's
per-question rows regrouped by slice, and the slice × system table both show.

Why apart from :mod:`xlviz.ui.qa`: the page's models are the sidebar's picks (not only a run's
saved predictions), so the page slices its own rows; the numbers are computed by the same
functions as ``xlviz report --slices`` (:mod:`xlviz.evaluation.slices`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from xlviz.evaluation.slices import DIFF_COLUMNS, SCORE_COLUMNS, Scores, members, slice_differences, slice_table, test_set_slices


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


__all__ = ["dataset_slices", "page_scores", "slice_frames", "slice_label", "pivot"]
