"""When a call is sent again, and after how long.

Which calls may be sent again (``Call.replayable``): a call whose second
arrival has the effect of the first. Reads are; so are a settings PATCH (the
same overrides again), a commit (its advancement key is stored: a retry
answers ``duplicate``), a bootstrap (the anchor and the entry ids import only
what is missing), a manual compact (one coalesced debt row per
conversation), fork, fork end and rollback (a second preparation returns the
first), and an ingest or turn whose every message carries an ``id`` (the
server skips client ids it already stored, in one transaction with the
insert). An ingest or turn with a message without an ``id`` is not: if its
first try was stored and only the answer was lost, a second try stores
those messages twice. ``expand_query`` is harmless to repeat but is not
resent: its 503 is mostly the server's deadline for the worker passing, and
a second try would hold the caller for another whole deadline.

What is retried:

- a connection that was never made (refused, connect timeout, no pooled
  connection in time): nothing reached the server, so any call;
- 429 and 503 answers, and a connection lost or timed out after the request
  was written: replayable calls only. A 503 usually means the server rolled
  the request back (``database_busy``), but not always: a turn in inline
  compaction mode commits its messages before the sweep that may fail, so
  the status alone does not prove the request left no trace.

How long: the server's ``Retry-After`` when it sent one (seconds or an HTTP
date), else ``backoff_seconds`` doubled per retry; plus up to ``jitter`` of
that at random, so clients turned away together do not all return in the
same instant (never less than the server asked). A ``Retry-After`` longer
than ``max_delay_seconds`` is not waited for: the error is raised with its
``retry_after`` for the caller to decide, rather than blocking the caller
for that long or coming back sooner than asked.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import httpx

RETRY_STATUSES = frozenset({429, 503})
# Raised before any byte of the request left: the server cannot have seen it.
NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to wait before sending a call again (see the module doc)."""

    max_retries: int = 3
    backoff_seconds: float = 0.25
    max_delay_seconds: float = 30.0
    jitter: float = 0.2
    rng: random.Random = field(default_factory=random.Random, compare=False, repr=False)

    def after_response(
        self, response: httpx.Response, attempt: int, replayable: bool
    ) -> float | None:
        """Seconds to wait before retrying after ``response``, or None to stop."""
        if response.status_code not in RETRY_STATUSES or not replayable:
            return None
        return self._delay(attempt, retry_after(response))

    def after_transport_error(
        self, exc: httpx.TransportError, attempt: int, replayable: bool
    ) -> float | None:
        """Seconds to wait before retrying after ``exc``, or None to stop."""
        if not replayable and not isinstance(exc, NOT_SENT):
            return None
        return self._delay(attempt, None)

    def _delay(self, attempt: int, asked: float | None) -> float | None:
        if attempt >= self.max_retries:
            return None
        base = asked if asked is not None else self.backoff_seconds * 2**attempt
        if base > self.max_delay_seconds:
            return None
        return base + self.rng.uniform(0, self.jitter * base)


NO_RETRIES = RetryPolicy(max_retries=0)


def retry_after(response: httpx.Response) -> float | None:
    """The response's ``Retry-After`` in seconds (delta-seconds or an HTTP date), if any."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())
