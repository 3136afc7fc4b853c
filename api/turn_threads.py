"""The one thread-pool hop of a turn request, on a plain executor instead of anyio's.

A turn request's endpoint is synchronous (its database work blocks), so the
event loop hands it to a thread and waits for the answer. Starlette's
``run_in_threadpool`` does that through anyio: a capacity limiter, a cancel
scope, a queue to a worker thread and a ``call_soon_threadsafe`` back, about
90 µs of CPU per hop measured against about 22 µs for
``loop.run_in_executor`` on the same threads (``uvloop``, eight callers at
once). A gateway turn makes three such hops. :func:`run_in_turn_thread`
keeps what the anyio hop gave the endpoint: it runs in a copy of the
caller's context (the request id bound to every log line travels with it),
and a cancelled request still waits for its thread to finish (a write
transaction ends before the request's task does).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

# As many as anyio's default limiter lets sync endpoints run at once. The
# executor starts a thread only when none is idle (none before the first
# turn), so a process has as many as its turns ever ran at once.
TURN_THREADS = 40
TURN_EXECUTOR = ThreadPoolExecutor(TURN_THREADS, thread_name_prefix="lcm-turn")


async def run_in_turn_thread(function: Callable[..., T], /, **kwargs: Any) -> T:
    """``function(**kwargs)`` in a turn thread, in a copy of this context."""
    context = contextvars.copy_context()
    call = functools.partial(context.run, function, **kwargs)
    done = asyncio.wrap_future(TURN_EXECUTOR.submit(call))
    try:
        return await asyncio.shield(done)
    except asyncio.CancelledError:
        # As anyio's hop does: the thread's work (a transaction) ends first.
        await asyncio.wait([done])
        raise
