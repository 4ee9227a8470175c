"""One exception type for bad input, so the CLI and the app can show a clean message.

Every message names the file and/or field at fault; callers never need a traceback to
understand what to fix. Messages echo what the user gave, so they are bounded here: a field
name longer than :data:`SHOWN_MAX` characters is cut with an ellipsis and control
characters in it escaped (a 35,000-character unknown key once made a 71,000-character error
line), and a whole message longer than :data:`MESSAGE_MAX` is cut. Messages that quote a
value use :func:`shown` for the same bound.
"""

from __future__ import annotations

# How much of a value typed by the user an error message repeats, and how long a message may be.
SHOWN_MAX = 80
MESSAGE_MAX = 2000


def _escaped(text: str) -> str:
    """``text`` with newlines and other control characters written as escapes (one line)."""
    return "".join(c if c >= " " and c not in "\x7f\x85\u2028\u2029" else repr(c)[1:-1] for c in text)


def bounded(text: object, limit: int = SHOWN_MAX) -> str:
    """``text`` on one line and at most ``limit`` characters, an ellipsis marking a cut."""
    out = _escaped(str(text))
    return out if len(out) <= limit else out[:limit - 1] + "…"


def shown(value: object, limit: int = SHOWN_MAX) -> str:
    """``repr(value)`` bounded (:func:`bounded`): how a message quotes what the user gave."""
    return bounded(repr(value), limit)


def shown_keys(keys: object, most: int = 5) -> str:
    """Keys the user gave (unknown settings, options) as a bounded list: at most ``most``, each
    :func:`shown`, then how many more."""
    items = list(keys) if isinstance(keys, (list, tuple, set, frozenset, dict)) else [keys]
    text = "[" + ", ".join(shown(k) for k in items[:most]) + "]"
    return text + (f" and {len(items) - most} more" if len(items) > most else "")


class XlvizError(ValueError):
    """Bad input or a failed precondition, with a message meant for people."""

    def __init__(self, message: str, *, path: str | None = None, field: str | None = None):
        message = str(message)
        if len(message) > MESSAGE_MAX:
            message = message[:MESSAGE_MAX - 1] + "…"
        self.message = message
        self.path = str(path) if path is not None else None
        self.field = bounded(field) if field is not None else None
        where = []
        if self.path:
            where.append(_escaped(self.path))
        if self.field:
            where.append(f"field '{self.field}'")
        prefix = ": ".join([" ".join(where)]) if where else ""
        super().__init__(f"{prefix}: {message}" if prefix else message)
