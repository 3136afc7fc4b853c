"""Refuse a request with a body before its body is read, unless its key is known.

Pure ASGI middleware, outside the body limit: a ``/v1`` request that may carry
a body (any method but GET, HEAD and OPTIONS) without a bearer token, or with
a token that is not an active key, is answered 401 and its connection closed
without one byte of its body being received. Before it, fifty strangers
sending 15 MB each made the server hold all of it while FastAPI parsed it
(answering 400), about 1.6 GB.

A gate, not the authentication: the route's dependency still looks the key
up on every request (scopes, revocation, the tenant's settings and rate
limit). So that the gate costs a gateway's hot path nothing, a key that
passed is remembered (its hash, bounded, for ``KNOWN_SECONDS``); a key seen
for the first time, or not lately, costs one lookup in a worker thread. A
key revoked meanwhile still passes the gate until then, and is refused by
the route as before.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

import anyio.to_thread
from starlette.types import ASGIApp, Receive, Scope, Send

from api.errors import error_response
from lcm.db.engine import Database
from lcm.errors import Unauthenticated
from lcm.tenants.keys import authenticate, hash_key

KNOWN_SECONDS = 60.0
KNOWN_MAX = 10_000
WITHOUT_BODY = frozenset({"GET", "HEAD", "OPTIONS"})


class KnownKeys:
    """Hashes of keys that were active lately: a bounded, time-limited memo."""

    def __init__(
        self,
        ttl: float = KNOWN_SECONDS,
        size: int = KNOWN_MAX,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ttl = ttl
        self._size = size
        self._clock = clock
        self._seen: OrderedDict[str, float] = OrderedDict()

    def __contains__(self, key_hash: object) -> bool:
        seen = self._seen.get(key_hash)  # type: ignore[call-overload]
        return seen is not None and self._clock() - seen < self._ttl

    def add(self, key_hash: str) -> None:
        self._seen[key_hash] = self._clock()
        self._seen.move_to_end(key_hash)
        while len(self._seen) > self._size:
            self._seen.popitem(last=False)


class KeyBeforeBody:
    """401 before the body for ``/v1`` requests without an active key (module docstring)."""

    def __init__(self, app: ASGIApp, database: Database, known: KnownKeys | None = None) -> None:
        self.app = app
        self.database = database
        self.known = known if known is not None else KnownKeys()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["method"] in WITHOUT_BODY
            or not scope["path"].startswith("/v1/")
        ):
            await self.app(scope, receive, send)
            return
        token = bearer(scope)
        if token is None:
            await _refuse(scope, receive, send, "send 'Authorization: Bearer <tenant key>'")
            return
        key_hash = hash_key(token)
        if key_hash not in self.known:
            problem = await anyio.to_thread.run_sync(self._lookup, token)
            if problem is not None:
                await _refuse(scope, receive, send, problem)
                return
            self.known.add(key_hash)
        await self.app(scope, receive, send)

    def _lookup(self, token: str) -> str | None:
        """None if ``token`` is an active key, else why not."""
        with self.database.lookup_session() as session:
            try:
                authenticate(session, token)
            except Unauthenticated as exc:
                return exc.message
        return None


def bearer(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
            return None
    return None


async def _refuse(scope: Scope, receive: Receive, send: Send, message: str) -> None:
    # Connection: close, so the server does not read (and discard) the rest
    # of the body to keep the connection alive.
    response = error_response(401, "unauthenticated", message, {"Connection": "close"})
    await response(scope, receive, send)
