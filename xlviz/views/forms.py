"""The Runs and Sweeps forms' fields, generated from the run settings
(:mod:`xlviz.transfer.settings`): a form lists the settings it shows by name, and each field
starts at its setting's default unless the forms' small budget (:data:`FORM_BUDGET`) or the
form itself (a start of its own, such as the Runs form's one target language) says otherwise.
So a setting's type, default and range are declared once, and the CLI and the forms agree."""

from __future__ import annotations

from dataclasses import field, make_dataclass
from typing import Any

from xlviz.errors import XlvizError
from xlviz.limits import SIZE_LIMITS
from xlviz.transfer.settings import named_settings

# The forms' small starting budget: a tiny model, a few hundred steps and a small world finish
# in a few minutes on a laptop CPU (the settings' own defaults are the CLI's paper-like sizes,
# xlviz.transfer.settings.RunSettings). The one place where a form starts from other values than
# the settings' defaults; every other setting a form shows starts at its default.
FORM_BUDGET: dict[str, Any] = {
    "model_size": "tiny", "pretrain_steps": 120, "transfer_steps": 60, "finetune_steps": 60, "batch_size": 16,
    "mlm_batch_size": 64, "corpus_documents": 1000, "qa_train_paragraphs": 300, "qa_test_paragraphs": 40,
    "workers": 0,  # stages at once: one per core (at most 4), as the demo
}


def form_class(name: str, base: type, settings: tuple[str, ...], start: dict[str, Any],
               extra: tuple[tuple[str, type, Any], ...] = ()) -> type:
    """A dataclass ``name`` with ``base``'s methods: one field per setting of ``settings`` (its
    type; a list setting as a tuple), starting at ``start``'s value or else the setting's
    default, then the form's own ``extra`` fields (``make_dataclass`` triples)."""
    fields = []
    for s in named_settings(settings):
        value = start.get(s.name, s.default)
        kind = tuple if s.type is list else s.type
        fields.append((s.name, kind, field(default=tuple(value) if isinstance(value, list) else value)))
    cls = make_dataclass(name, [*fields, *extra], bases=(base,))
    cls.__module__, cls.__doc__ = base.__module__, base.__doc__
    return cls


def check_sizes(form: Any, settings: tuple[str, ...]) -> None:
    """Each integer setting of the form with a documented range (:data:`xlviz.limits.SIZE_LIMITS`,
    docs/reliability.md) within it: one line naming the field."""
    for s in named_settings(settings):
        if s.type is int and s.name in SIZE_LIMITS:
            lo, hi = SIZE_LIMITS[s.name]
            if not lo <= int(getattr(form, s.name)) <= hi:
                raise XlvizError(f"must be between {lo} and {hi}", field=s.name)


def form_flags(form: Any, settings: tuple[str, ...]) -> list[tuple[Any, str]]:
    """``(setting, value as its flag reads it)`` for the form's settings, in the form's order."""
    return [(s, s.text(getattr(form, s.name))) for s in named_settings(settings)]


__all__ = ["FORM_BUDGET", "form_class", "check_sizes", "form_flags"]
