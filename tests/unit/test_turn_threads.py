"""A turn endpoint's thread-pool hop (api/turn_threads.py) keeps what anyio's hop gave it."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time

import pytest

from api.turn_threads import run_in_turn_thread

REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="")


def test_the_endpoint_runs_in_another_thread_in_the_callers_context() -> None:
    def endpoint(*, suffix: str) -> tuple[str, str]:
        return REQUEST_ID.get() + suffix, threading.current_thread().name

    async def request() -> tuple[str, str]:
        REQUEST_ID.set("req-1")
        return await run_in_turn_thread(endpoint, suffix="!")

    seen, thread = asyncio.run(request())
    assert seen == "req-1!"
    assert thread.startswith("lcm-turn")


def test_an_error_of_the_endpoint_is_raised_to_the_caller() -> None:
    def endpoint() -> None:
        raise LookupError("no such conversation")

    with pytest.raises(LookupError, match="no such conversation"):
        asyncio.run(run_in_turn_thread(endpoint))


def test_a_cancelled_request_waits_for_its_thread_to_finish() -> None:
    """A write transaction in the thread ends before the request's task does."""
    finished: list[float] = []

    def endpoint() -> None:
        time.sleep(0.3)
        finished.append(time.monotonic())

    async def request() -> float:
        task = asyncio.create_task(run_in_turn_thread(endpoint))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.monotonic()

    ended = asyncio.run(request())
    assert finished
    assert finished[0] <= ended
