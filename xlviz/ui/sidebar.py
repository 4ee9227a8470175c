"""The shared sidebar: models and languages picked once, used by every page.

Rendered by ``app.py`` on every rerun (before the page), so its widgets and their values live
for the whole session whatever page is open. Pages read the choice with :func:`current`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import streamlit as st

from xlviz.runs import checkpoints_root, list_runs
from xlviz.views.choices import ModelChoice, check_typed, discover_models, folder_choice, qa_files, run_languages, with_aliases
from xlviz.ui.common import shared_data_dir, tree_stamp
from xlviz.ui.state import url_state, write_url
from xlviz.views.text import md_text

MODELS_KEY = "xlviz_models"
TYPED_KEY = "xlviz_typed_models"
TYPED_CHECK_KEY = "_xlviz_typed_check"
LANGS_KEY = "xlviz_languages"
SELECTION_KEY = "_xlviz_selection"
FALLBACK_LANGUAGES = ["en", "de"]


@dataclass
class Selection:
    models: list[ModelChoice] = field(default_factory=list)
    languages: list[str] = field(default_factory=list)
    available: list[ModelChoice] = field(default_factory=list)

    def qa_models(self) -> list[ModelChoice]:
        return [m for m in self.models if m.qa]


def _language_options() -> tuple[list[str], list[str]]:
    """(all known languages, default choice): runs' languages, then the real data's."""
    langs: list[str] = []
    default: list[str] = []
    for i, run in enumerate(list_runs()):
        rl = run_languages(run)
        if i == 0:
            default = rl[:3]
        langs += rl
    shared = shared_data_dir()
    if shared is not None:
        langs += sorted(qa_files(shared / "xquad"), key=lambda l: (l != "en", l))
        pud = shared / "pud"
        if pud.is_dir():
            langs += sorted(p.name.split("_")[0] for p in pud.glob("*_pud-ud-test.conllu"))
    if not default:
        default = FALLBACK_LANGUAGES
    langs = list(dict.fromkeys(default + langs))
    return langs, default


def _add_typed() -> None:
    text = (st.session_state.get("xlviz_model_path") or "").strip()
    if not text:
        return
    check = check_typed(text)
    st.session_state[TYPED_CHECK_KEY] = check
    if not check.ok:  # one message for the folder, not one per language and page
        return
    typed = list(st.session_state.get(TYPED_KEY, []))
    if text not in typed:
        typed.append(text)
    st.session_state[TYPED_KEY] = typed
    key = folder_choice(text).key
    chosen = list(st.session_state.get(MODELS_KEY, []))
    if key not in chosen:
        chosen.append(key)
    st.session_state[MODELS_KEY] = chosen
    st.session_state["xlviz_model_path"] = ""


def _restore_typed(by_key: dict, options: list) -> None:
    """A typed folder or hub id named in the models (a shared URL, a reload) is added again
    when it passes the same check as when it was typed (:func:`check_typed`): a fresh session
    has no typed models, and the pick was dropped from the URL."""
    picked = st.session_state.get(MODELS_KEY)
    if not isinstance(picked, list):
        return
    typed = list(st.session_state.get(TYPED_KEY, []))
    for k in picked:
        if isinstance(k, str) and k.startswith("path:") and k not in by_key and check_typed(k[len("path:"):]).ok:
            text = k[len("path:"):]
            typed.append(text)
            by_key[k] = folder_choice(text)
            options.append(k)
    st.session_state[TYPED_KEY] = list(dict.fromkeys(typed))


@st.cache_resource(show_spinner=False, max_entries=4)
def _discovered(root: str, stamp: tuple) -> tuple[ModelChoice, ...]:
    return tuple(discover_models(root))


def models_found() -> list[ModelChoice]:
    """:func:`~xlviz.views.choices.discover_models` of the checkpoints root, shared by every
    session while nothing under it changed (:func:`~xlviz.ui.common.tree_stamp`): reading every
    run's manifest, configs and folders took 40-80 ms of each page visit with one run."""
    root = checkpoints_root()
    return list(_discovered(str(root), tree_stamp(root)))


