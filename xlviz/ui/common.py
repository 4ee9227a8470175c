"""Streamlit helpers every page uses: error display and cached loaders.

Models are cached with ``st.cache_resource`` (one shared copy per process, keyed by path and the
folder's modification time so a re-exported model is reloaded); computed results with
``st.cache_data``. Anything that can fail because of input (a bad path, a hub id that cannot be
reached, a malformed file) is shown with ``st.error`` and a clear message, never a traceback.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Callable, Iterator, TypeVar

import streamlit as st

from xlviz.errors import XlvizError
from xlviz.models.reference import ModelSpec
from xlviz.models.threads import SMALL_HIDDEN, few_threads  # noqa: F401  (the pages' thread policy, shared with the CLI)
from xlviz.views.text import md_text

T = TypeVar("T")

REPO = Path(__file__).resolve().parents[2]
PLOTLY_CONFIG = {"displaylogo": False, "toImageButtonOptions": {"format": "png", "scale": 2}}


class Shown(Exception):
    """Raised by :func:`guard` users to stop a section after its error was displayed."""


def message_of(e: BaseException) -> str:
    """A one-paragraph message for people: XlvizError as is, others as ``Type: first line``."""
    if isinstance(e, XlvizError):
        return str(e)
    text = str(e).strip() or repr(e)
    lines = [l for l in text.splitlines() if l.strip()]
    first = " ".join(lines[:3]) if lines else text
    if len(first) > 500:
        first = first[:497] + "..."
    return f"{type(e).__name__}: {first}"


@contextlib.contextmanager
def guard(what: str, *, stop: bool = False) -> Iterator[None]:
    """Show any exception inside as ``st.error("<what>: <message>")``; optionally stop the page.

    Streamlit's own control-flow exceptions (rerun, stop) pass through.
    """
    try:
        yield
    except Shown:
        if stop:
            st.stop()
    except Exception as e:  # noqa: BLE001 - the app must show a message, not a traceback
        if type(e).__module__.startswith("streamlit"):
            raise
        st.error(md_text(f"{what}: {message_of(e)}"), icon=":material/error:")  # names and paths from disk
        if stop:
            st.stop()


def refused_warning(what: str, refused: list[tuple[str, str]]) -> None:
    """One warning for models built on a degenerate stage: ``(name, reason)`` pairs, one line
    per reason (a run's one stuck body often refuses several models); each item escaped."""
    if not refused:
        return
    by_reason: dict[str, list[str]] = {}
    for name, why in refused:
        by_reason.setdefault(why, []).append(name)
    st.warning(f"{what}, built on a degenerate stage (no result):\n\n" + "\n".join(
        "- " + md_text(f"{', '.join(names)}. Why: {why}") for why, names in by_reason.items()), icon=":material/block:")


def shared_data_dir() -> Path | None:
    """``../shared/data`` (real XQuAD, PUD, Tatoeba) when it exists; $XLVIZ_SHARED_DATA wins."""
    try:
        from xlviz.data.real import shared_data_dir as find
    except ImportError:
        find = None
    if find is not None:
        try:
            found = find()
            if found is not None and Path(found).is_dir():
                return Path(found)
        except XlvizError:
            return None
    env = os.environ.get("XLVIZ_SHARED_DATA")
    for c in ([Path(env)] if env else []) + [REPO.parent / "shared" / "data", Path.cwd().parent / "shared" / "data"]:
        if c.is_dir():
            return c.resolve()
    return None


# The app's one model cache (every page and the analyses load through it). 24 models: the
# Probing page's default view alone scores 9 (each system's L1 and L2 models and the floor);
# with 8 every new tab evicted and reloaded all of them (1.1 s of a 1.8 s render).
@st.cache_resource(show_spinner=False, max_entries=24)
def load_cached(path: str, tokenizer: str | None, floor: tuple, task: str, stamp: str, eager: bool = True):
    """``(model, tokenizer)`` of ``ModelSpec(path, tokenizer, *floor)`` for ``task``, in eval mode.
    ``eager``: eager attention, whose weights the attention views read (the analyses encode with
    the library's default attention, as a run's own stored encodings were). For QA, a typed
    folder without a QA head still answers (badly) rather than failing; exports and fine-tuned
    folders have theirs. ``stamp``: :meth:`ModelSpec.stamp`, so changed files load again."""
    from xlviz.models.reference import load_spec

    spec = ModelSpec(os.path.expanduser(path), os.path.expanduser(tokenizer) if tokenizer else None, *floor)
    options: dict = {"attn_implementation": "eager"} if eager else {}
    if task == "qa" and spec.floor_seed is None:
        options["new_head"] = "ok"
    return load_spec(spec, task, **options)


NO_FLOOR = (None, "random", None)


def _load_model(path: str, tokenizer: str | None, task: str):
    """A model folder (or hub id) and its tokenizer through :func:`load_cached`, eager attention."""
    return load_cached(path, tokenizer, NO_FLOOR, task, ModelSpec(path, tokenizer).stamp())


def load_model(ref: ModelSpec, task: str = "base"):
    """``(model, tokenizer)`` for a model reference, cached; raises XlvizError-like exceptions."""
    with st.spinner(f"Loading {Path(ref.path).name or ref.path} …"):
        return _load_model(ref.path, ref.tokenizer, task)


def model_key(ref: ModelSpec, task: str) -> str:
    """A string that changes when the model's files change: the cache key for results."""
    return f"{ref.stamp()}|{task}"


def file_stamp(path: str | os.PathLike) -> str:
    p = Path(path)
    try:
        st_ = p.stat()
        return f"{p.resolve()}|{st_.st_mtime_ns}|{st_.st_size}"
    except OSError:
        return str(p)


def tree_stamp(root: str | os.PathLike, depth: int = 5) -> tuple:
    """What a change under ``root`` changes: every folder down to ``depth`` levels with its
    modification time (a file or folder added, removed or renamed into it: atomic writes) and
    every JSON file there with its time and size (one rewritten in place). A key for what is
    read from a checkpoints tree (the sidebar's model list), costing stats instead of reading
    each run's manifest, configs and folders again at every page visit."""
    out: list = []

    def walk(folder: str, level: int) -> None:
        try:
            entries = list(os.scandir(folder))
            out.append((folder, os.stat(folder).st_mtime_ns))
        except OSError:
            return
        for e in entries:
            try:
                if e.is_symlink():
                    continue
                if e.is_dir():
                    if level < depth:
                        walk(e.path, level + 1)
                elif e.name.endswith(".json"):
                    st_ = e.stat()
                    out.append((e.path, st_.st_mtime_ns, st_.st_size))
            except OSError:
                continue

    walk(os.fspath(root), 1)
    return tuple(out)


NA = "n/a"  # what a missing number reads in every table (st.dataframe's placeholder): never "None"


FIGURES_KEY = "_xlviz_figures"  # title -> figure: the analyses drawn this session, for run reports


from xlviz.views.figures import tidy  # noqa: E402  (shared with the notebook API)


_DIGESTS: dict[int, tuple] = {}  # id(array) -> (weak reference, digest) of read-only arrays


def array_digest(a) -> str:
    """An ``st.cache_data`` key for a numpy array (``hash_funcs=ARRAY_HASH``): a digest of all its
    bytes. Streamlit's own hashes a random sample of 100,000 values of an array of 500,000 or
    more (two arrays equal on the sample share a key), and drawing the sample took as long as
    hashing every byte. A read-only array (a run's stored encodings, shared by every session:
    tens of MB that each visit of the Alignment page hashed again, 0.2 s) is hashed once per
    process: numpy refuses writes into it, so its bytes stay those that were hashed."""
    import hashlib
    import weakref

    import numpy as np

    memo, b = True, a
    while memo and isinstance(b, np.ndarray):  # read-only, and so is every array it views
        memo, b = not b.flags.writeable, b.base
    if memo:
        hit = _DIGESTS.get(id(a))
        if hit is not None and hit[0]() is a:
            return hit[1]
    c = np.ascontiguousarray(a)
    digest = f"{c.shape}|{c.dtype.str}|" + hashlib.blake2b(c.view(np.uint8).reshape(-1) if c.size else b"", digest_size=20).hexdigest()
    if memo:
        key = id(a)
        _DIGESTS[key] = (weakref.ref(a, lambda _ref, key=key: _DIGESTS.pop(key, None)), digest)
    return digest


ARRAY_HASH = {"numpy.ndarray": array_digest}  # Streamlit's hash_funcs take a type's full name


@st.cache_resource(show_spinner=False, max_entries=64)
def _shared_figure(name: str, digest: str, _build, _args: tuple, _kwargs: dict):
    fig = tidied(_build(*_args, **_kwargs))
    if fig is not None:
        fig._xlviz_shared = True
    return fig


def tidied(fig):
    """``fig`` tidied (:func:`tidy`) and marked so: a figure shared by sessions (a
    ``st.cache_resource`` value) is tidied before any session sees it, and :func:`plotly`
    then leaves it as it is."""
    if fig is not None:
        tidy(fig)
        fig._xlviz_tidy = True
    return fig


def shared_figure(build, *args, **kwargs):
    """``build(*args, **kwargs)``: a plotly figure built once per process for the same
    arguments and shared by every session and rerun. Plotly takes tenths of a second to a few
    seconds to build a chart (the Attention page's model view: 2.6 s of its warm render); a
    copy out of ``st.cache_data`` still costs a quarter of that. Keyed by the arguments'
    content (their pickle's digest), so other numbers are another figure, never a stale one.
    Shared, so never changed after: :func:`plotly` only tidies it, once. Arguments that cannot
    be pickled build the figure each time."""
    import hashlib
    import pickle

    try:
        digest = hashlib.sha1(pickle.dumps((args, sorted(kwargs.items())), protocol=5)).hexdigest()
    except Exception:  # noqa: BLE001 - e.g. a lambda among the arguments: not shared
        return build(*args, **kwargs)
    name = f"{getattr(build, '__module__', '')}.{getattr(build, '__qualname__', build)}"
    return _shared_figure(name, digest, build, args, kwargs)


def vega_spec_of(fig) -> dict | None:
    """:func:`xlviz.views.vega.vega_spec` of ``fig``, kept on a shared figure (:func:`shared_figure`:
    one object for every session and rerun, never changed) so that it is worked out once."""
    from xlviz.views.vega import vega_spec

    if not getattr(fig, "_xlviz_shared", False):
        return vega_spec(fig)
    if not hasattr(fig, "_xlviz_vega"):
        fig._xlviz_vega = vega_spec(fig)
    return fig._xlviz_vega


def open_only(label: str, draw: Callable[..., T], *args, key: str, expanded: bool = False, icon: str | None = None) -> T | None:
    """An expander that runs ``draw(*args)`` inside it only while it is open (Streamlit's
    ``on_change="rerun"``): a closed panel sends the browser nothing, which is most of what a
    page costs on a small machine. Returns what ``draw`` returned, None while closed."""
    box = st.expander(label, expanded=expanded, key=key, on_change="rerun", icon=icon)
    with box:
        return draw(*args) if box.open else None


def plotly(fig, *, key: str | None = None, export: bool = True, on_select=None, vega: bool = False) -> None:
    """Show a plotly figure with its modebar, and export buttons: PNG and SVG (rendered on
    click by kaleido with the system chromium, offline) and the data as CSV. ``on_select``: a
    callback run (before the rerun) when a point is clicked; its selection is ``st.session_state[key]``.
    ``vega``: drawn on screen with Vega-Lite where :func:`xlviz.views.vega.vega_spec` can draw it (a
    first view's chart: a new tab then need not load plotly.js), and, with ``on_select``, where
    the spec has a click selection (the model view's thumbnails); the exports stay Plotly's."""
    if not getattr(fig, "_xlviz_tidy", False):  # a shared figure (shared_figure) is tidied once
        tidy(fig)
        fig._xlviz_tidy = True
    from xlviz.views.vega import vega_clicks

    spec = vega_spec_of(fig) if vega else None
    clicks = vega_clicks(spec) if spec is not None else []
    if spec is not None and (on_select is None or clicks):
        # the key in the spec too: Streamlit keeps a chart's key only when it has a selection (tests find charts by it)
        kw = {"on_select": on_select, "selection_mode": clicks} if on_select is not None else {}
        st.vega_lite_chart(spec={**spec, "usermeta": {**spec.get("usermeta", {}), "key": key}}, key=key,
                           width="content" if "width" in spec else "stretch", **kw)
    elif on_select is None:
        st.plotly_chart(fig, key=key, config=PLOTLY_CONFIG, width="stretch")
    else:
        st.plotly_chart(fig, key=key, config=PLOTLY_CONFIG, width="stretch", on_select=on_select, selection_mode="points")
    if not export:
        return
    name = (key or "figure").replace(" ", "-")
    title = fig.layout.title.text if fig.layout.title and fig.layout.title.text else name
    st.session_state.setdefault(FIGURES_KEY, {})[title] = fig
    from xlviz.views.export import figure_csv, figure_image

    def image(fmt: str):
        def make() -> bytes:
            try:
                return figure_image(fig, fmt)
            except XlvizError as e:  # the download then holds the reason, not a broken image
                return f"xlviz: {e}".encode()
        return make

    with st.popover("Export", icon=":material/download:"):
        st.download_button("PNG", image("png"), file_name=f"xlviz-{name}.png", mime="image/png",
                           key=f"{name}_png", on_click="ignore")
        st.download_button("SVG", image("svg"), file_name=f"xlviz-{name}.svg", mime="image/svg+xml",
                           key=f"{name}_svg", on_click="ignore")
        st.download_button("Data (CSV)", lambda: figure_csv(fig), file_name=f"xlviz-{name}.csv", mime="text/csv",
                           key=f"{name}_csv", on_click="ignore")


# --- QA data and predictions ------------------------------------------------------------------

CHUNK = 64


@st.cache_data(show_spinner=False, max_entries=64)
def load_examples(file: str, stamp: str):
    """Examples of one SQuAD file (``stamp`` = path, mtime and size: reloads when it changes)."""
    from xlviz.data.squad import load_squad

    return load_squad(file)


def examples_of(file: str):
    return load_examples(file, file_stamp(file))


@st.cache_data(show_spinner=False, max_entries=64)
def load_articles(file: str, stamp: str) -> list[str] | None:
    """The file's own article words when it declares them (generated L2 test sets)."""
    from xlviz.data.squad import language_articles, read_squad_json

    return language_articles(read_squad_json(file), file)


def articles_of(file: str) -> list[str] | None:
    return load_articles(file, file_stamp(file))


@st.cache_data(show_spinner=False, max_entries=2048)
def _predict_chunk(path: str, tokenizer: str | None, mkey: str, file: str, fstamp: str, ids: tuple[str, ...],
                   max_length: int, doc_stride: int, max_answer_length: int = 30) -> dict:
    from xlviz.evaluation.qa_predict import predict_qa

    model, tok = _load_model(path, tokenizer, "qa")
    by_id = {ex.id: ex for ex in load_examples(file, fstamp)}
    examples = [by_id[i] for i in ids if i in by_id]
    # batch 64: as the run's own evaluation (xlviz.transfer.pipeline), and fewer tiny forwards
    with few_threads(model):
        return predict_qa(model, tok, examples, max_length=max_length, doc_stride=doc_stride, batch_size=64,
                          max_answer_length=max_answer_length)


def qa_decoding(ref: ModelSpec):
    """The decoding settings for a QA model: its run's (``config.json``), else SQuAD's capped
    by the model's positions (see :func:`xlviz.views.qa.run_decoding`)."""
    from xlviz.views.qa import capped, run_decoding

    model, _ = load_model(ref, "qa")
    max_pos = int(getattr(model.config, "max_position_embeddings", 512) or 512)
    return capped(run_decoding(ref.path, max_pos), max_pos)


@st.cache_data(show_spinner=False, max_entries=256)
def cached_digest(path: str, stamp: str) -> str | None:
    """:func:`xlviz.io.folder_digest` of a folder, once per ``stamp`` (:meth:`ModelSpec.stamp`:
    renewed when the files change). The one digest cache of the app's pages."""
    from xlviz.io import folder_digest

    return folder_digest(path)


def same_model_key(ref: ModelSpec) -> str:
    """Equal for two references holding the same files (a run's English exports of several
    systems are one fine-tuned model), so it is computed once; else the path."""
    stamp = ref.stamp()
    a = cached_digest(ref.path, stamp)
    b = cached_digest(ref.tokenizer_path, stamp) if ref.tokenizer else ""
    return f"{a}|{b}" if a is not None and b is not None else model_key(ref, "qa")


def saved_or_none(ref: ModelSpec, file: str, ids: list[str]) -> dict | None:
    """The run's own saved predictions when ``ref`` is its export and ``file`` its test set."""
    from xlviz.views.qa import read_saved_predictions, saved_predictions_file

    saved = saved_predictions_file(ref.path, file)
    return read_saved_predictions(saved, ids) if saved is not None else None


def _tokenizer_only(path: str, tokenizer: str | None):
    """The tokenizer of a model folder (or its ``tokenizer`` folder) without loading the model;
    None when it is not a local folder with tokenizer files (a hub id, a run stage folder)."""
    from xlviz.models.reference import TOKENIZER_FILES, load_tokenizer

    folder = Path(os.path.expanduser(tokenizer or path))
    if not folder.is_dir() or not any((folder / f).is_file() for f in TOKENIZER_FILES):
        return None
    return load_tokenizer(folder)


@st.cache_data(show_spinner=False, max_entries=256)
def _unk_rate(path: str, tokenizer: str | None, mkey: str, file: str, fstamp: str, n: int) -> float:
    tok = _tokenizer_only(path, tokenizer)
    if tok is None:
        _, tok = _load_model(path, tokenizer, "qa")
    unk = getattr(tok, "unk_token_id", None)
    if unk is None:
        return 0.0
    texts = []
    for ex in load_examples(file, fstamp)[:n]:
        texts += [ex.question, ex.context]
    ids = [i for enc in tok(list(dict.fromkeys(texts)), add_special_tokens=False)["input_ids"] for i in enc]
    return sum(i == unk for i in ids) / len(ids) if ids else 0.0


def unk_rate(ref: ModelSpec, file: str, n: int = 50) -> float:
    """Share of [UNK] tokens when the model's tokenizer reads the first ``n`` questions and
    contexts of a data file: high when a run's model meets another run's invented language.
    Cached per model files and data file: a rerun loads no model (it used to load every picked
    model, and more than the model cache holds, so each rerun reloaded some)."""
    return _unk_rate(ref.path, ref.tokenizer, model_key(ref, "qa"), file, file_stamp(file), n)


@st.cache_resource(show_spinner=False, max_entries=32)
def _tokenizer_of(path: str, tokenizer: str | None, mkey: str):
    """A model's tokenizer, loaded once per process and model files (the readability checks of
    every page and side share it); the model itself only when its folder has no tokenizer."""
    tok = _tokenizer_only(path, tokenizer)
    if tok is None:
        _, tok = _load_model(path, tokenizer, "base")
    return tok


@st.cache_data(show_spinner=False, max_entries=256)
def _readability(path: str, tokenizer: str | None, mkey: str, texts: tuple, who: str):
    from xlviz.analysis.readability import readability

    return readability(_tokenizer_of(path, tokenizer, mkey), texts, who)


def readability_of(ref: ModelSpec, texts, who: str = "the model's tokenizer"):
    """:func:`xlviz.analysis.readability.readability` of ``texts`` under ``ref``'s tokenizer,
    cached per model files and texts (only the tokenizer is loaded when the folder has one)."""
    from xlviz.analysis.readability import MAX_TEXTS

    texts = tuple(dict.fromkeys(t for t in texts if isinstance(t, str)))[:MAX_TEXTS]
    return _readability(ref.path, ref.tokenizer, model_key(ref, "base"), texts, who)


def data_readability(ref: ModelSpec, file: str, n: int = 50, who: str = "the model's tokenizer"):
    """Readability of the first ``n`` questions and contexts of a SQuAD file under ``ref``'s tokenizer,
    cached per model files and state of the data file (no copy of the file's questions and no
    hash of their texts per call: the XQuAD page checks every model and language each render)."""
    return _data_readability(ref.path, ref.tokenizer, model_key(ref, "base"), file, file_stamp(file), n, who)


@st.cache_data(show_spinner=False, max_entries=256)
def _data_readability(path: str, tokenizer: str | None, mkey: str, file: str, fstamp: str, n: int, who: str):
    from xlviz.analysis.readability import MAX_TEXTS

    texts = []
    for ex in load_examples(file, fstamp)[:n]:
        texts += [ex.question, ex.context]
    texts = tuple(dict.fromkeys(t for t in texts if isinstance(t, str)))[:MAX_TEXTS]
    return _readability(path, tokenizer, mkey, texts, who)


def predict(ref: ModelSpec, file: str, ids: list[str], progress=None, done: int = 0, total: int | None = None) -> dict:
    """Predictions of one QA model on the questions ``ids`` of one file, chunk by chunk.

    The run's saved predictions are used when the model and the data are the run's own (the
    page then shows the run's numbers). Otherwise each chunk is computed with the run's
    decoding settings and cached (keyed by the model's files, the data file and the ids), so a
    second look, or raising the number of questions, only computes what is new. ``progress``
    is a ``st.progress`` element updated per chunk over ``done .. total`` chunks of the page.
    """
    saved = saved_or_none(ref, file, ids)
    if saved is not None:
        return saved
    mkey = model_key(ref, "qa")
    fstamp = file_stamp(file)
    dec = qa_decoding(ref)
    out: dict = {}
    for lo in range(0, len(ids), CHUNK):
        chunk = tuple(ids[lo : lo + CHUNK])
        out.update(_predict_chunk(ref.path, ref.tokenizer, mkey, file, fstamp, chunk, dec.max_length, dec.doc_stride,
                                  dec.max_answer_length))
        done += 1
        if progress is not None and total:
            progress.progress(min(done / total, 1.0), text=f"Answering questions … {min(done, total)}/{total} batches")
    return out


# --- attention ----------------------------------------------------------------------------------

@st.cache_data(show_spinner=False, max_entries=64)
def _attention(path: str, tokenizer: str | None, mkey: str, text_a, text_b, max_length: int):
    from xlviz.analysis.attention import attention_maps

    model, tok = _load_model(path, tokenizer, "base")
    return attention_maps(model, tok, text_a, text_b, max_length=max_length)


@st.cache_data(show_spinner=False, max_entries=256)
def _text_stats(path: str, tokenizer: str | None, mkey: str, text: str) -> dict:
    from xlviz.views.attention import text_stats

    _, tok = _load_model(path, tokenizer, "base")
    return text_stats(tok, text)


def typed_text_stats(ref: ModelSpec, text: str) -> dict:
    """[UNK] share and characters per token of a typed text under the model's tokenizer."""
    load_model(ref, "base")
    return _text_stats(ref.path, ref.tokenizer, model_key(ref, "base"), text)


def max_positions(ref: ModelSpec) -> int:
    """How many tokens the model can read at once (RoBERTa-style models keep ``pad + 1``
    position rows for padding, so fewer than ``max_position_embeddings``)."""
    model, _ = load_model(ref, "base")
    cfg = model.config
    n = int(getattr(cfg, "max_position_embeddings", 0) or getattr(cfg, "n_positions", 0) or 512)
    if getattr(cfg, "model_type", "") in ("roberta", "xlm-roberta", "camembert", "xlm-roberta-xl"):
        n -= int(getattr(cfg, "pad_token_id", 1) or 1) + 1
    return n


def attention(ref: ModelSpec, text_a, text_b=None, max_length: int = 128):
    """All attention maps of one input (a sentence or a pair), cached per model and text."""
    load_model(ref, "base")  # shows the loading spinner and errors once
    return _attention(ref.path, ref.tokenizer, model_key(ref, "base"), text_a, text_b, int(max_length))


@st.cache_data(show_spinner=False, max_entries=64)
def _mixed_attention(path_a: str, tok_a: str | None, path_b: str, tok_b: str | None, keys: str, text_a, text_b, max_length: int):
    from xlviz.analysis.attention import mixed_pair_attention_maps

    model_a, tokenizer_a = _load_model(path_a, tok_a, "base")
    model_b, tokenizer_b = _load_model(path_b, tok_b, "base")
    return mixed_pair_attention_maps(model_a, tokenizer_a, tokenizer_b, model_b.get_input_embeddings(), text_a, text_b, max_length=max_length)


def shares_body(ref_a: ModelSpec, ref_b: ModelSpec) -> bool:
    """Whether two models differ only in their token embeddings (a MONOTRANS run's languages),
    so a pair can go through one body with each sentence embedded in its own vocabulary."""
    from xlviz.analysis.attention import same_body

    model_a, _ = load_model(ref_a, "base")
    model_b, _ = load_model(ref_b, "base")
    return same_body(model_a, model_b)


def mixed_attention(ref_a: ModelSpec, ref_b: ModelSpec, text_a, text_b, max_length: int = 128):
    """Attention of A + B through A's body, B embedded with B's vocabulary; cached."""
    keys = model_key(ref_a, "base") + "||" + model_key(ref_b, "base")
    return _mixed_attention(ref_a.path, ref_a.tokenizer, ref_b.path, ref_b.tokenizer, keys, text_a, text_b, int(max_length))


def has_own_cross_attention(ref: ModelSpec) -> bool:
    """Whether the model carries a cross-attention module of its own (VECO's), by its config."""
    from xlviz.analysis.attention import has_cross_attention

    model, _ = load_model(ref, "base")
    return has_cross_attention(model)


@st.cache_data(show_spinner=False, max_entries=64)
def _own_cross_attention(path_a: str, tok_a: str | None, path_b: str, tok_b: str | None, keys: str, text_a, text_b, max_length: int):
    from xlviz.analysis.attention import cross_attention_maps

    model_a, tokenizer_a = _load_model(path_a, tok_a, "base")
    model_b, tokenizer_b = _load_model(path_b, tok_b, "base")
    return cross_attention_maps(model_a, tokenizer_a, model_b, tokenizer_b, text_a, text_b, max_length=max_length)


def own_cross_attention(ref_a: ModelSpec, ref_b: ModelSpec, text_a, text_b, max_length: int = 128):
    """A's tokens attending over B's last layer through A's cross-attention module; cached."""
    keys = model_key(ref_a, "base") + "||" + model_key(ref_b, "base")
    return _own_cross_attention(ref_a.path, ref_a.tokenizer, ref_b.path, ref_b.tokenizer, keys, text_a, text_b, int(max_length))


@st.cache_data(show_spinner=False, max_entries=16)
def _query_keys(path: str, tokenizer: str | None, mkey: str, text_a, text_b, max_length: int):
    from xlviz.analysis.attention import query_key_vectors

    model, tok = _load_model(path, tokenizer, "base")
    return query_key_vectors(model, tok, text_a, text_b, max_length=max_length)


def query_keys(ref: ModelSpec, text_a, text_b=None, max_length: int = 128):
    """Every layer's query and key vectors of one input (the neuron view), cached per model and text."""
    load_model(ref, "base")
    return _query_keys(ref.path, ref.tokenizer, model_key(ref, "base"), text_a, text_b, int(max_length))


@st.cache_data(show_spinner=False, max_entries=16)
def _mixed_query_keys(path_a: str, tok_a: str | None, path_b: str, tok_b: str | None, keys: str, text_a, text_b, max_length: int):
    from xlviz.analysis.attention import mixed_pair_query_key_vectors

    model_a, tokenizer_a = _load_model(path_a, tok_a, "base")
    model_b, tokenizer_b = _load_model(path_b, tok_b, "base")
    return mixed_pair_query_key_vectors(model_a, tokenizer_a, tokenizer_b, model_b.get_input_embeddings(), text_a, text_b,
                                        max_length=max_length)


def mixed_query_keys(ref_a: ModelSpec, ref_b: ModelSpec, text_a, text_b, max_length: int = 128):
    """Query and key vectors of A + B through A's body, B embedded with B's vocabulary; cached."""
    keys = model_key(ref_a, "base") + "||" + model_key(ref_b, "base")
    return _mixed_query_keys(ref_a.path, ref_a.tokenizer, ref_b.path, ref_b.tokenizer, keys, text_a, text_b, int(max_length))


# --- the XQuAD page's numbers -------------------------------------------------------------------
# Bootstrap intervals and paired tests resample every cell thousands of times (seconds); the same
# rows give the same numbers (fixed seeds), so they are computed once per set of rows, not on
# every rerun (a click on "Next", a new tab).

@st.cache_data(show_spinner=False, max_entries=64)
def score_matrix_ci(rows, metric: str, models: list[str], languages: list[str]):
    from xlviz.views import qa

    return qa.score_matrix_ci(rows, metric, models, languages)


@st.cache_data(show_spinner=False, max_entries=32)
def cell_intervals(rows, degenerate: dict | None = None):
    """``degenerate``: ``{model: [languages]}`` whose rows are no result (left out)."""
    from xlviz.views import qa

    return qa.cell_intervals(rows, degenerate=degenerate)


@st.cache_data(show_spinner=False, max_entries=32)
def paired_tests(rows, setting_of: dict | None = None, degenerate: dict | None = None):
    """Pairs of one setting only; degenerate cells left out (:func:`xlviz.views.qa.paired_tests`)."""
    from xlviz.views import qa

    return qa.paired_tests(rows, setting_of=setting_of, degenerate=degenerate)
