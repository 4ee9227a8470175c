"""Which folders a path typed into the app (or set through its URL) may name.

Why: the app may be reached by others (a tunnel, ``xlviz app --host``), and a typed folder is
read and shown: the XQuAD page's folder source shows any ``<name>.<lang>.json``, the model box
tells whether a path exists. So typed paths must resolve (``..`` applied, symlinks followed)
inside one of the configured roots: the checkpoints root, the shared data folder
(:func:`xlviz.data.real.shared_data_dir`) and the models folder (``$XLVIZ_MODELS``, else
``./models``). ``xlviz app --allow-any-path`` (``XLVIZ_ALLOW_ANY_PATH=1``) lifts this for a
machine only its user can reach. A refusal is one message that is the same whether the path
exists or not. Hub ids (``org/name``) are not paths and are not affected.

No Streamlit here: every page calls :func:`confine` and the rule is unit-tested.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from xlviz.errors import XlvizError

ENV_ALLOW_ANY = "XLVIZ_ALLOW_ANY_PATH"
ENV_MODELS = "XLVIZ_MODELS"
REFUSED = ("refused: the app reads only folders inside the checkpoints root, the shared data folder and the models "
           "folder (XLVIZ_MODELS or ./models); start it with xlviz app --allow-any-path to read others")
# what a Hugging Face hub id looks like: "name" or "org/name", no path syntax
_HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?")


def any_path_allowed() -> bool:
    """Whether the user opted in to typed paths anywhere (``XLVIZ_ALLOW_ANY_PATH=1``)."""
    return os.environ.get(ENV_ALLOW_ANY, "").strip().lower() in ("1", "true", "yes")


def models_root() -> Path:
    """The folder for models typed into the app: ``$XLVIZ_MODELS``, else ``./models``."""
    return Path(os.environ.get(ENV_MODELS) or "models")


def allowed_roots() -> list[Path]:
    """The resolved folders typed paths may lie in."""
    from xlviz.runs import checkpoints_root

    roots = [checkpoints_root(), models_root()]
    try:
        from xlviz.data.real import shared_data_dir

        shared = shared_data_dir()
    except (ImportError, XlvizError, OSError):
        shared = None
    if shared is not None:
        roots.append(Path(shared))
    return [Path(os.path.realpath(r)) for r in roots]


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def is_allowed(path: str | os.PathLike) -> bool:
    """Whether ``path`` (``~`` expanded, resolved) lies inside an allowed root (or any path is allowed)."""
    if any_path_allowed():
        return True
    resolved = Path(os.path.realpath(os.path.expanduser(str(path))))
    return any(_inside(resolved, root) for root in allowed_roots())


def confine(text: str | os.PathLike) -> Path:
    """The typed ``text`` as a path (``~`` expanded) if it may be read, else an XlvizError
    whose message (:data:`REFUSED`) does not depend on whether the path exists."""
    raw = str(text).strip()
    if not raw or "\0" in raw or not is_allowed(raw):
        raise XlvizError(REFUSED)
    return Path(os.path.expanduser(raw))


def looks_like_hub_id(text: str) -> bool:
    """``name`` or ``org/name`` without path syntax (no leading ``/``, ``.`` or ``~``, no ``..``)."""
    text = text.strip()
    return bool(_HUB_ID.fullmatch(text)) and ".." not in text


def typed_model(text: str) -> tuple[str, Path | None]:
    """``("hub", None)`` for a hub id, ``("path", path)`` for an allowed local path; else an
    XlvizError (:data:`REFUSED`).

    A hub-id-shaped text that names an existing folder inside an allowed root is that folder
    (``checkpoints/run``); outside them it is a hub id only if no such local path exists,
    since the loader would read a local folder of that name first (then it is refused, as any
    path outside the roots)."""
    raw = text.strip()
    if looks_like_hub_id(raw):
        local = Path(raw)
        if is_allowed(local) and local.exists():
            return "path", local
        if not os.path.lexists(local):
            return "hub", None
    return "path", confine(raw)


__all__ = ["ENV_ALLOW_ANY", "ENV_MODELS", "REFUSED", "allowed_roots", "any_path_allowed", "confine", "is_allowed",
           "looks_like_hub_id", "models_root", "typed_model"]
