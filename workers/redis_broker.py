"""Kombu's Redis transport, with one synchronous client per channel instead of one per call.

Kombu's Redis channel builds a new ``redis.Redis`` object for every
operation it runs outside its event loop: each publish, each message a
worker reserves, each acknowledgement. The object is only a handle on the
channel's connection pool (a command checks a connection out of the pool
and returns it), but building one costs ~70 µs of CPU: redis-py copies its
table of response callbacks into every client. A worker paid that several
times per job, and the API once per wake-up it published.

A redis-py client over a connection pool may be shared between threads
(pipelines may not, and every operation still builds its own), so the
channel keeps one. It builds another when kombu replaces the channel's pool
(kombu drops its pools after a connection error): a client always uses the
pool kombu manages and closes.
"""

from __future__ import annotations

from typing import Any

from kombu.transport import redis


class Channel(redis.Channel):
    """Kombu's Redis channel, whose operations share one client per connection pool."""

    # (pool, client): read and replaced as one tuple, so a thread never pairs
    # a client with another pool. Two threads building one at once both get a
    # working client; the last one kept is shared from then on.
    _shared_client: tuple[Any, Any] | None = None

    def _create_client(self, asynchronous: bool = False) -> Any:
        if asynchronous:
            # The event loop's client: kombu builds it once already.
            return super()._create_client(asynchronous=True)
        pool = self.pool
        shared = self._shared_client
        if shared is None or shared[0] is not pool:
            shared = (pool, super()._create_client())
            self._shared_client = shared
        return shared[1]


class Transport(redis.Transport):
    """Kombu's Redis transport over :class:`Channel` (``broker_transport`` in the app)."""

    Channel = Channel
