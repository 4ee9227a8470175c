"""Settings declared once: a dataclass field with its one default and a line of help
(:func:`setting`). The command line's flags (:func:`add_flags`) and the merge of the flags a
command got into a config (:func:`given`) are generated from these fields, as
``transformers.HfArgumentParser`` generates its flags from dataclasses, so a setting's name,
type, default and help are written in one place.

Why not ``HfArgumentParser`` itself: it is a parser of its own and cannot add flags to an
existing subcommand's parser (``xlviz transfer``, ``demo`` and ``sweep`` share flags); it gives
each flag the field's default, where a flag left out must leave the config file's value (here
every flag defaults to None); it adds ``--field_name`` spellings beside ``--field-name`` and
``--no_x`` complements to booleans, which would change every command's ``--help`` and usage;
and it has no nested options (a run's ``world``, its source's ``data``) nor settings read from
text (``--languages 'x:tr+determiner=before'``).
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from dataclasses import MISSING, dataclass, field
from typing import Any, Callable, Iterable


def setting(default: Any = MISSING, help: str | Callable[[], str] = "", *, default_factory: Callable[[], Any] | Any = MISSING,
            nargs: int | str | None = None, metavar: str | tuple[str, ...] | None = None, parse: Callable[[Any], Any] | None = None,
            blank: bool = False, nested: bool = False) -> Any:
    """A setting: its one default (or ``default_factory``) and one line of ``help`` (a
    function for help read from a registry, called when a parser is built). For its flag:
    ``nargs`` (a list setting given as separate words: ``"+"`` or a count; without it a list
    setting is a comma list), ``metavar``, ``parse`` (the flag's text -> the setting's value),
    ``blank`` (an empty value on the command line leaves the setting unset, as an absent flag
    does) and ``nested`` (a setting holding other settings, such as a run's ``world``: no flag
    of its own; a dataclass's fields get theirs)."""
    meta = {"help": help, "nargs": nargs, "metavar": metavar, "parse": parse, "blank": blank, "nested": nested}
    return field(default=default, default_factory=default_factory, metadata=meta)


def declared(cls: type, name: str) -> dict:
    """The :func:`setting` metadata of ``cls``'s field ``name``, from the nearest class that
    declares it so: a subclass that only changes a default (a source's options) keeps the help
    and flag of its base's setting. Empty for a field that is no declared setting."""
    for klass in cls.__mro__:
        f = getattr(klass, "__dataclass_fields__", {}).get(name)
        if f is not None and "help" in f.metadata:
            return dict(f.metadata)
    return {}


@dataclass(frozen=True)
class Setting:
    """One declared setting as the command line and the forms see it."""

    name: str  # the field's name; its flag's dest
    path: str  # where a config keeps it: "pretrain_steps", "world.corpus_documents", "data.l1"
    type: type  # int, float, str, bool, list or dict
    default: Any  # the field's default (a default_factory's value)
    meta: dict = field(default_factory=dict, compare=False)

    @property
    def help(self) -> str:
        text = self.meta.get("help") or ""
        return text() if callable(text) else text

    @property
    def flag(self) -> str:
        """``--pretrain-steps``; ``--no-lowercase`` for a setting on by default (the flag turns it off)."""
        return ("--no-" if self.type is bool and self.default is True else "--") + self.name.replace("_", "-")

    def text(self, value: Any) -> str:
        """``value`` as this setting's flag reads it."""
        if isinstance(value, (list, tuple)):
            return ",".join(str(v) for v in value)
        return str(int(value)) if self.type is int else str(value)


def _value_type(hint: Any) -> type:
    """``int | None`` -> int, ``list[str]`` -> list, ``WorldConfig`` -> WorldConfig."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(args) == 1:
        hint = args[0]
    origin = typing.get_origin(hint)
    return origin if origin is not None else hint


def settings_of(cls: type, prefix: str = "") -> list[Setting]:
    """The declared settings of dataclass ``cls`` in field order; a nested dataclass setting's
    own (``world.corpus_documents``) in its place."""
    hints = typing.get_type_hints(cls)
    out: list[Setting] = []
    for f in dataclasses.fields(cls):
        meta = declared(cls, f.name)
        if not meta:
            continue
        kind = _value_type(hints[f.name])
        if meta.get("nested"):
            if dataclasses.is_dataclass(kind):
                out += settings_of(kind, prefix=f"{prefix}{f.name}.")
            continue
        default = f.default if f.default is not MISSING else (f.default_factory() if f.default_factory is not MISSING else None)
        out.append(Setting(f.name, prefix + f.name, kind, default, meta))
    return out


# The parser's record of the settings it has flags for: a command's own flag of the same name
# (``xlviz sweep --parallel``, cells at once) is then no setting.
FLAGGED = "_setting_flags"


def add_flags(parser: argparse.ArgumentParser, settings: Iterable[Setting], *, note: str = "") -> None:
    """One flag per setting (a name given twice, by the world and a source, gets one flag),
    each defaulting to None so that a flag left out leaves the config's value; ``note``
    starts each help line. The parser records which settings it flagged (:func:`given`)."""
    flagged = list(parser.get_default(FLAGGED) or ())
    for s in settings:
        if s.name in flagged:
            continue
        flagged.append(s.name)
        kw: dict[str, Any] = {"dest": s.name, "default": None, "help": (note + s.help).replace("%", "%%") or None}
        if s.type is bool:
            kw["action"] = "store_false" if s.default is True else "store_true"
        else:
            kw["type"] = {int: int, float: float}.get(s.type)
            if s.type is list and s.meta.get("nargs"):
                kw["nargs"] = s.meta["nargs"]
            if s.meta.get("metavar"):
                kw["metavar"] = s.meta["metavar"]
        parser.add_argument(s.flag, **kw)
    parser.set_defaults(**{FLAGGED: tuple(flagged)})


def given(args: argparse.Namespace, settings: Iterable[Setting]) -> list[tuple[Setting, Any]]:
    """``(setting, value)`` for every flag given in ``args``: a ``parse`` setting's text parsed,
    another list setting's comma list split, a ``blank`` setting's empty value left out. Only the
    settings ``args``'s parser flagged (all, for a namespace made by hand)."""
    flagged = getattr(args, FLAGGED, None)
    out = []
    for s in settings:
        value = getattr(args, s.name, None)
        if value is None or flagged is not None and s.name not in flagged or s.meta.get("blank") and not value:
            continue
        if s.meta.get("parse") is not None:
            value = s.meta["parse"](value)
        elif s.type is list:
            value = [t.strip() for t in value.split(",") if t.strip()] if isinstance(value, str) else list(value)
        out.append((s, value))
    return out


__all__ = ["Setting", "setting", "declared", "settings_of", "add_flags", "given", "FLAGGED"]
