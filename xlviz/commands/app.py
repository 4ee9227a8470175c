"""``xlviz app``: open the lab bench in a browser (``streamlit run app.py``).

The command replaces itself with Streamlit (``exec``), so a kill or Ctrl-C reaches Streamlit
itself instead of leaving it running behind a dead wrapper. Streamlit starts in the repository
root, where it reads ``.streamlit/config.toml`` (file watcher off) as the README command does.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from xlviz.errors import XlvizError


def app_path() -> Path:
    """``app.py`` beside the installed package (the repository root for an editable install)."""
    import xlviz

    path = Path(xlviz.__file__).resolve().parent.parent / "app.py"
    if not path.is_file():
        raise XlvizError(
            "app.py not found beside the xlviz package; install the package in editable mode "
            "(pip install -e .) from a checkout of the repository",
            path=path,
        )
    return path


def streamlit_argv(args: argparse.Namespace) -> list[str]:
    argv = [sys.executable, "-m", "streamlit", "run", str(app_path()), "--server.port", str(args.port)]
    if args.headless:
        argv += ["--server.headless", "true"]
    return argv


def handle(args: argparse.Namespace) -> int:
    from xlviz.runs import checkpoints_root

    env = dict(os.environ)
    # Absolute, so runs are found where the user expects although streamlit runs in the repo.
    env["XLVIZ_CHECKPOINTS"] = str(checkpoints_root(args.out).resolve())
    argv = streamlit_argv(args)
    print("xlviz app:", " ".join(argv), file=sys.stderr)
    sys.stderr.flush()
    os.chdir(app_path().parent)
    os.execve(argv[0], argv, env)  # does not return
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("app", help="open the lab bench (Streamlit app) in a browser")
    p.add_argument("--port", type=int, default=8501, help="port to serve on (default 8501)")
    p.add_argument("--out", help="checkpoints folder with the runs (default $XLVIZ_CHECKPOINTS or ./checkpoints)")
    p.add_argument("--headless", action="store_true", help="do not open a browser window")
    p.set_defaults(handler=handle)
