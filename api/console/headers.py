"""Security headers on every console response, its error pages and static files included."""

from __future__ import annotations

import logging

from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.console.rendering import error_page

log = logging.getLogger(__name__)

# No inline script or style anywhere (console.js sets bar widths from data
# attributes), no framing, forms post only to the console itself.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
# Only over https: sent over plain http it would be ignored, and on a local
# `lcm serve` it could pin a browser to https for a host that has none.
STRICT_TRANSPORT_SECURITY = "max-age=31536000"


def is_console_path(path: str) -> bool:
    return path == "/console" or path.startswith("/console/")


class ConsoleHeaders:
    """ASGI middleware: adds :data:`HEADERS` (and HSTS on https) to ``/console`` responses.

    Outermost, so that refusals answered before routing carry them too. An
    unexpected error on a console page is answered here as a 500 page (with
    the headers) and not raised on: raised past the app, the server would
    close the browser's kept-alive connection.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not is_console_path(scope["path"]):
            await self.app(scope, receive, send)
            return
        https = scope.get("scheme") == "https"
        started = False

        async def send_with_headers(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = MutableHeaders(scope=message)
                for name, value in HEADERS.items():
                    headers[name] = value
                if https:
                    headers["Strict-Transport-Security"] = STRICT_TRANSPORT_SECURITY
            await send(message)

        try:
            await self.app(scope, receive, send_with_headers)
        except Exception:
            if started:  # too late for a page: the server ends the response
                raise
            log.exception("unhandled error on a console page")
            page = error_page(Request(scope), 500, "internal_error", "internal error")
            await page(scope, receive, send_with_headers)
