"""``lcm_client`` retries: ``Retry-After`` honoured, replayable calls only, ingest stored once.

A tiny HTTP server in the test answers as scripted (503 then 200, or reads
the request and hangs up without answering), alone or in front of a real
``lcm serve`` as a proxy that loses the first answer.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from lcm.db.engine import Database
from lcm_client import (
    AsyncLcmClient,
    LcmClient,
    RateLimited,
    RetryPolicy,
    TransportError,
    Unavailable,
)
from lcm_client.models import MessageIn, MessagesIn, MessagesOut
from tests import servers
from tests.conftest import new_tenant

Action = Callable[["Scripted", bytes], None]
STORED = {"conversation_id": 1, "ingested": 2, "duplicates": 0}
BUSY = {"error": {"code": "database_busy", "message": "the database is busy; retry shortly"}}


class Scripted(BaseHTTPRequestHandler):
    """Each request takes the next action of the server's script (the last one repeats)."""

    protocol_version = "HTTP/1.1"
    server: Script

    def _handle(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        self.server.arrivals.append(time.monotonic())
        actions = self.server.actions
        action = actions.pop(0) if len(actions) > 1 else actions[0]
        action(self, body)

    do_GET = do_POST = do_PATCH = _handle

    def answer(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        for name, value in {**(headers or {}), "Content-Type": "application/json"}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def hang_up(self) -> None:
        """The request was read (and maybe acted on); the answer is lost."""
        self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        pass


class Script(ThreadingHTTPServer):
    def __init__(self, actions: list[Action]) -> None:
        super().__init__(("127.0.0.1", 0), Scripted)
        self.actions = actions
        self.arrivals: list[float] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@pytest.fixture
def scripted() -> Iterator[Callable[[list[Action]], Script]]:
    started: list[Script] = []

    def start(actions: list[Action]) -> Script:
        server = Script(actions)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.shutdown()
        server.server_close()


def answer(status: int, payload: Any, headers: dict[str, str] | None = None) -> Action:
    return lambda handler, _body: handler.answer(status, payload, headers)


def hang_up(handler: Scripted, _body: bytes) -> None:
    handler.hang_up()


def forward(upstream: str, *, then_hang_up: bool = False) -> Action:
    """Pass the request to ``upstream``; with ``then_hang_up``, lose its answer."""

    def act(handler: Scripted, body: bytes) -> None:
        reply = httpx.request(
            handler.command,
            upstream + handler.path,
            content=body,
            headers={k: v for k, v in handler.headers.items() if k.lower() != "host"},
        )
        if then_hang_up:
            handler.hang_up()
        else:
            handler.answer(reply.status_code, reply.json())

    return act


def batch(*, ids: bool, prefix: str = "m") -> MessagesIn:
    return MessagesIn(
        messages=[
            MessageIn(role="user", content=f"{prefix} {i}", id=f"{prefix}{i}" if ids else None)
            for i in range(2)
        ]
    )


def ingest(kind: str, url: str, body: MessagesIn, retry: RetryPolicy | None = None) -> MessagesOut:
    """``ingest`` through the sync or the async client."""
    if kind == "sync":
        with LcmClient(url, "lcm_test", retry=retry) as client:
            return client.ingest("k", body)

    async def run() -> MessagesOut:
        async with AsyncLcmClient(url, "lcm_test", retry=retry) as client:
            return await client.ingest("k", body)

    return asyncio.run(run())


KINDS = pytest.mark.parametrize("kind", ["sync", "async"])


@KINDS
@pytest.mark.parametrize("status", [503, 429])
def test_retry_after_is_waited_then_the_call_is_sent_again(
    kind: str, status: int, scripted: Callable[[list[Action]], Script]
) -> None:
    server = scripted([answer(status, BUSY, {"Retry-After": "1"}), answer(200, STORED)])
    started = time.monotonic()
    out = ingest(kind, server.url, batch(ids=True))
    assert out.ingested == 2
    assert len(server.arrivals) == 2  # retried once
    assert server.arrivals[1] - server.arrivals[0] >= 1.0
    assert time.monotonic() - started >= 1.0


@KINDS
def test_a_batch_without_ids_is_not_retried_on_503(
    kind: str, scripted: Callable[[list[Action]], Script]
) -> None:
    server = scripted([answer(503, BUSY, {"Retry-After": "1"}), answer(200, STORED)])
    with pytest.raises(Unavailable) as exc:
        ingest(kind, server.url, batch(ids=False))
    assert exc.value.code == "database_busy"
    assert exc.value.retry_after == 1.0
    assert len(server.arrivals) == 1


def test_a_retry_after_beyond_the_cap_is_not_waited_for(
    scripted: Callable[[list[Action]], Script],
) -> None:
    server = scripted([answer(429, BUSY, {"Retry-After": "120"}), answer(200, STORED)])
    started = time.monotonic()
    with pytest.raises(RateLimited) as exc:
        ingest("sync", server.url, batch(ids=True), RetryPolicy(max_delay_seconds=30))
    assert exc.value.retry_after == 120.0
    assert time.monotonic() - started < 1.0
    assert len(server.arrivals) == 1


@KINDS
def test_a_connection_lost_mid_request_retries_only_a_batch_with_ids(
    kind: str, scripted: Callable[[list[Action]], Script]
) -> None:
    server = scripted([hang_up, answer(200, STORED)])
    with pytest.raises(TransportError) as exc:
        ingest(kind, server.url, batch(ids=False))
    assert exc.value.sent is True
    assert len(server.arrivals) == 1  # not sent again: it may have been stored
    again = scripted([hang_up, answer(200, STORED)])
    assert ingest(kind, again.url, batch(ids=True)).ingested == 2
    assert len(again.arrivals) == 2


def test_a_refused_connection_is_retried_for_any_call() -> None:
    port = servers.free_port()  # nothing listens there
    policy = RetryPolicy(max_retries=2, backoff_seconds=0.2, jitter=0)
    started = time.monotonic()
    with pytest.raises(TransportError) as exc:
        ingest("sync", f"http://127.0.0.1:{port}", batch(ids=False), policy)
    assert exc.value.sent is False
    assert time.monotonic() - started >= 0.2 + 0.4  # two backoffs: it was tried three times


@pytest.fixture
def serve_sqlite(sqlite_db: Database, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """``lcm serve`` on the test's SQLite database: its URL and a tenant key."""
    key = new_tenant(sqlite_db).api_key
    env = {"LCM_DATABASE_URL": sqlite_db.settings.database_url, "LCM_HOME": str(tmp_path)}
    handle = servers.start_serve(env, log=tmp_path / "serve.log")
    try:
        yield handle.base_url, key
    finally:
        handle.stop()


def test_a_retried_batch_is_stored_once(
    serve_sqlite: tuple[str, str], scripted: Callable[[list[Action]], Script]
) -> None:
    """The first answer is lost after the server stored the batch; the retry stores nothing."""
    upstream, key = serve_sqlite
    proxy = scripted([forward(upstream, then_hang_up=True), forward(upstream)])
    with LcmClient(proxy.url, key) as client:
        retried = client.ingest("lost", batch(ids=True))
    assert len(proxy.arrivals) == 2  # the batch reached the server twice
    assert (retried.ingested, retried.duplicates) == (0, 2)
    # Without ids the client does not resend: the batch is stored once, and the caller told.
    lossy = scripted([forward(upstream, then_hang_up=True), forward(upstream)])
    with LcmClient(lossy.url, key) as client, pytest.raises(TransportError):
        client.ingest("lost", batch(ids=False, prefix="n"))
    assert len(lossy.arrivals) == 1
    with LcmClient(upstream, key) as client:
        assert client.status("lost").messages == 4
