"""The gateway turn's three requests served in one ASGI layer instead of a dozen.

Every request to the app passes, before its route, through about twelve
nested ASGI layers (Starlette's error and exception middleware, FastAPI's
telemetry, body limit and exit stack, this project's request context,
console headers, metrics, UTF-8 check, key gate and body limit, the router
twice), each an ``await`` and most wrapping ``send``. For the three
requests of a gateway turn (``POST …/messages``, ``…/assemble``,
``…/turns``) that was about a sixth of ``lcm serve``'s CPU per turn.

:class:`TurnFastPath` is the outermost layer of the app's stack. It serves
the *ordinary* turn request itself, doing each duty of those layers once:

- the request id (``api/request_context.py``): bound to every log line,
  echoed in ``X-Request-ID``;
- the metrics (``api/metrics.py``): the request counted and timed under its
  route template;
- the UTF-8 check of path and query (``api/validation.py``), the key gate
  (``api/key_gate.py``: the key passed it lately), the body limit
  (``api/limits.py``): checked before the request is taken;
- routing: the turn routes' own path patterns, in the router's order (they
  are the first routes of the app, see ``api/routes/conversations.py``);
- errors: raised by the endpoint, answered by the app's exception handlers
  (``api/errors.py``) as ``ExceptionMiddleware`` and ``ServerErrorMiddleware``
  would.

Any other request, and any turn request that is not ordinary (not JSON, no
key or one the gate has not seen lately, a body over the limit or that does
not validate, a path that is not UTF-8, a client gone while its body was
read) goes to the full stack, with what was read of its body replayed: its
answer is the full stack's, byte for byte. Nothing was done for it here
(no endpoint ran, nothing was counted), so nothing is done twice.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from starlette._utils import get_route_path, is_async_callable
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.routing import BaseRoute, compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.direct_routes import DirectEndpoint, direct_endpoint, is_json
from api.key_gate import KnownKeys, bearer
from api.metrics import LATENCY, REQUESTS
from api.request_context import HEADER as REQUEST_ID
from api.request_context import usable_request_id
from api.validation import not_utf8
from lcm.logs import log_fields
from lcm.tenants.keys import hash_key

Handler = Callable[[Request, Exception], Any]


class TurnRoute:
    """One turn route: its path pattern, the route object and its direct endpoint."""

    __slots__ = ("direct", "regex", "route", "template")

    def __init__(self, route: Any, direct: DirectEndpoint) -> None:
        self.route = route
        self.direct = direct
        self.template: str = route.path
        self.regex = compile_path(route.path_format)[0]


class TurnFastPath:
    """Outermost ASGI layer: serves the ordinary turn request itself (module docstring)."""

    def __init__(self, app: ASGIApp, fastapi: Any, turn_routes: Sequence[BaseRoute]) -> None:
        """Built with the middleware stack (at startup): ``turn_routes`` are the turn
        router's routes, the first the app includes (only the GET routes of the
        OpenAPI document come before them), so no other route matches a POST
        that one of their patterns matches."""
        self.app = app
        self.fastapi = fastapi
        self._routes: list[TurnRoute] = []
        for route in turn_routes:
            direct = direct_endpoint(route)
            if direct is not None and getattr(route, "methods", None) == {"POST"}:
                self._routes.append(TurnRoute(route, direct))
        self._handlers: dict[Any, Handler] = {}
        self._error_handler: Handler | None = None
        for key, handler in fastapi.exception_handlers.items():
            if key in (500, Exception):
                self._error_handler = handler
            else:
                self._handlers[key] = handler

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        path = get_route_path(scope)
        for turn in self._routes:
            match = turn.regex.match(path)
            if match is not None:
                await self._turn(turn, match.group("key"), scope, receive, send)
                return
        await self.app(scope, receive, send)

    async def _turn(
        self, turn: TurnRoute, key: str, scope: Scope, receive: Receive, send: Send
    ) -> None:
        request_id = self._ordinary(scope)
        if request_id is None:
            await self.app(scope, receive, send)
            return
        read: list[Message] = []
        raw = await self._body(receive, read)
        parsed = None
        if raw is not None:
            try:
                parsed = turn.direct.parse(raw, key)
            except Exception:  # the key's own refusal: the full stack raises it again
                parsed = None
        if parsed is None:
            await self.app(scope, _replaying(read, receive), send)
            return
        scope["route"] = turn.route
        scope["endpoint"] = turn.route.endpoint
        scope["path_params"] = {"key": key}
        request_id = request_id or os.urandom(16).hex()  # as api/request_context.py makes it
        await self._serve(turn, parsed, request_id, scope, receive, send)

    def _ordinary(self, scope: Scope) -> str | None:
        """The caller's request id ('' if none) if the request may take the fast path, else None."""
        content_type = length = None
        request_id = ""
        for name, value in scope["headers"]:
            if name == b"content-type":
                content_type = value
            elif name == b"content-length":
                length = value
            elif name == REQUEST_ID:
                request_id = usable_request_id(value) or ""
        if content_type is None or not is_json(content_type.decode("latin-1")):
            return None
        max_bytes = self.fastapi.state.settings.max_body_bytes
        if length is not None and (not length.isdigit() or int(length) > max_bytes):
            return None
        token = bearer(scope)
        if token is None or hash_key(token) not in self.known:
            return None
        raw_path = scope.get("raw_path") or scope["path"].encode()
        query = scope.get("query_string", b"").replace(b"+", b" ")
        if not_utf8(raw_path, "path") or not_utf8(query, "query string"):
            return None
        return request_id

    @property
    def known(self) -> KnownKeys:
        known: KnownKeys = self.fastapi.state.known_keys
        return known

    async def _body(self, receive: Receive, read: list[Message]) -> bytes | None:
        """The whole body, or None (over the limit, or the client left).

        ``read`` keeps every message received, for a replay.
        """
        max_bytes = self.fastapi.state.settings.max_body_bytes
        size = 0
        while True:
            message = await receive()
            read.append(message)
            if message["type"] != "http.request":
                return None
            size += len(message.get("body", b""))
            if size > max_bytes:
                return None
            if not message.get("more_body", False):
                break
        if len(read) == 1:
            body: bytes = read[0].get("body", b"")
            return body
        return b"".join(message.get("body", b"") for message in read)

    async def _serve(
        self,
        turn: TurnRoute,
        parsed: tuple[str, Any],
        request_id: str,
        scope: Scope,
        receive: Receive,
        send: Send,
    ) -> None:
        echoed = (REQUEST_ID, request_id.encode())
        status = 500
        started = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", []), echoed]
            await send(message)

        request = Request(scope, receive)
        try:
            with log_fields(request_id=request_id):
                try:
                    response = await turn.direct.serve(request, *parsed)
                except Exception as exc:
                    await self._answer_error(request, exc, scope, receive, send_with_id)
                    return
                await response(scope, receive, send_with_id)
        finally:
            REQUESTS.labels("POST", turn.template, str(status)).inc()
            LATENCY.labels("POST", turn.template).observe(time.perf_counter() - started)

    async def _answer_error(
        self, request: Request, exc: Exception, scope: Scope, receive: Receive, send: Send
    ) -> None:
        """As ``ExceptionMiddleware`` does, or ``ServerErrorMiddleware`` (500, then raised)."""
        handler = self._handler_for(exc)
        unexpected = handler is None
        if handler is None:
            handler = self._error_handler
            if handler is None:
                raise exc
        if is_async_callable(handler):
            response = await handler(request, exc)
        else:
            response = await run_in_threadpool(handler, request, exc)
        await response(scope, receive, send)
        if unexpected:
            raise exc  # as ServerErrorMiddleware does: the server logs it

    def _handler_for(self, exc: Exception) -> Handler | None:
        if isinstance(exc, HTTPException) and exc.status_code in self._handlers:
            return self._handlers[exc.status_code]
        for cls in type(exc).__mro__:
            if cls in self._handlers:
                return self._handlers[cls]
        return None


def _replaying(read: list[Message], receive: Receive) -> Receive:
    """``receive`` with the messages already read from it given again first."""
    pending = list(read)

    async def replay() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replay
