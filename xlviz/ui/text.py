"""Text from disk or from the URL, made safe to put into Streamlit's markdown.

Why: ``st.markdown``, ``st.caption``, ``st.error`` / ``st.warning`` / ``st.info`` /
``st.success``, subheaders and widget labels all render markdown. A run folder from elsewhere
(its ``status.json`` error, stage names, its folder name, a log line) or a shared link's query
parameters would otherwise put links, images (fetched by the browser from any host), HTML,
``:material/...:`` icons, ``:red[...]`` directives or ``$...$`` maths into the page. Strings from
disk or the URL go into markdown only through :func:`md_text`, which backslash-escapes every
ASCII punctuation character (CommonMark makes each of them literal), so ``[x](y)``,
``![x](y)``, ``<b>``, ``:material/x:``, ``http://host`` (no autolink once its ``:`` is escaped),
headings, lists and tables all show as the literal characters. Long text goes into
``st.code`` / ``st.text``, which never render markdown.
"""

from __future__ import annotations

import string

_ESCAPES = {ord(c): "\\" + c for c in string.punctuation}


def md_text(value: object, *, max_chars: int | None = 2000) -> str:
    """``value`` as markdown that shows exactly its characters (newlines become spaces; at
    most ``max_chars`` characters, cut with an ellipsis)."""
    text = str(value)
    text = "".join(" " if c in "\r\n\t\x0b\x0c\x85\u2028\u2029" else c for c in text)
    text = "".join(c for c in text if c >= " " and c != "\x7f")
    if max_chars is not None and len(text) > max_chars:
        text = text[: max_chars - 1] + "…"
    return text.translate(_ESCAPES)


def md_join(values, sep: str = ", ") -> str:
    """Several strings from disk or the URL, each escaped, joined by ``sep`` (markdown of ours)."""
    return sep.join(md_text(v) for v in values)


__all__ = ["md_text", "md_join"]