def render() -> Selection:
    """Draw the sidebar's pickers and return (and remember) the selection."""
    choices = models_found()
    typed = [folder_choice(t) for t in st.session_state.get(TYPED_KEY, [])]
    by_key = {c.key: c for c in choices}
    for t in typed:
        by_key.setdefault(t.key, t)
    options = list(by_key)

    url_state("sidebar", (MODELS_KEY, LANGS_KEY))  # models and languages from a bookmarked or shared URL
    _restore_typed(by_key, options)
    if MODELS_KEY not in st.session_state:  # the newest run's exported systems
        exports = [c for c in choices if c.group == "export"]
        st.session_state[MODELS_KEY] = [c.key for c in exports if c.run == exports[0].run][:4] if exports else []
    else:  # a run folder may have been deleted since
        st.session_state[MODELS_KEY] = [k for k in st.session_state[MODELS_KEY] if k in by_key]

    lang_options, lang_default = _language_options()
    if LANGS_KEY not in st.session_state:
        st.session_state[LANGS_KEY] = lang_default
    for lang in st.session_state[LANGS_KEY]:
        if lang not in lang_options:
            lang_options.append(lang)

    with st.sidebar:
        st.markdown("### Models and languages")
        st.multiselect(
            "Models",
            options,
            key=MODELS_KEY,
            format_func=lambda k: by_key[k].label if k in by_key else k,
            placeholder="pick run models or add one below",
            help="Named method or language · kind · run. Encoders: one choice per language's embeddings; "
            "QA choices (system · QA (languages)) are a run's zero-shot exports, one model per language. "
            "Typed paths or hub ids read every language. Tables use short names (the run is added when "
            "the picks come from several runs).",
        )
        with st.expander("Add a model folder or hub id"):
            st.text_input(
                "Local folder or Hugging Face id",
                key="xlviz_model_path",
                placeholder="e.g. checkpoints/run/export/monotrans-sov or bert-base-multilingual-cased",
                on_change=_add_typed,
            )
            st.button("Add model", on_click=_add_typed, key="xlviz_add_model")
            check = st.session_state.get(TYPED_CHECK_KEY)
            if check is not None:
                (st.caption if check.ok else st.error)(md_text(check.message))
        st.multiselect(
            "Languages",
            lang_options,
            key=LANGS_KEY,
            accept_new_options=True,
            help="Languages shown side by side on the XQuAD page; the first two form the pair on the "
            "Attention page. Type a code to add one.",
        )
        root = checkpoints_root()
        st.caption("Runs folder: " + md_text(_display(root)))

    write_url((MODELS_KEY, LANGS_KEY))
    selection = Selection(
        models=with_aliases([by_key[k] for k in st.session_state[MODELS_KEY] if k in by_key]),
        languages=list(st.session_state[LANGS_KEY]),
        available=list(by_key.values()),
    )
    st.session_state[SELECTION_KEY] = selection
    return selection


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path.resolve()).replace(os.path.expanduser("~"), "~")


def current() -> Selection:
    """The selection the sidebar made in this rerun (empty when a page runs on its own)."""
    sel = st.session_state.get(SELECTION_KEY)
    return sel if isinstance(sel, Selection) else Selection()


def page_setup() -> None:
    """First line of every page: draw the shared sidebar if ``app.py`` did not run.

    Streamlit runs a file of a ``pages/`` folder on its own (its older multipage mode) until
    some session has executed ``st.navigation``: e.g. the first request after a server restart
    that goes straight to ``/runs``, and every AppTest rerun. Then ``app.py`` (which draws the
    sidebar) is skipped, so draw it here, under the entrypoint's script hash so its widgets keep
    their values across pages, and switch Streamlit to ``st.navigation`` mode for later runs
    (a served app reruns at once through ``app.py``: otherwise that first view showed the pages
    folder's file names as its navigation).
    """
    from xlviz.ui.serve import limit_threads

    limit_threads()  # app.py's thread limits also when it is skipped (AppTest ran pages with two BLAS threads)
    try:
        from streamlit.runtime.pages_manager import PagesManager
        from streamlit.runtime.scriptrunner import get_script_run_ctx
    except ImportError:  # pragma: no cover - Streamlit internals moved
        return
    if not PagesManager.uses_pages_directory:
        return
    PagesManager.uses_pages_directory = False
    from streamlit.runtime import Runtime

    if Runtime.exists() and type(Runtime.instance()) is Runtime:  # served; AppTest installs a mock runtime
        # a served app: run again through app.py, now in st.navigation mode, so this first view
        # (a bookmark or shared link right after a server start) gets the app's navigation and
        # not the pages folder's file names
        st.rerun()
    ctx = get_script_run_ctx()
    st.set_page_config(page_title="xlviz", page_icon=":material/translate:", layout="wide")
    if ctx is None:
        render()
        return
    with ctx.run_with_active_hash(ctx.pages_manager.main_script_hash):
        render()
