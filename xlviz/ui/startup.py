"""Once per app process, at its first script run: thread limits for small work and the model
stack imported in the background.

Why: the first page that needs a model would otherwise pay for importing torch and
transformers (about a third of the Alignment page's cold render) after drawing everything
before it; in a background thread the import overlaps the page's own start (reading runs, the
sidebar, the data).

Two threads importing one package side by side can meet a half-initialised module (Python
3.11's import deadlock detection hands one of them the module unfinished: "cannot import name
'BertForMaskedLM' from 'transformers'" on the Runs page). So while the background import runs,
an ``import`` statement of that stack in any other thread first waits for it to finish
(``_import``, in place of ``builtins.__import__`` until then; a finder on ``sys.meta_path``
cannot wait, it runs under the global import lock the background thread needs). A page that
needs a model waits at most for what is left of the import.

BLAS (numpy's OpenBLAS) gets one thread: the app's matrices are small (hundreds of sentences,
hidden sizes up to a thousand), where a second thread gains little on an idle machine and its
spinning wait costs many times the work on a shared one (measured: 20 SVDs of 128x128 took
0.12 s with one thread, 3.5 s with two, load 7.9 on 2 cores).
"""

from __future__ import annotations

import builtins
import os
import sys
import threading

_started = False
_lock = threading.Lock()
_thread: threading.Thread | None = None

# imported in the background, heaviest first (what loading a BERT-like model needs)
MODEL_STACK = ("torch", "transformers", "transformers.modeling_utils", "transformers.models.bert.modeling_bert",
               "transformers.models.auto.modeling_auto")
# packages that other threads import only after the background import is done
STACK_ROOTS = frozenset({"torch", "transformers", "accelerate", "safetensors", "tokenizers", "huggingface_hub", "sympy",
                         "functorch", "triton"})


_imported = {name: threading.Event() for name in MODEL_STACK}  # set when the background import has it


def _import_model_stack() -> None:
    import importlib

    for name in MODEL_STACK:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a page importing it later shows the error where it matters
            return
        _imported[name].set()


_original_import = None


def _loaded(name: str, fromlist) -> bool:
    """Whether importing ``name`` (and taking ``fromlist`` from it) imports nothing new: the
    module is in ``sys.modules``, finished, and has every name asked for (looked up in its
    ``__dict__``: a lazy module's ``getattr`` would import)."""
    module = sys.modules.get(name)
    if module is None or getattr(getattr(module, "__spec__", None), "_initializing", False):
        return False
    return all(item in vars(module) for item in fromlist or ())


def _import(name, globals=None, locals=None, fromlist=(), level=0):
    """``builtins.__import__`` while the background import runs: an absolute import of the model
    stack from another thread waits for it first, unless it imports nothing new (``from torch
    import nn`` once torch is in: the Home page needs no more)."""
    if level == 0 and name.partition(".")[0] in STACK_ROOTS and not _loaded(name, fromlist):
        t = _thread
        if name in _imported and t is not None and t is not threading.current_thread():
            while t.is_alive() and not _imported[name].wait(0.05):  # that module, not the whole stack
                pass
        if not _loaded(name, fromlist):
            wait()
    return _original_import(name, globals, locals, fromlist, level)


def _background() -> None:
    try:
        _import_model_stack()
    finally:
        if builtins.__import__ is _import:
            builtins.__import__ = _original_import


def start() -> None:
    """Idempotent: the first call limits BLAS threads and starts the background import."""
    global _started, _thread, _original_import
    with _lock:
        if _started:
            return
        _started = True
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # libraries loaded from now on
    os.environ.setdefault("MKL_NUM_THREADS", "1")
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=1, user_api="blas")  # those already loaded (numpy)
    except Exception:  # noqa: BLE001 - without threadpoolctl the defaults stay
        pass
    if "transformers" in sys.modules:  # already imported (a test, a second app in one process)
        return
    _original_import = builtins.__import__
    _thread = threading.Thread(target=_background, name="xlviz-import-models", daemon=True)
    builtins.__import__ = _import
    _thread.start()


def wait() -> None:
    """Let the background import finish first (a no-op in the background thread, and after)."""
    t = _thread
    if t is not None and t.is_alive() and t is not threading.current_thread():
        t.join()
