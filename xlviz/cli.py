"""The command line: ``xlviz <command>`` (also ``python -m xlviz``).

Every job the app can start is a command here. Each command lives in its own module under
``xlviz.commands`` exposing ``register(subparsers)``; modules import heavy libraries only
inside their handlers so ``xlviz --help`` stays instant.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys

# OpenMP threads that spin while waiting make torch several times slower whenever another
# process shares the cores (the app's server beside a training run, two runs at once); a
# passive wait costs little when the machine is idle. Must be set before torch is imported.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import xlviz.commands
from xlviz import __version__
from xlviz.errors import XlvizError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="xlviz", description=__doc__.splitlines()[0],
                                     epilog="Size settings have documented ranges (docs/reliability.md); run and language "
                                            "names are letters, digits, '-' and '_'.")
    parser.add_argument("--version", action="version", version=f"xlviz {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(xlviz.commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"xlviz.commands.{info.name}")
        if hasattr(module, "register"):
            module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    try:
        result = args.handler(args)
    except XlvizError as e:
        print(f"xlviz {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"xlviz {args.command}: interrupted", file=sys.stderr)
        return 130
    except OSError as e:
        # the machine, not the code: disk full, permission denied, a vanished file
        where = f"{e.filename}: " if e.filename else ""
        print(f"xlviz {args.command}: error: {where}{e.strerror or e}".replace("\n", " "), file=sys.stderr)
        return 2
    finally:
        close_distributed()
    return int(result or 0)


def close_distributed() -> None:
    """Under ``accelerate launch``, tear the process group down before the interpreter exits.
    Left to exit-time destructors, gloo's threads sometimes abort a rank after a finished run
    ("terminate called without an active exception", SIGABRT), failing the launch."""
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    raise SystemExit(main())
