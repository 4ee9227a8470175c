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

    # transformers builds its table of checkpoint key renamings (hundreds of compiled patterns) on
    # the first from_pretrained: 0.09 s of the first page that loads a model
    try:
        from transformers.conversion_mapping import get_checkpoint_conversion_mapping
    except ImportError:  # another transformers: nothing to warm
        pass
    else:
        get_checkpoint_conversion_mapping("bert")

    # what every page imports (tables, figures, the views), so a first visit imports nothing and
    # their modules are frozen below with the rest
    import pandas
    import plotly.graph_objects  # noqa: F401
    import pyarrow  # noqa: F401

    import xlviz.methods

    xlviz.methods.methods()  # the plug-ins, imported on first use (Probing's first visit spent 0.1 s there)
    # a Styler's first render imports pandas' style module and compiles its jinja2 templates
    # (0.1-0.2 s of a first visit to a page with a formatted table)
    pandas.DataFrame({"a": [1.0]}).style.format(precision=1).to_html()
    _first_figures()  # plotly express among them (it builds its docstrings on import)

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


def _first_figures() -> None:
    """One small figure of each kind the pages draw: plotly imports a trace's and a layout part's
    classes on first use and loads its default template then (0.15-0.3 s of a page's first visit)."""
    import pandas
    import plotly.express as px
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    df = pandas.DataFrame({"x": [0, 1], "y": [0.0, 1.0], "c": ["a", "b"]})
    px.line(df, x="x", y="y", color="c", line_dash="c", facet_col="c", markers=True).to_dict()
    px.bar(df, x="x", y="y", color="c", error_y="y").to_dict()
    fig = make_subplots(rows=1, cols=2)
    fig.add_trace(go.Heatmap(z=[[0.0, 1.0]], colorbar=dict(thickness=10)), row=1, col=1)
    fig.add_trace(go.Scatter(x=[0], y=[0], mode="lines+markers", error_y=dict(array=[0.1])), row=1, col=2)
    fig.add_shape(type="rect", x0=0, x1=1, y0=0, y1=1)
    fig.add_annotation(text="a", x=0, y=0)
    fig.update_layout(template="plotly", title=dict(text="t"), legend=dict(orientation="h")).to_dict()


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
