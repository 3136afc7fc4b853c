"""The gateway turn's routes served without FastAPI's generic request handling.

One ``lcm api`` process serving a gateway spends a turn's CPU in three
requests (``…/messages``, ``…/assemble``, ``…/turns``), and much of it in
FastAPI's generic handling around each: its dependency solver walking the
route's parameters, the body decoded to Python objects by ``json.loads``
and then validated as a dict, the path parameter validated through the
same machinery. :class:`DirectRoute` is the route class of those routes:
when a request is the ordinary case, its handler validates the body from
its raw bytes with a ``TypeAdapter`` built once per process
(``validate_json``), the path key with another, builds the endpoint's other
arguments itself (the same objects the dependencies return) and runs the
endpoint in one thread-pool hop, which returns the encoded response.

Anything else goes to FastAPI's own handler, with the body already read
(Starlette keeps it on the request): a body that is not ``application/json``
or does not validate, a key that does not validate. Those answers (400 and
its message) are therefore FastAPI's, byte for byte; so is the OpenAPI
document, which is built from the route declarations as before. An error
the endpoint or a dependency raises is answered by the app's exception
handlers either way (``api/errors.py``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from functools import lru_cache
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel, TypeAdapter, ValidationError

from api.deps import RequireKeyCheck, RequireSnapshotRead
from api.inline_compaction import get_inline_jobs
from api.turn_threads import run_in_turn_thread
from api.validation import SessionKey
from lcm.db.engine import Database
from lcm.services import Services
from lcm.settings import Settings

# What the endpoint takes besides ``key`` and ``body``: built from the request
# as the route's dependencies would build them (they are async and only look
# things up, so awaiting them here costs no thread-pool hop).
Arguments = Callable[[Request, Database, Settings, Services], Awaitable[dict[str, Any]]]
Handler = Callable[[Request], Coroutine[Any, Any, Response]]

_INGEST_KEY = RequireKeyCheck("ingest")
_READ_SNAPSHOT = RequireSnapshotRead("read")
_SESSION_KEY: TypeAdapter[str] = TypeAdapter(SessionKey)


async def ingest_arguments(
    request: Request, database: Database, settings: Settings, services: Services
) -> dict[str, Any]:
    """``check``, ``database``, ``settings`` and ``services`` (``POST …/messages``)."""
    return {
        "check": await _INGEST_KEY(request, database, settings),
        "database": database,
        "settings": settings,
        "services": services,
    }


async def turn_arguments(
    request: Request, database: Database, settings: Settings, services: Services
) -> dict[str, Any]:
    """:func:`ingest_arguments` and ``inline_jobs`` (``POST …/turns``)."""
    arguments = await ingest_arguments(request, database, settings, services)
    arguments["inline_jobs"] = await get_inline_jobs(request)
    return arguments


async def snapshot_arguments(
    request: Request, database: Database, settings: Settings, services: Services
) -> dict[str, Any]:
    """``read``: the snapshot and the key looked up in it (``POST …/assemble``)."""
    return {"read": await _READ_SNAPSHOT(request, database, settings)}


@lru_cache(maxsize=4096)
def _session_key(raw: str) -> str:
    """``raw`` validated as a session key. A pure function of the path, and a
    gateway sends the same few keys turn after turn: kept per process (a
    refusal raises and is not kept)."""
    key: str = _SESSION_KEY.validate_python(raw)
    return key


# endpoint function -> (its body model, the builder of its other arguments)
_DIRECT: dict[Callable[..., Any], tuple[type[BaseModel], Arguments]] = {}


def direct(body: type[BaseModel], arguments: Arguments) -> Callable[[Any], Any]:
    """Decorator: the endpoint may be served by :class:`DirectRoute`'s handler.

    It must take ``key`` (the session key), ``body`` (``body``) and exactly
    what ``arguments`` returns, and return a :class:`Response` (one it
    encoded itself: nothing validates or serializes it after it returns).
    """

    def register(endpoint: Any) -> Any:
        _DIRECT[endpoint] = (body, arguments)
        return endpoint

    return register


class DirectEndpoint:
    """A registered endpoint with what serving it directly takes (built once per process)."""

    __slots__ = ("arguments", "body_adapter", "endpoint")

    def __init__(self, endpoint: Callable[..., Any]) -> None:
        body, self.arguments = _DIRECT[endpoint]
        self.endpoint = endpoint
        self.body_adapter: TypeAdapter[Any] = TypeAdapter(body)

    def parse(self, raw: bytes, key: str) -> tuple[str, Any] | None:
        """The session key and body, or None if FastAPI must answer (its 400).

        The body first, as FastAPI reads it first: a refusal of both the body
        and the key is the body's, answered by FastAPI. The key's own refusal
        (``invalid_session_key``, raised by its validator) is raised here as
        it is there.
        """
        try:
            body = self.body_adapter.validate_json(raw)
            return _session_key(key), body
        except ValidationError:
            return None

    async def serve(self, request: Request, key: str, body: Any) -> Response:
        """The endpoint's response: its other arguments, then one thread-pool hop
        (``api/turn_threads.py``)."""
        state = request.app.state
        extra = await self.arguments(request, state.database, state.settings, state.services)
        response = await run_in_turn_thread(self.endpoint, key=key, body=body, **extra)
        if not isinstance(response, Response):
            raise TypeError(f"{self.endpoint.__name__} must return an encoded Response")
        return response


def direct_endpoint(route: object) -> DirectEndpoint | None:
    """``route``'s :class:`DirectEndpoint` if it is a registered :class:`DirectRoute`."""
    endpoint = getattr(route, "endpoint", None)
    if not isinstance(route, DirectRoute) or endpoint not in _DIRECT:
        return None
    return DirectEndpoint(endpoint)


class DirectRoute(APIRoute):
    """An ``APIRoute`` whose handler serves the ordinary request itself (module docstring)."""

    def get_route_handler(self) -> Handler:
        generic = super().get_route_handler()
        if self.endpoint not in _DIRECT:
            return generic
        return _direct_handler(DirectEndpoint(self.endpoint), generic)


def _direct_handler(direct: DirectEndpoint, generic: Handler) -> Handler:
    async def handle(request: Request) -> Response:
        if not is_json(request.headers.get("content-type")):
            return await generic(request)  # FastAPI's own parsing (and its refusals)
        raw = await request.body()  # kept on the request for ``generic``
        parsed = direct.parse(raw, request.path_params["key"])
        if parsed is None:
            return await generic(request)  # the 400 FastAPI answers, with its message
        return await direct.serve(request, *parsed)

    return handle


def is_json(content_type: str | None) -> bool:
    """``application/json``, with parameters or not (what clients send; FastAPI
    also takes ``+json`` types and, for those, serves the request itself)."""
    if content_type is None:
        return False
    return content_type.partition(";")[0].strip().lower() == "application/json"
