"""The app process's start: one BLAS thread, and the model stack imported before the first page
(``python -m xlviz.ui.serve APP [streamlit options]``, what ``xlviz app`` runs).

BLAS (numpy's OpenBLAS) gets one thread (:func:`limit_threads`, called by ``app.py`` and by a page
run on its own): the app's matrices are small (hundreds of sentences, hidden sizes up to a
thousand), where a second thread gains little on an idle machine and its spinning wait costs
many times the work on a shared one (measured: 20 SVDs of 128x128 took 0.12 s with one thread,
3.5 s with two, load 7.9 on 2 cores).

Importing torch and transformers' BERT classes takes about 8 CPU seconds on a 2-core AMD EPYC
(torch 2.4; transformers 5.6, which pulls torch.distributed, sympy and scipy.optimize in), more
than all the rest of a page's first visit. With ``streamlit run app.py`` that cost falls on the
first page that shows a model (Attention's first visit took 9 s). Here it is paid once, in the
main thread, before Streamlit starts listening: the server prints its URL a few seconds later,
and no visitor waits for an import. Imports run before any session exists, so no script thread
can meet a half-imported module (importing them in a background thread beside a page's script
did: two threads importing one package side by side can meet a half-initialised module
("cannot import name 'BertForMaskedLM' from 'transformers'" on the Runs page), and making every
other import wait for it meant replacing ``builtins.__import__``).

``streamlit run app.py`` keeps working (the first page with a model then imports the stack).
"""

from __future__ import annotations

import gc
import importlib
import logging
import os
import pkgutil
import sys
import threading
import time

_started = False
_lock = threading.Lock()


def limit_threads() -> None:
    """Idempotent: the first call in a process limits BLAS threads to one."""
    global _started
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


def preload() -> float:
    """Import what every model view needs, as the pages import it; seconds taken."""
    start = time.perf_counter()
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as app.py: before torch is imported
    limit_threads()  # one BLAS thread, before numpy's or torch's pools start
    import torch  # noqa: F401
    import transformers  # noqa: F401
    from transformers import (  # noqa: F401 - the classes xlviz.models.loading resolves for the bench's models
        AutoModel,
        AutoModelForMaskedLM,
        AutoModelForQuestionAnswering,
        AutoTokenizer,
        BertForMaskedLM,
        BertForQuestionAnswering,
        BertModel,
    )

    import xlviz.models.loading  # noqa: F401 - the one loading path, with its own imports

    # what every page imports (tables, figures, the views), so a first visit imports nothing and
    # their modules are frozen below with the rest
    import pandas  # noqa: F401
    import plotly.graph_objects  # noqa: F401
    import pyarrow  # noqa: F401

    import xlviz.ui
    import xlviz.views

    # their ``st.cache_data`` functions, defined before Streamlit's runtime exists, say they will
    # use an in-memory cache (they ask the runtime again when called): not a message for the user
    quiet = logging.getLogger("streamlit.runtime.caching.cache_data_api")

    def no_runtime(record: logging.LogRecord) -> bool:  # a filter: Streamlit resets its loggers' levels when it reads its config
        return not str(record.msg).startswith("No runtime found")

    quiet.addFilter(no_runtime)
    try:
        for package in (xlviz.views, xlviz.ui):
            for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
                importlib.import_module(info.name)
    finally:
        quiet.removeFilter(no_runtime)

    # The stack leaves about a million objects for the garbage collector to walk at every full
    # collection, which Streamlit's allocations trigger during each page run: a page that does
    # nothing took 0.6 s longer in a new tab with them (1.97 s against 1.39 s without the stack,
    # bench/bench_pages_browser.py). Imported modules live as long as the process, so they are
    # moved out of the collector's sight (as servers that preload do, e.g. gunicorn's --preload
    # with gc.freeze).
    gc.collect()
    gc.freeze()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    took = preload()
    print(f"xlviz app: model stack imported in {took:.1f} s", file=sys.stderr, flush=True)
    from streamlit.web import cli

    from xlviz.ui.base_url import install

    install()  # each page's HTML names the server's root: no failed probe of /<page>/_stcore/health
    sys.argv = ["streamlit", "run", *args]
    cli.main(prog_name="streamlit")  # Streamlit's own command line in this process (as ``python -m streamlit``)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
