"""Each request's log fields: a request id (the caller's ``X-Request-ID`` or a new one).

Bound around the whole request, so every line logged while it runs carries
it, uvicorn's access line included (written from inside the response's
``send``), and the tenant once the key check found it (``api/deps.py``).
The id is echoed in the response's ``X-Request-ID``.
"""

from __future__ import annotations

import os
import re

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from lcm.logs import log_fields

HEADER = b"x-request-id"
# A caller's id is kept only if it is short and plain: it goes into every log line.
_USABLE = re.compile(rb"^[A-Za-z0-9._:-]{1,64}$")


class RequestContext:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # 32 random hex digits, like a uuid4's hex, without building a UUID
        # object (about a quarter of the CPU, once per request).
        request_id = _given(scope) or os.urandom(16).hex()
        echoed = (HEADER, request_id.encode())

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), echoed]
            await send(message)

        with log_fields(request_id=request_id):
            await self.app(scope, receive, send_with_id)


def _given(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == HEADER:
            return usable_request_id(value)
    return None


def usable_request_id(value: bytes) -> str | None:
    """The caller's ``X-Request-ID`` if it may be kept, else None (a new one is made)."""
    return value.decode("ascii") if _USABLE.match(value) else None
