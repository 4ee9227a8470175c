"""Tell the browser where the server's root is, so a page's URL opens without a failed probe.

Streamlit's browser code does not know which part of a URL such as ``/attention`` is the
server's root and which is a page: it asks ``/attention/_stcore/health`` first, gets a 404, waits
100 ms and then asks ``/_stcore/health``. Every page but Home paid that probe on each visit: a page
that draws one line took 1.53 s in a new tab at ``/x`` against 1.34 s at ``/`` (median of 6,
bench/bench_pages_browser.py's browser, 2-core AMD EPYC). Streamlit reads the root from
``window.__streamlit.BACKEND_BASE_URL`` when a page sets it (its configuration for hosts that embed
it), so the app's HTML sets it: one line of script, the same for every page, built from
``server.baseUrlPath`` and nothing a request sends. The middleware answers every other response
unchanged.

Installed by ``xlviz app`` (:mod:`xlviz.ui.serve`), innermost in Streamlit's middleware stack (it
reads the HTML before Streamlit's gzip does). Plain ``streamlit run app.py`` serves the app as
before, probe included. Streamlit is pinned; ``tests/test_app_logic.py`` checks that its browser
code still reads ``BACKEND_BASE_URL`` and that the served HTML carries the line.
"""

from __future__ import annotations

import json

MARK = b"<head>"


def script(base_url_path: str) -> bytes:
    """The line that names the server's root: ``location.origin`` plus ``server.baseUrlPath``."""
    path = "/" + base_url_path.strip("/")
    return (b"<script>window.__streamlit=Object.assign({},window.__streamlit,{BACKEND_BASE_URL:location.origin+"
            + json.dumps(path).replace("<", "\\u003c").encode() + b"})</script>")


def inject(html: bytes, base_url_path: str) -> bytes:
    """``html`` with :func:`script` right after ``<head>`` (unchanged when it has no ``<head>``)."""
    at = html.find(MARK)
    if at < 0:
        return html
    at += len(MARK)
    return html[:at] + script(base_url_path) + html[at:]


class BackendBaseUrl:
    """ASGI middleware: an HTML response gets :func:`script` in its head; others pass as they come."""

    def __init__(self, app, base_url_path: str = ""):
        self.app = app
        self.base_url_path = base_url_path

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("method") != "GET":  # HEAD has no body to change
            await self.app(scope, receive, send)
            return
        start: dict | None = None
        body: list[bytes] = []

        async def wrapped(message):
            nonlocal start
            if message["type"] == "http.response.start":
                headers = dict(message.get("headers") or [])
                html = headers.get(b"content-type", b"").startswith(b"text/html") and not headers.get(b"content-encoding")
                if not html or message.get("status") != 200:
                    await send(message)
                    return
                start = message  # held until the whole page is read
                return
            if message["type"] == "http.response.body" and start is not None:
                body.append(message.get("body", b""))
                if message.get("more_body"):
                    return
                page = inject(b"".join(body), self.base_url_path)
                # its length changed; its validators named the file, not this page
                headers = [(k, v) for k, v in start.get("headers") or []
                           if k.lower() not in (b"content-length", b"etag", b"last-modified")]
                headers.append((b"content-length", str(len(page)).encode()))
                await send({**start, "headers": headers})
                await send({"type": "http.response.body", "body": page})
                return
            await send(message)

        await self.app(scope, receive, wrapped)


def install() -> None:
    """Add :class:`BackendBaseUrl` to the middleware Streamlit builds its server with (innermost)."""
    from starlette.middleware import Middleware
    from streamlit import config
    from streamlit.web.server.starlette import starlette_app

    build = starlette_app.create_streamlit_middleware
    if getattr(build, "_xlviz", False):
        return

    def with_base_url():
        return [*build(), Middleware(BackendBaseUrl, base_url_path=config.get_option("server.baseUrlPath") or "")]

    with_base_url._xlviz = True
    starlette_app.create_streamlit_middleware = with_base_url
