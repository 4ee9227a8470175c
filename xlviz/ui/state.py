"""Page state that outlives its widgets and lives in the URL.

Streamlit forgets a widget's value when a run does not draw it (a page stopped early, another
page open): the widget comes back at its default while the browser may still show the old
choice, so a radio and its chart disagree. :func:`keep` shadows the values in plain session
keys and puts them back. :func:`url_state` mirrors chosen keys into ``st.query_params`` so a
view can be bookmarked, shared and reloaded.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterable

import streamlit as st

SHADOW = "_keep_"
SHOWN = "_label_shown_"


def keep(*keys: str) -> None:
    """Call at the top of a page, before its widgets: restore ``keys`` Streamlit dropped."""
    for k in keys:
        if k in st.session_state:
            st.session_state[SHADOW + k] = st.session_state[k]
        elif SHADOW + k in st.session_state:
            st.session_state[k] = st.session_state[SHADOW + k]


def picks_in_context(key: str, ctx: str, options: Iterable, defaults: Iterable) -> None:
    """Call before the multiselect ``key``: keep its picks within ``options``, and reset them to
    ``defaults`` when its context (the run, the languages, the rows offered) changes. The first
    view of a session keeps the picks a shared URL names, those still offered."""
    mark, options = f"_{key}_ctx", list(options)
    picked = st.session_state.get(key)
    if st.session_state.get(mark) != ctx or not isinstance(picked, list):
        from_url = mark not in st.session_state and isinstance(picked, list)
        st.session_state[mark] = ctx
        kept = [k for k in picked if k in options] if from_url else []
        st.session_state[key] = kept or list(defaults)
    else:
        st.session_state[key] = [k for k in picked if k in options]


def _encode(value) -> str:
    """Plain text for strings (readable URLs) unless they would read back as another type."""
    if isinstance(value, str) and not isinstance(_decode(value), (int, float, bool, list, dict, type(None))):
        return value
    return json.dumps(value)


def _decode(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return text


def url_state(page: str, keys: Iterable[str]) -> None:
    """Restore ``keys`` from the URL the first time a session opens ``page`` (a bookmark, a
    shared link, a reload), then keep the URL on the current values. Call before the widgets."""
    keys = list(keys)
    marker = f"_url_loaded_{page}"
    if not st.session_state.get(marker):
        st.session_state[marker] = True
        for k in keys:
            if k in st.query_params:
                st.session_state[k] = _decode(st.query_params[k])


def write_url(keys: Iterable[str]) -> None:
    """Put the current values of ``keys`` in the URL (call after the widgets). One message to the
    browser for all of them: each change of ``st.query_params`` is sent on its own, and the
    browser redraws the whole page for each (a first visit that sets ten keys one by one redrew
    it ten times)."""
    current = st.query_params.to_dict()
    wanted = dict(current)
    for k in keys:
        if k in st.session_state and st.session_state[k] is not None:
            wanted[k] = _encode(st.session_state[k])
        else:
            wanted.pop(k, None)
    if wanted != current:
        st.query_params.from_dict(wanted)


def checked_int(key: str, lo: int, hi: int, default: int) -> str | None:
    """Put an integer from ``lo`` to ``hi`` in ``st.session_state[key]`` (for a number input)
    before its widget is drawn. A value restored from the URL may be anything (``?xq_limit=abc``,
    a list): it is replaced by ``default`` and the reason returned for the page to show,
    instead of a ValueError traceback; an integer out of range is quietly reset (the data changed)."""
    value = st.session_state.get(key, default)
    problem = None
    if isinstance(value, bool) or not isinstance(value, int):
        problem = f"URL parameter '{key}' must be a whole number, got {str(value)[:40]!r}; using {default}"
        value = default
    if not lo <= value <= hi:
        value = default
    st.session_state[key] = value
    return problem


def checked_float(key: str, lo: float, hi: float, default: float) -> None:
    """Put a number from ``lo`` to ``hi`` in ``st.session_state[key]`` as a float (for a slider)
    before its widget is drawn, else ``default``: the value of a URL, or one kept while the
    widget was not drawn. The widget then takes its value from session state alone (given a
    default as well, Streamlit logs a warning with a stack trace)."""
    v = st.session_state.get(key)
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and lo <= v <= hi
    st.session_state[key] = float(v) if ok else default


def fresh_label(key: str, label: Callable[[Any], str], default: Any = None) -> Callable[[Any], str]:
    """Call before a selectbox whose option labels carry a changing state ("run (running)");
    returns ``label`` for its ``format_func``.

    The browser keeps showing the label it was last sent for the chosen option: when only the
    label changes (a run goes from "starting" to "cancelled") Streamlit does not send the new
    one, and the picker says "(starting)" until the option is picked again. When the chosen
    option's label differs from the one last shown, the value is set again from code, which
    makes Streamlit send the current label. ``default``: the option the widget shows before
    it has a value (its first option, unless the page sets the key first)."""
    value = st.session_state.get(key, default)
    if value is None:
        return label
    try:
        text = label(value)
    except Exception:  # noqa: BLE001 - a value no longer among the options: the widget resets it
        return label
    if st.session_state.get(SHOWN + key, text) != text:
        st.session_state[key] = value
    st.session_state[SHOWN + key] = text
    return label
