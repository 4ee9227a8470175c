"""One validator for every name that becomes part of a path, and the check that a path lies
inside its run folder.

Why: language codes, run names, ``--name`` and stage names are joined into file paths
(``world/tokenizers/<code>``, ``s2_transfer-<code>``, ``<checkpoints>/<name>-<stamp>``). A
value such as ``../../victim`` reached outside the run folder, and ``xlviz.io.atomic_dir``
replaces an existing target, so it deleted an unrelated folder. Every entry path (CLI flags,
config files, configs read back on resume, the app) goes through :func:`check_name`; every
write of a run goes through :func:`inside` (see ``xlviz.io.confine_writes``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from xlviz.errors import XlvizError, shown_keys

# A short identifier: letters, digits, '-' and '_', starting with a letter or digit.
NAME_MAX = 64
CODE_MAX = 32
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
# Stage names are built from validated codes and the fixed system names (``monotrans+pos``).
_STAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_+-]*")


def _shown(value: object) -> str:
    """The value as one printable line (newlines and control characters escaped)."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def check_name(value: object, *, field: str, path: str | os.PathLike | None = None, what: str = "name",
               max_len: int = NAME_MAX) -> str:
    """``value`` if it is a short identifier (letters, digits, '-', '_'), else an XlvizError
    naming ``field``: never a path, never '..', never a newline."""
    if not isinstance(value, str) or not value:
        raise XlvizError(f"{what} must be a non-empty string, got {_shown(value)}", path=path, field=field)
    if len(value) > max_len or not _NAME.fullmatch(value):
        raise XlvizError(f"{what} {_shown(value)} is not allowed: use at most {max_len} letters, digits, '-' or '_' "
                         "(starting with a letter or digit)", path=path, field=field)
    return value


def check_code(value: object, *, field: str = "languages", path: str | os.PathLike | None = None) -> str:
    """A language code: a short identifier (``en``, ``svo``, ``zh_Hans``)."""
    return check_name(value, field=field, path=path, what="language code", max_len=CODE_MAX)


def check_stage(value: object, *, field: str = "stage", path: str | os.PathLike | None = None) -> str:
    """A stage name (``s2_transfer-svo-pos``, ``s4_monotrans+pos``)."""
    if not isinstance(value, str) or len(value) > 2 * NAME_MAX or not _STAGE.fullmatch(value):
        raise XlvizError(f"stage name {_shown(value)} is not allowed", path=path, field=field)
    return value


def check_text(value: object, *, field: str, path: str | os.PathLike | None = None) -> str:
    """A path given on the command line: no newline or other control character."""
    text = os.fspath(value)
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise XlvizError(f"{_shown(text)} contains a newline or control character", path=None, field=field)
    return text


def inside(root: str | os.PathLike, path: str | os.PathLike) -> Path:
    """``path`` (resolved, symlinks followed) if it lies inside ``root``, else an XlvizError.

    Resolving both sides means neither ``..`` nor a symlink planted in a run folder can carry
    a write outside it."""
    root_r = Path(root).resolve()
    path_r = Path(path).resolve()
    if path_r != root_r and root_r not in path_r.parents:
        raise XlvizError(f"refusing to write outside the run folder {root_r}", path=path)
    return path_r


def check_run_dir(run_dir: str | os.PathLike, root: str | os.PathLike) -> Path:
    """An explicit ``--run-dir``: inside the checkpoints root, no '..', no control characters,
    its own name a valid run name."""
    text = check_text(run_dir, field="--run-dir")
    path = Path(text)
    if ".." in path.parts:
        raise XlvizError("must not contain '..'", path=text, field="--run-dir")
    check_name(path.name, field="--run-dir", what="run folder name")
    root_r = Path(root).resolve()
    resolved = path.resolve()
    if resolved == root_r or root_r not in resolved.parents:
        raise XlvizError(f"lies outside the checkpoints root {root_r}; pass --out (or set XLVIZ_CHECKPOINTS) to the folder "
                         "that should hold it", path=text, field="--run-dir")
    return path


def language_entries(langs: object, *, path: str | os.PathLike | None = None, keys: tuple[str, ...] = ("code", "order", "script"),
                     field: str = "world.languages") -> list[dict]:
    """A config's ``languages`` list as keyword dicts for ``LanguageSpec``, checked: a list
    (``"svo"`` is not read as s, v, o), entries objects with known keys or plain codes, codes
    valid names."""
    if not isinstance(langs, list):
        raise XlvizError(f"must be a list of languages, got {type(langs).__name__}", path=path, field=field)
    out = []
    for entry in langs:
        if isinstance(entry, str):
            entry = {"code": entry}
        if not isinstance(entry, dict):
            raise XlvizError(f"each language must be an object or a code, got {_shown(entry)}", path=path, field=field)
        unknown = sorted(set(entry) - set(keys))
        if unknown:
            raise XlvizError(f"unknown key(s) {shown_keys(unknown)} in a language entry; known: {list(keys)}", path=path, field=f"{field}.{unknown[0]}")
        if "code" not in entry:
            raise XlvizError("a language entry needs a 'code'", path=path, field=f"{field}.code")
        check_code(entry["code"], field=f"{field}.code", path=path)
        for k in keys[1:]:
            if k in entry and not isinstance(entry[k], str):
                raise XlvizError(f"must be a string, got {_shown(entry[k])}", path=path, field=f"{field}.{k}")
        out.append(dict(entry))
    return out


def check_config_names(cfg: object, *, path: str | os.PathLike | None = None) -> None:
    """Check the name-like settings a run config may have (``name``, ``l1``, ``l2``, the
    world's language codes), wherever the config came from."""
    if hasattr(cfg, "name"):
        check_name(getattr(cfg, "name"), field="name", path=path, what="run name")
    for key in ("l1", "l2"):
        if hasattr(cfg, key):
            check_code(getattr(cfg, key), field=key, path=path)
    world = getattr(cfg, "world", None)
    for spec in getattr(world, "languages", None) or []:
        check_code(getattr(spec, "code", spec), field="world.languages.code", path=path)


def check_config(cfg: object, *, path: str | os.PathLike | None = None) -> None:
    """Everything a run config must satisfy wherever it came from (flags, a file, a run folder
    read back on resume): names and codes (:func:`check_config_names`), each setting's type
    and documented range (:func:`xlviz.limits.check_limits`)."""
    from xlviz.limits import check_limits

    check_config_names(cfg, path=path)
    check_limits(cfg, path=path)


__all__ = ["check_name", "check_code", "check_stage", "check_text", "inside", "check_run_dir", "language_entries",
           "check_config_names", "check_config", "NAME_MAX", "CODE_MAX"]
