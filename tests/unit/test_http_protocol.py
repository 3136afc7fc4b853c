"""A response's writes reach the socket in one call (api/http_protocol.py), bytes unchanged."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import uvicorn

from api.http_protocol import CoalescingHttpToolsProtocol, CoalescingTransport


class RecordingTransport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.events: list[str] = []
        self.closing = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)
        self.events.append("write")

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True
        self.events.append("close")

    def abort(self) -> None:
        self.closing = True
        self.events.append("abort")

    def get_write_buffer_size(self) -> int:
        return 0

    def get_extra_info(self, name: str) -> str:
        return f"extra {name}"


def test_writes_of_one_loop_step_go_out_in_one_call_in_order() -> None:
    async def step() -> tuple[RecordingTransport, CoalescingTransport]:
        real = RecordingTransport()
        transport = CoalescingTransport(real, asyncio.get_running_loop())  # type: ignore[arg-type]
        transport.write(b"HTTP/1.1 200 OK\r\n\r\n")
        transport.write(b"body")
        assert real.writes == []
        assert transport.get_write_buffer_size() == len(b"HTTP/1.1 200 OK\r\n\r\nbody")
        await asyncio.sleep(0)
        transport.write(b"next")
        await asyncio.sleep(0)
        return real, transport

    real, transport = asyncio.run(step())
    assert real.writes == [b"HTTP/1.1 200 OK\r\n\r\nbody", b"next"]
    assert transport.get_extra_info("peername") == "extra peername"


def test_close_sends_what_is_pending_first_and_abort_drops_it() -> None:
    async def step() -> tuple[RecordingTransport, RecordingTransport]:
        closed = RecordingTransport()
        transport = CoalescingTransport(closed, asyncio.get_running_loop())  # type: ignore[arg-type]
        transport.write(b"last answer")
        transport.close()
        aborted = RecordingTransport()
        other = CoalescingTransport(aborted, asyncio.get_running_loop())  # type: ignore[arg-type]
        other.write(b"never sent")
        other.abort()
        await asyncio.sleep(0)
        return closed, aborted

    closed, aborted = asyncio.run(step())
    assert closed.events == ["write", "close"]
    assert closed.writes == [b"last answer"]
    assert aborted.events == ["abort"]


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    size = int(scope["path"].strip("/") or 5)
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"x" * size, "more_body": True})
    await send({"type": "http.response.body", "body": b"!"})


@pytest.fixture
def server() -> Iterator[str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, http=CoalescingHttpToolsProtocol, log_level="warning"
    )
    served = uvicorn.Server(config)
    thread = threading.Thread(target=served.run, daemon=True)
    thread.start()
    for _ in range(200):
        if served.started:
            break
        threading.Event().wait(0.05)
    yield f"http://127.0.0.1:{port}"
    served.should_exit = True
    thread.join(10)


def test_uvicorn_on_the_protocol_answers_as_before(server: str) -> None:
    """Keep-alive requests, a large streamed body, and a connection the client closes."""
    with httpx.Client(base_url=server) as client:
        for size in (5, 3, 2_000_000, 7):
            response = client.get(f"/{size}")
            assert response.status_code == 200
            assert response.content == b"x" * size + b"!"
    response = httpx.get(f"{server}/4", headers={"Connection": "close"})
    assert response.content == b"xxxx!"
    assert response.headers["connection"] == "close"
