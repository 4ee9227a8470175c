"""Fixed precision for the app's tables.

st.dataframe shows a float with up to four decimals unless its column says otherwise
(``66.6667`` for a per-question F1, ``0.9432`` beside ``0.95``): a table of scores then reads as
noise. :func:`number_config` gives every float column a format from the page's convention, by
column name, so no table can forget one; the frames themselves (and the CSV downloads built
from them) keep full precision.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

ONE = "%.1f"    # EM, F1 and other percentages
TWO = "%.2f"    # ratios, log-probabilities
THREE = "%.3f"  # p values, cosines, CKA and other similarities in [0, 1]
PERCENT = "percent"  # a fraction shown as a percentage (0.018 -> 1.80%), as the page's charts draw it

# EM / F1 tables (Runs, XQuAD): scores and their interval ends in %, p values with three decimals
SCORE_RULES: tuple[tuple[str, str], ...] = ((r"^p\b", THREE), (r"\bsd\b", ONE), (r".", ONE))
# Alignment rows: retrieval and word translation are fractions drawn in % on the charts; CKA a similarity
ALIGNMENT_RULES: tuple[tuple[str, str], ...] = ((r"^retrieval|^word_translation", PERCENT), (r"cka|cos", THREE))


def column_format(name: object, rules: Sequence[tuple[str, str]], default: str) -> str:
    """The format of the first rule whose pattern is found in the column's name, else ``default``."""
    return next((fmt for pattern, fmt in rules if re.search(pattern, str(name))), default)


def number_config(frame: pd.DataFrame, rules: Sequence[tuple[str, str]] = (), default: str = ONE,
                  config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``column_config`` for st.dataframe: ``config`` as given, plus a NumberColumn with a fixed
    format for every other float column of ``frame`` (the label stays the column's name)."""
    import streamlit as st

    out = dict(config or {})
    for col in frame.columns:
        if str(col) in out or not pd.api.types.is_float_dtype(frame[col]):
            continue
        out[str(col)] = st.column_config.NumberColumn(format=column_format(col, rules, default))
    return out


P_FLOOR = 0.001  # a p value below half of this reads "< 0.001", never "0" (no test gives p = 0)


def p_text(p: object) -> str | None:
    """A p value as shown: three decimals, ``< 0.001`` below 0.0005 (None stays empty)."""
    if not isinstance(p, (int, float)) or isinstance(p, bool) or pd.isna(p):
        return None
    return f"< {P_FLOOR:.3f}" if p < P_FLOOR / 2 else f"{p:.3f}"


def with_p_text(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with every p-value column (its name starts with "p") as :func:`p_text`, for
    display; the frame a CSV is built from keeps the numbers."""
    out = frame.copy()
    for col in out.columns:  # numbers only: a text column named "p from" says how p was computed
        if re.match(r"^p\b", str(col)) and pd.api.types.is_numeric_dtype(out[col]):
            out[col] = pd.Series([p_text(v) for v in out[col].tolist()], index=out.index, dtype=object)
    return out


RATIO_RULES = ((r"/L1$", TWO),)  # the F1 L2/L1 ratios (0.94)


def compare_column_config(table: pd.DataFrame) -> dict:
    """column_config for a :func:`xlviz.views.runs.compare_table` part: the run and system names
    pinned at the left and wide enough to read whole, every score with one decimal, the F1 L2/L1
    ratios with two (0.94)."""
    import streamlit as st

    from xlviz.views.runs import name_width

    names = {c: st.column_config.TextColumn(c, width=name_width(table[c]), pinned=True)
             for c in ("run", "runs", "system") if c in table}
    return number_config(table, RATIO_RULES + SCORE_RULES, config=names)
