"""One exception type for bad input, so the CLI and the app can show a clean message.

Every message names the file and/or field at fault; callers never need a traceback to
understand what to fix.
"""

from __future__ import annotations


class XlvizError(ValueError):
    """Bad input or a failed precondition, with a message meant for people."""

    def __init__(self, message: str, *, path: str | None = None, field: str | None = None):
        self.message = message
        self.path = str(path) if path is not None else None
        self.field = field
        where = []
        if self.path:
            where.append(self.path)
        if field:
            where.append(f"field '{field}'")
        prefix = ": ".join([" ".join(where)]) if where else ""
        super().__init__(f"{prefix}: {message}" if prefix else message)
