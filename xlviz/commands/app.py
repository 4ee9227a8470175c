"""``xlviz app``: open the lab bench in a browser (``streamlit run app.py``).

The command replaces itself with Streamlit (``exec``), so a kill or Ctrl-C reaches Streamlit
itself instead of leaving it running behind a dead wrapper. Streamlit starts in the repository
root, where it reads ``.streamlit/config.toml`` (file watcher off) as the README command does.

The app listens on 127.0.0.1 only (a tunnel, ``ssh -L 8501:localhost:8501``, reaches it from
elsewhere): anyone who can reach it can start and cancel runs and read what it shows.
``--host ADDR`` opts in to another address, with a warning. Paths typed into the app stay
inside the checkpoints root, the shared data and the models folder unless
``--allow-any-path`` (``XLVIZ_ALLOW_ANY_PATH=1``) is given (:mod:`xlviz.views.paths`).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from xlviz.errors import XlvizError, bounded


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


DEFAULT_ADDRESS = "127.0.0.1"


def host_warning(host: str | None) -> str | None:
    """The warning printed when the app listens on an address other than loopback."""
    if not host or host == DEFAULT_ADDRESS:
        return None
    return (f"xlviz app: warning: listening on {host}: anyone who can reach {host} can use the app (start and cancel "
            "runs, read run folders and the data it shows); prefer the default 127.0.0.1 and an SSH tunnel")


def streamlit_argv(args: argparse.Namespace) -> list[str]:
    """Streamlit's command line: loopback unless ``--host`` names another address."""
    address = getattr(args, "host", None) or DEFAULT_ADDRESS
    # xlviz.ui.serve: Streamlit's own command line, run after the model stack is imported (its docstring)
    argv = [sys.executable, "-m", "xlviz.ui.serve", str(app_path()), "--server.port", str(args.port),
            "--server.address", address]
    if args.headless:
        argv += ["--server.headless", "true"]
    return argv


def check_address(host: str | None, port: object) -> None:
    """Refuse a port outside 1-65535 or an address that does not resolve, in one line, before
    Streamlit starts (it ended in an OverflowError or a socket.gaierror traceback)."""
    import socket

    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise XlvizError(f"must be a port from 1 to 65535, got {port!r}", field="--port")
    address = host or DEFAULT_ADDRESS
    try:
        socket.getaddrinfo(address, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as e:  # socket.gaierror is an OSError; a label over 63 characters a UnicodeError
        reason = getattr(e, "strerror", None) or str(e) or type(e).__name__
        raise XlvizError(f"cannot listen on {bounded(repr(address))}: {reason}", field="--host") from None


def check_root(out: str | None) -> None:
    """An ``--out`` that is not an existing folder is refused before the app starts (it would
    show an empty bench and start runs into a folder the user did not mean)."""
    if out is None:
        return
    from xlviz.runs import checkpoints_root

    root = checkpoints_root(out)
    if not root.is_dir():
        raise XlvizError("no such folder" if not root.exists() else "not a folder", path=root, field="--out")


def handle(args: argparse.Namespace) -> int:
    from xlviz.runs import checkpoints_root

    check_address(getattr(args, "host", None), args.port)
    check_root(getattr(args, "out", None))
    env = dict(os.environ)
    # Absolute, so runs are found where the user expects although streamlit runs in the repo.
    env["XLVIZ_CHECKPOINTS"] = str(checkpoints_root(args.out).resolve())
    if getattr(args, "allow_any_path", False):
        env["XLVIZ_ALLOW_ANY_PATH"] = "1"
    warning = host_warning(getattr(args, "host", None))
    if warning:
        print(warning, file=sys.stderr)
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
    p.add_argument("--host", metavar="ADDR", help="address to listen on (default 127.0.0.1: this machine only; reach it "
                                                  "from elsewhere through an SSH tunnel). Anyone who can reach ADDR can use the app")
    p.add_argument("--allow-any-path", dest="allow_any_path", action="store_true",
                   help="let folders and model paths typed into the app lie anywhere (default: inside the checkpoints "
                        "root, the shared data folder and the models folder, $XLVIZ_MODELS or ./models)")
    p.set_defaults(handler=handle)
