"""The XQuAD page's "Patching": for one picked system and the L2, the share of the English answer
score that the English run's hidden states restore in the L2 run, per layer and token group
(heatmap), and every system's curve of the ``all`` group with its interval.

Why here: the table is :mod:`xlviz.analysis.patching_report`'s. The page reads the table that
``xlviz analyse patching`` stored in the run when one is still current (same exports and world;
any ``--limit`` or ``--systems`` holding the picked system); otherwise it computes a small one
(:data:`PAGE_LIMIT` questions per system, each costing ``layers + 1`` forward passes), writes
nothing, and says so. Computed only while its expander is open.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import streamlit as st

from xlviz.views.choices import ModelChoice, QADataset
from xlviz.errors import XlvizError
from xlviz.ui.common import few_threads, guard, plotly
from xlviz.ui.state import write_url
from xlviz.views.text import md_text
from xlviz.views.patching import PatchingView

PAGE_LIMIT = 12  # questions per system with no stored table: 2.5-4 s a system on the demo run (2 shared cores, load 9)

__all__ = ["PAGE_LIMIT", "stored_table", "computed_table", "patching_section"]


def _stamp(run_path: str) -> tuple:
    """Changes when the run's manifest, stored analyses, world or exports change."""
    from xlviz.runs import world_path

    run = Path(run_path)
    out = []
    for p in [run / "manifest.json", run / "analyses", world_path(run, "world"), run / "export",
              *sorted((run / "export").glob("*"))]:
        try:
            s = os.stat(p)
            out.append((p.name, s.st_mtime_ns, s.st_size))
        except OSError:
            out.append((p.name, None, None))
    return tuple(out)


@st.cache_data(show_spinner=False, max_entries=32)
def _stored(run_path: str, lang: str, system: str, stamp: tuple) -> tuple[list[dict], str, int] | None:
    from xlviz.analysis.patching_report import find_current

    got = find_current(run_path, lang, system)
    if got is None:
        return None
    table, path = got
    return table["rows"], str(Path(path).relative_to(run_path)), int(table["request"]["limit"])


def _hidden(run_path: str, lang: str, system: str) -> int | None:
    """The hidden size of a system's English export (its config), to run small models on one thread."""
    from xlviz import confined, limits
    from xlviz.analysis.patching_report import _exports

    folder = _exports(Path(run_path), lang, [system])[system][0]
    try:
        cfg = confined.read_json(folder / "config.json", root=run_path, max_bytes=limits.RUN_JSON_MAX_BYTES, what="model config")
    except XlvizError:
        return None
    return cfg.get("hidden_size") if isinstance(cfg, dict) and isinstance(cfg.get("hidden_size"), int) else None


@st.cache_data(show_spinner=False, max_entries=64)
def _computed(run_path: str, lang: str, system: str, limit: int, stamp: tuple) -> tuple[list[dict], dict]:
    from xlviz.analysis.patching_report import compute

    with few_threads(_hidden(run_path, lang, system)):  # the bench's small models: one thread is faster
        table = compute(run_path, lang, [system], limit)
    return table["rows"], table["skipped"]


def _systems(run_path: str, lang: str) -> list[str]:
    from xlviz.analysis.patching_report import _exports

    return list(_exports(Path(run_path), lang, None))


def stored_table(run_path: str, lang: str, system: str) -> tuple[pd.DataFrame, str] | None:
    """Every system's rows of a current stored table holding ``system``, and one line saying
    which (None when the run holds none)."""
    from xlviz.analysis.patching_report import COLUMNS

    stored = _stored(run_path, lang, system, _stamp(run_path))
    if stored is None:
        return None
    rows, rel, limit = stored
    return (pd.DataFrame(rows, columns=list(COLUMNS)),
            f"Read from the run's stored table {rel} (xlviz analyse patching; {limit} questions per system).")


