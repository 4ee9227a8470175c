"""Text from disk or from the URL, made safe to put into Streamlit's markdown.

Why: ``st.markdown``, ``st.caption``, ``st.error`` / ``st.warning`` / ``st.info`` /
``st.success``, subheaders, progress texts and widget labels all render markdown. A run folder
from elsewhere (its ``status.json`` error, stage names, its folder name, a log line) or a shared
link's query parameters would otherwise put links, images (fetched by the browser from any
host), HTML, ``:material/...:`` icons, ``:red[...]`` directives or ``$...$`` maths into the page.
Strings from disk or the URL go into markdown only through :func:`md_text`. It backslash-escapes
(CommonMark makes an escaped ASCII punctuation character literal) every character that can start
markdown inline: ``[ ] < > ` * ~ $ \\ @``, a ``:`` before a letter or ``/`` (directives, icons,
``http://`` autolinks), the ``/`` of ``:material/`` (Streamlit replaces that text before
parsing, escaped colon or not), the ``.`` of ``www.``, an ``_`` that is not inside a word, and a block
marker at the start (``#``, ``-``, ``+``, ``=``, ``1.``). Newlines become spaces, so no other
block can start. GFM also turns bare ``http://...``, ``www....`` and ``a@b.c`` into links after
escapes are resolved, so an invisible WORD JOINER (U+2060) goes before the ``//``, the ``.`` of
``www.`` and the ``@`` (a copied text carries it). Ordinary text (``s1_pretrain``, ``my-run``, ``a: b``) is left as it reads.
Long text goes into ``st.code`` / ``st.text``, which never render markdown.

:class:`HTML` marks the notebook views' HTML fragments (their texts escaped where they are built).
"""

from __future__ import annotations

import re


class HTML(str):
    """An HTML fragment that notebooks render (``_repr_html_``) and that is still a ``str``."""

    def _repr_html_(self) -> str:
        return str(self)


_ALWAYS = set("[]<>`*~$\\@")
_LIST_START = re.compile(r"\d{1,9}[.)]")
_JOINER = "\u2060"  # WORD JOINER: invisible, keeps ``http://``, ``www.`` and ``a@b`` from being linked
_AUTOLINK_BREAK = {
    "/": lambda t, i: t[i - 1:i] == ":" and t[i:i + 2] == "//",  # scheme://
    ".": lambda t, i: t[max(i - 3, 0):i].lower() == "www",        # www.
    "@": lambda t, i: True,                                        # user@host
}
_ICON_PACK = re.compile(r":[A-Za-z][A-Za-z0-9_-]*$")  # ":material" before "/": Streamlit's icon syntax


def md_text(value: object, *, max_chars: int | None = 2000) -> str:
    """``value`` as markdown that shows exactly its characters (newlines become spaces; at
    most ``max_chars`` characters, cut with an ellipsis)."""
    text = str(value)
    text = "".join(" " if c in "\r\n\t\x0b\x0c\x85\u2028\u2029" else c for c in text)
    text = "".join(c for c in text if c >= " " and c != "\x7f")
    if max_chars is not None and len(text) > max_chars:
        text = text[: max_chars - 1] + "…"
    out = []
    lead = len(text) - len(text.lstrip(" "))
    list_start = _LIST_START.match(text, lead)
    for i, c in enumerate(text):
        prev = text[i - 1] if i else ""
        nxt = text[i + 1] if i + 1 < len(text) else ""
        if c in "/@." and _AUTOLINK_BREAK.get(c, lambda t, j: False)(text, i):
            out.append(_JOINER)  # GFM links bare URLs and e-mail addresses in text nodes, after escapes
        if (c in _ALWAYS
                or c == ":" and (nxt.isalpha() or nxt == "/")
                or c == "_" and not (prev.isalnum() and nxt.isalnum())
                or c == "/" and _ICON_PACK.search(text, 0, i) is not None
                or c == "." and text[max(i - 3, 0):i].lower() == "www"
                or i == lead and c in "#-+=>|"
                or list_start is not None and i == list_start.end() - 1):
            out.append("\\" + c)
        else:
            out.append(c)
    return "".join(out)


def plot_text(value: object) -> str:
    """``value`` for a plotly label (trace name, category, facet title): plotly renders a few
    HTML tags there, ``<a href>`` among them, so ``& < >`` become entities (shown as is)."""
    import html

    return html.escape(str(value), quote=False)


def md_join(values, sep: str = ", ") -> str:
    """Several strings from disk or the URL, each escaped, joined by ``sep`` (markdown of ours)."""
    return sep.join(md_text(v) for v in values)


__all__ = ["md_text", "md_join", "plot_text"]
