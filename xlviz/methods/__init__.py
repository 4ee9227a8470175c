"""The registry of transfer methods: every module of this package that defines ``METHOD``
(a :class:`~xlviz.methods.base.Method`) is found here, so the CLI, the Runs form and the pages
list its systems without naming them.

``resolve(names)`` turns what a user types (system names, a method's name for all its systems,
``all``, ``wu-sweep``) into the list of systems a run trains.
"""

from __future__ import annotations

import importlib
import pkgutil

from xlviz.errors import XlvizError
from xlviz.methods.base import SETTINGS, TRANSLATE_TEST, TRANSLATE_TRAIN, ZERO_SHOT, Method, Stage, setting_of

_SKIP = {"base", "common", "options"}
_METHODS: dict[str, Method] | None = None


def methods() -> dict[str, Method]:
    """Every registered method by name, in module order."""
    global _METHODS
    if _METHODS is None:
        found: dict[str, Method] = {}
        for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
            if info.name in _SKIP:
                continue
            module = importlib.import_module(f"{__name__}.{info.name}")
            method = getattr(module, "METHOD", None)
            if isinstance(method, Method):
                found[method.name] = method
        _METHODS = dict(sorted(found.items(), key=lambda kv: (kv[1].order, kv[0])))
    return _METHODS


def all_systems(layers: int = 4) -> list[str]:
    """Every system ``all`` trains, grouped by method (parametrised families contribute their
    default member, e.g. one ``wu-shared-top-K``)."""
    return [s for m in methods().values() for s in m.default_systems(every=True, layers=layers)]


def method_of(system: str) -> Method:
    for m in methods().values():
        if m.owns(system):
            return m
    raise XlvizError(f"unknown system {system!r}; choose from {all_systems()} (or a group: {', '.join(aliases())})",
                     field="methods")


def aliases(layers: int = 4) -> dict[str, list[str]]:
    """Names that stand for several systems: each method's name, 'all', and the methods' own
    sweeps (e.g. ``wu-sweep``)."""
    out: dict[str, list[str]] = {}
    for m in methods().values():
        out.update(m.sweeps(layers))
    for m in methods().values():
        if not m.owns(m.name):
            out.setdefault(m.name, list(m.default_systems(layers=layers)))
    out["all"] = all_systems(layers)
    return out


def resolve(names: str | list[str], layers: int = 4) -> list[str]:
    """``"monotrans,jointpair-disjoint"`` or ``["all"]`` -> system names, validated, in order
    (groups that depend on the model's depth, such as ``wu-sweep``, for ``layers`` layers)."""
    items = names if isinstance(names, list) else [t.strip() for t in str(names).split(",") if t.strip()]
    if not items or not all(isinstance(i, str) for i in items):
        raise XlvizError(f"expected a list of system names, got {names!r}", field="methods")
    out: list[str] = []
    table = aliases(layers)
    for item in items:
        is_system = any(m.owns(item) for m in methods().values())
        for system in ([item] if is_system else table.get(item, [item])):
            method_of(system)  # validates
            if system not in out:
                out.append(system)
    return out


def row_setting(row: dict) -> str:
    """The setting of a results row: its ``setting`` field; rows written before rows carried
    it get their system's declaration from the registry (so an old ``veco-plugin`` row is
    translate-test), else what the row itself says (``l2_labels``, ``translate_test``)."""
    value = row.get("setting")
    if value in SETTINGS:
        return value
    try:
        return method_of(str(row.get("system"))).setting(str(row.get("system")))
    except XlvizError:
        return setting_of(row)


__all__ = ["Method", "Stage", "methods", "all_systems", "method_of", "aliases", "resolve", "row_setting", "SETTINGS",
           "ZERO_SHOT", "TRANSLATE_TRAIN", "TRANSLATE_TEST"]
