"""The registry of transfer methods: every module of this package that defines ``METHOD``
(a :class:`~xlviz.methods.base.Method`) is found here, so the CLI, the Runs form and the pages
list its systems without naming them.

``resolve(names)`` turns what a user types (system names, a method's name for all its systems,
``all``, ``wu-sweep``) into the list of systems a run trains.
"""

from __future__ import annotations

import importlib
import pkgutil
import re

from xlviz.errors import XlvizError
from xlviz.methods.base import SETTINGS, TRANSLATE_TEST, TRANSLATE_TRAIN, ZERO_SHOT, Method, Stage, resources_of, setting_of

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


def row_resources(row: dict) -> dict | None:
    """What a results row's system read beyond L1 QA labels (:func:`~xlviz.methods.base.resources_of`):
    its ``resources`` field; rows written before rows carried it get one derived from the
    row's own fields (``parallel_pairs``, ``l2_labels``, ``translate_test``,
    ``wechsel_dictionary``) and its system's declaration, with ``"recorded": False`` and no
    dictionary size (a WECHSEL row of that time read the whole gold dictionary); None when the
    system is unknown and the row says nothing."""
    value = row.get("resources")
    if isinstance(value, dict):
        return value
    system = str(row.get("system"))
    try:
        declared = method_of(system).resources(system)
    except XlvizError:
        declared = None
    if declared is None and not any(k in row for k in ("parallel_pairs", "l2_labels", "translate_test")):
        return None
    uses = {"parallel_pairs": row.get("parallel_pairs", (declared or {}).get("parallel_pairs", 0)),
            "l2_labels": row.get("l2_labels", (declared or {}).get("l2_labels", False)),
            "translate_test": row.get("translate_test", (declared or {}).get("test_time_translation", False))}
    dictionary = (declared or {}).get("dictionary")
    if row.get("wechsel_dictionary") in ("gold", "seed"):
        size = row.get("wechsel_seed_size") if row.get("wechsel_dictionary") == "seed" else None
        dictionary = {"size": size if isinstance(size, int) else None, "source": "gold", "split": "all"}
    elif row.get("wechsel_dictionary") == "identical":
        dictionary = {"size": None, "source": "induced", "split": "train"}
    if dictionary is not None:
        dictionary = {**dictionary, "size": None} if dictionary.get("source") == "induced" else dictionary
    return {**resources_of(uses, dictionary), "recorded": False}


def _count(n) -> str:
    if not isinstance(n, int) or isinstance(n, bool):
        return "?"
    if n >= 1000:
        return f"{n / 1000:.1f}".rstrip("0").rstrip(".") + "k"
    return str(n)


def resources_label(resources: dict | None) -> str:
    """A short label for a row's ``resources``: ``pairs 10k · dict 2k gold · L2 labels ·
    test-time translation``; ``L1 labels only`` when it read nothing more; ``not recorded``
    without one. A dictionary that includes the held-out words scored by word translation says
    ``(all)``; one a row did not record says so (``derived``)."""
    if not isinstance(resources, dict):
        return "not recorded"
    parts = []
    if resources.get("parallel_pairs"):
        parts.append(f"pairs {_count(resources['parallel_pairs'])}")
    d = resources.get("dictionary")
    if isinstance(d, dict):
        size = "" if d.get("size") is None else f"{_count(d.get('size'))} "
        source = d.get("source") if d.get("source") in ("gold", "induced") else "?"  # a hand-edited file: no free text
        parts.append(f"dict {size}{source}" + (" (all)" if d.get("split") == "all" else ""))
    if resources.get("l2_labels"):
        parts.append("L2 labels")
    if resources.get("test_time_translation"):
        parts.append("test-time translation")
    text = " · ".join(parts) or "L1 labels only"
    return text + (" (derived)" if resources.get("recorded") is False else "")


_DICT_SIZE = re.compile(r"dict (\d+(?:\.\d+)?k?) ")


def combine_labels(labels) -> str:
    """One label for several rows of a system (languages, seeds): the label when they agree;
    a size range when only the dictionary's size differs (``dict 124-127 gold``: each L2 and
    seed has its own split); else the labels joined with "; "."""
    unique = list(dict.fromkeys(labels))
    if len(unique) <= 1:
        return unique[0] if unique else "not recorded"
    sizes = [m.group(1) for m in map(_DICT_SIZE.search, unique) if m]
    if len(sizes) == len(unique) and len({_DICT_SIZE.sub("dict # ", label) for label in unique}) == 1:
        value = lambda t: float(t[:-1]) * 1000 if t.endswith("k") else float(t)  # noqa: E731
        return _DICT_SIZE.sub(f"dict {min(sizes, key=value)}-{max(sizes, key=value)} ", unique[0], count=1)
    return "; ".join(unique)


__all__ = ["Method", "Stage", "methods", "all_systems", "method_of", "aliases", "resolve", "row_setting", "row_resources", "resources_label", "combine_labels", "resources_of", "SETTINGS",
           "ZERO_SHOT", "TRANSLATE_TRAIN", "TRANSLATE_TEST"]
