"""A method's own settings: one dataclass per method, declared in the method's module and
registered with it (``Method(..., options=PpaOptions)``).

Each field has a type hint, the default a run uses and its help and range in the field's
metadata (:func:`option`). From these the CLI makes one ``--flag`` per field
(:func:`xlviz.commands.transfer.add_method_options`, as ``HfArgumentParser`` does), the Runs
form one widget per field (:func:`xlviz.views.runs.option_fields`), and the run's config one
flat setting per field (:class:`xlviz.transfer.config.TransferConfig`, so ``config.json`` keeps
``"ppa_steps": 1000`` as runs always wrote it). A bad value is one line naming the field.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from dataclasses import dataclass, field
from typing import Any

from xlviz.errors import XlvizError


def option(default: Any, help: str, *, choices: tuple | None = None, low: float | None = None, high: float | None = None,
           low_open: bool = False, high_open: bool = False, zero: str | None = None) -> Any:
    """A method option: its default, one line of help, and what values it takes (``choices``
    for a string; ``low``/``high`` bounds for a number, exclusive when ``*_open``; ``zero``:
    what 0 means when 0 is allowed outside the bounds, e.g. "every pair")."""
    return field(default=default, metadata={"help": help, "choices": choices, "low": low, "high": high,
                                            "low_open": low_open, "high_open": high_open, "zero": zero})


@dataclass(frozen=True)
class OptionField:
    """One option as the CLI and the form see it."""

    name: str
    type: type  # int, float, str or bool
    default: Any
    help: str
    choices: tuple | None
    method: str  # the method that declares it
    meta: dict = field(default_factory=dict, compare=False)  # the option() metadata: range, choices

    def check(self, value: Any) -> None:
        """Raise an XlvizError naming the option unless ``value`` is one it takes."""
        check_value(self.name, self.type, value, self.meta)

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


def _types(cls) -> dict[str, type]:
    return typing.get_type_hints(cls)


def _range_text(kind: str, meta: dict) -> str:
    low, high = meta.get("low"), meta.get("high")
    noun = "an integer" if kind == "int" else "a number"
    if low is not None and high is not None:
        text = f"{noun} in {'(' if meta.get('low_open') else '['}{low:g}, {high:g}{')' if meta.get('high_open') else ']'}"
    elif low is not None and low == 0 and meta.get("low_open"):
        text = "a positive " + noun.split()[-1]
    elif low == 1 and kind == "int":
        text = "a positive integer"
    elif low is not None:
        text = f"{noun} {'above' if meta.get('low_open') else 'of at least'} {low:g}"
    else:
        text = noun
    return f"0 ({meta['zero']}) or {text}" if meta.get("zero") else text


def check_value(name: str, kind: type, value: Any, meta: dict) -> None:
    """Raise an XlvizError naming ``name`` unless ``value`` is a ``kind`` within ``meta``'s range."""
    if kind is bool:
        if not isinstance(value, bool):
            raise XlvizError(f"must be true or false, got {value!r:.60}", field=name)
        return
    if kind is str:
        choices = meta.get("choices")
        if choices and value not in choices:
            raise XlvizError(f"choose from {list(choices)}, got {value!r:.60}", field=name)
        if not isinstance(value, str) or not value.strip():
            raise XlvizError(f"must be a non-empty string, got {value!r:.60}", field=name)
        return
    numeric = (int,) if kind is int else (int, float)
    what = _range_text("int" if kind is int else "float", meta)
    if isinstance(value, bool) or not isinstance(value, numeric) or (kind is float and not math.isfinite(value)):
        raise XlvizError(f"must be {what}, got {value!r:.60}", field=name)
    if meta.get("zero") and value == 0:
        return
    low, high = meta.get("low"), meta.get("high")
    if low is not None and (value <= low if meta.get("low_open") else value < low) \
            or high is not None and (value >= high if meta.get("high_open") else value > high):
        raise XlvizError(f"must be {what}, got {value!r:.60}", field=name)


@dataclass
class MethodOptions:
    """Base of the methods' options dataclasses: every field is checked on construction
    (:func:`check_value` from its type hint and :func:`option` metadata), then :meth:`check`
    for what involves several fields."""

    def __post_init__(self) -> None:
        types = _types(type(self))
        for f in dataclasses.fields(self):
            check_value(f.name, types[f.name], getattr(self, f.name), dict(f.metadata))
        self.check()

    def check(self) -> None:
        """Checks across fields (subclasses); raise an XlvizError naming the field."""

    def check_run(self, cfg: Any) -> None:
        """Checks against the rest of the run's config (e.g. the world's sizes), for every run."""

    @classmethod
    def of(cls, cfg: Any, *, path: str | None = None):
        """The options of the run config ``cfg`` (which stores them flat, one setting per
        field), validated: one line naming the file and the field on a bad value."""
        try:
            opts = cls(**{f.name: getattr(cfg, f.name) for f in dataclasses.fields(cls)})
            opts.check_run(cfg)
        except XlvizError as e:
            raise XlvizError(e.message, path=path or e.path, field=e.field) from None
        return opts


def option_fields(options_cls: type, method: str = "") -> list[OptionField]:
    """The fields of an options dataclass as the CLI and the form use them."""
    types = _types(options_cls)
    return [OptionField(f.name, types[f.name], f.default, f.metadata.get("help", ""), f.metadata.get("choices"), method,
                        dict(f.metadata)) for f in dataclasses.fields(options_cls)]


def all_option_fields() -> list[OptionField]:
    """Every registered method's options, in registry order (a name two methods declare is a bug)."""
    from xlviz.methods import methods

    out: list[OptionField] = []
    seen: dict[str, str] = {}
    for m in methods().values():
        for f in option_fields(m.options, m.name) if m.options is not None else ():
            if f.name in seen:
                raise RuntimeError(f"option {f.name!r} is declared by both {seen[f.name]} and {m.name}")
            seen[f.name] = m.name
            out.append(f)
    return out


def parse_bool(text: str) -> bool:
    """A boolean flag's value: true/false, yes/no, 1/0 (as HfArgumentParser's ``string_to_bool``)."""
    t = str(text).strip().lower()
    if t in ("true", "yes", "1", "y", "t"):
        return True
    if t in ("false", "no", "0", "n", "f"):
        return False
    import argparse

    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


__all__ = ["MethodOptions", "OptionField", "option", "option_fields", "all_option_fields", "check_value", "parse_bool"]
