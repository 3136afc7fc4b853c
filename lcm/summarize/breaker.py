"""A thread-safe circuit breaker for the LLM provider.

When the provider is down, every compaction pass would otherwise spend its
whole timeout-and-retry budget before falling back to truncation, holding a
worker slot for minutes. After ``failure_threshold`` consecutive failed calls
the breaker opens and calls fail at once; after ``reset_seconds`` one trial
call is let through (half-open) and its outcome closes or re-opens the breaker.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from enum import StrEnum

from lcm.errors import ProviderUnavailable


class BreakerState(StrEnum):
    """A circuit breaker's state, as health and metrics report it."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class CircuitBreaker:
    """Counts consecutive failures and refuses calls while the provider looks down.

    Call :meth:`before_call` before each provider call and exactly one of
    :meth:`record_success` / :meth:`record_failure` after it. ``clock`` returns
    seconds and is injectable so tests control time.
    """

    def __init__(
        self,
        failure_threshold: int,
        reset_seconds: float,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if failure_threshold < 1:
            raise ValueError("failure_threshold must be >= 1")
        self._threshold = failure_threshold
        self._reset_seconds = reset_seconds
        self._clock = clock
        # One worker process runs many summaries in threads sharing this breaker.
        # Without the lock two threads could both see "reset elapsed" and both
        # send a trial call, or interleave read-modify-write of the failure count
        # and lose failures, so the breaker would open late or never.
        self._lock = threading.Lock()
        self._state: BreakerState = BreakerState.CLOSED
        self._failures = 0
        self._opened_at = 0.0
        self._trial_in_flight = False

    @property
    def state(self) -> BreakerState:
        """The current state, with an elapsed open period reported as half-open."""
        with self._lock:
            if self._state == BreakerState.OPEN and self._reset_elapsed():
                return BreakerState.HALF_OPEN
            return self._state

    def before_call(self) -> None:
        """Admit a call, or raise :class:`ProviderUnavailable` without touching the network."""
        with self._lock:
            if self._state == BreakerState.CLOSED:
                return
            if self._state == BreakerState.OPEN:
                if not self._reset_elapsed():
                    remaining = self._reset_seconds - (self._clock() - self._opened_at)
                    raise ProviderUnavailable(
                        f"LLM provider circuit open after {self._failures} consecutive "
                        f"failures; retrying in {max(remaining, 0.0):.1f}s"
                    )
                self._state = BreakerState.HALF_OPEN
            # Half-open: exactly one trial call probes the provider; the others
            # keep failing fast until it reports back.
            if self._trial_in_flight:
                raise ProviderUnavailable("LLM provider circuit half-open: trial call in flight")
            self._trial_in_flight = True

    def record_success(self) -> None:
        """The provider answered: close the breaker and forget earlier failures."""
        with self._lock:
            self._state = BreakerState.CLOSED
            self._failures = 0
            self._trial_in_flight = False

    def record_failure(self) -> None:
        """The call failed; open the breaker on the threshold or when a trial call failed."""
        with self._lock:
            self._failures += 1
            trial_failed = self._state == BreakerState.HALF_OPEN
            self._trial_in_flight = False
            if trial_failed or self._failures >= self._threshold:
                # A call admitted before the breaker opened may fail after it:
                # re-stamping the open time then only extends the pause a little.
                self._state = BreakerState.OPEN
                self._opened_at = self._clock()

    def _reset_elapsed(self) -> bool:
        return self._clock() - self._opened_at >= self._reset_seconds