def computed_table(run_path: str, lang: str, systems: list[str]) -> tuple[pd.DataFrame, str]:
    """``systems`` computed here on :data:`PAGE_LIMIT` questions each (cached per system), and
    one line saying so."""
    from xlviz.analysis.patching_report import COLUMNS

    stamp = _stamp(run_path)
    rows, skipped = [], 0
    for s in systems:
        got, sk = _computed(run_path, lang, s, PAGE_LIMIT, stamp)
        rows += got
        skipped += sum(sk.values())
    return (pd.DataFrame(rows, columns=list(COLUMNS)),
            f"Computed here on the first {PAGE_LIMIT} test questions per system ({skipped} skipped: longer than one window "
            f"or no answer token) and not stored: no current table in the run. xlviz analyse patching RUN --language {lang} "
            "stores one (60 questions per system by default), which the page then reads.")


@st.fragment  # opening it, a toggle or a pick inside reruns this section only, not the whole page
def patching_section(dataset: QADataset, lang: str, models: list[ModelChoice], colours: dict[str, str], *,
                     key: str = "xq_patch") -> None:
    """A lazy expander under a run's generated test set (``dataset``): pick a system (first the
    sidebar's, ``models``, of that run); its layer × token-group heatmap of the share restored
    and every system's ``all`` curve with its 95% paragraph interval, each system in its
    colour on the page (``colours``, by model name), else its app-wide one."""
    from xlviz.views.colours import system_colours

    run_path = str(Path(dataset.folder).parents[1])  # <run>/world/qa
    picked = [m for m in models if m.run == dataset.run and m.system]
    exp = st.expander("Patching — where in the model the L2 run parts from the English one", key=key, on_change="rerun",
                      icon=":material/layers:")
    write_url((key,))  # open or closed, in the page's URL (pages/xquad.py restores it)
    with exp:
        if not exp.open:
            return
        with guard("Could not compute the patching table"):
            systems = _systems(run_path, lang)
            if not systems:
                st.info(md_text(f"No system of this run has both an English and a {lang} QA export: nothing to patch."))
                return
            if st.session_state.get(f"{key}_system") not in systems:  # the sidebar's first system of this run
                st.session_state[f"{key}_system"] = next((m.system for m in picked if m.system in systems), systems[0])
            system = st.selectbox("System", systems, key=f"{key}_system")
            stored = stored_table(run_path, lang, system)
            if stored is None:  # the picked system first: its heatmap shows while the others compute
                with st.spinner(f"Patching {system} on {PAGE_LIMIT} questions (one forward pass per layer and token group) …"):
                    rows, source = computed_table(run_path, lang, [system])
            else:
                rows, source = stored
            mine = rows[rows["system"] == system]
            st.caption(md_text(
                f"The L2 run of a test question ({lang}) with one layer's hidden states at one group of aligned token "
                "positions replaced by the English run's (the world's gold word alignment): the share of the English answer "
                "score (start logit of the gold span's first token + end logit of its last) that comes back, 1 = all of it. "
                "Ratio of means over questions; 95% intervals resample whole paragraphs (one seed). " + source))
            if not mine.empty and abs(float(mine["mean_gap"].iloc[0])) < 0.5:
                st.warning(md_text(f"{system}: the L2 run already scores the answer about as the English run does (mean gap "
                                   f"{float(mine['mean_gap'].iloc[0]):+.2f} logits): the shares divide by almost nothing and "
                                   "mean little."), icon=":material/warning:")
            if not mine.empty:
                n = int(mine["n_questions"].iloc[0])
                plotly(PatchingView(rows).heatmap(system, title=f"{system} · {lang}: share of the English answer score restored "
                                                                f"({n} questions; mean English − L2 gap "
                                                                f"{float(mine['mean_gap'].iloc[0]):+.2f} logits)"),
                       key=f"{key}_heatmap")
            by_system = {**system_colours(), **{m.system: colours[m.name] for m in picked if m.name in colours}}
            if stored is None:
                with st.spinner(f"Patching the other systems for their curves ({PAGE_LIMIT} questions each) …"):
                    rows, _ = computed_table(run_path, lang, systems)
            plotly(PatchingView(rows).curve("all", by_system, title=f"Every aligned position patched (all), per system · {lang}"),
                   key=f"{key}_curve")
