"""The per-conversation summarization call guard, and its backoff once it opens.

``summary_max_calls_per_window`` bounds a conversation's summarization calls
(every pass: a summary, a repair, a failure) within
``summary_call_window_seconds``. When the guard opens (the newest
``limit`` calls fit in one window), compaction of the conversation backs off:
no pass runs until the window has room again *and*
``summary_spend_backoff_seconds`` have passed since the call that filled it.

The state is read from the pass log (``compaction_runs``), not kept in a
column: a new turn re-arming the debt, a reconciler wake-up or another
worker all see the same backoff, and nothing has to be cleared.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from lcm.settings import CompactionSettings

# A pause shorter than this is not worth a delayed wake-up: wait this long.
MIN_PAUSE_SECONDS = 0.5


def lookback(settings: CompactionSettings) -> timedelta:
    """How far back the calls that can keep the guard open lie."""
    return timedelta(
        seconds=settings.summary_call_window_seconds + settings.summary_spend_backoff_seconds
    )


def guard_wait(
    newest_calls: Sequence[datetime], settings: CompactionSettings, now: datetime
) -> float | None:
    """Seconds before the next pass may run, or ``None`` when it may run now.

    ``newest_calls`` are the conversation's latest calls, newest first, at
    most ``summary_max_calls_per_window`` of them (those within
    :func:`lookback` suffice).
    """
    limit = settings.summary_max_calls_per_window
    if limit is None or len(newest_calls) < limit:
        return None
    newest, oldest = newest_calls[0], newest_calls[limit - 1]
    window = timedelta(seconds=settings.summary_call_window_seconds)
    if newest - oldest >= window:
        return None  # the last ``limit`` calls never shared a window: the guard is shut
    # Room in the window once the oldest counted call leaves it; the backoff
    # from the call that filled it, so a guard that opened stays open that long.
    backoff = timedelta(seconds=settings.summary_spend_backoff_seconds)
    resume_at = max(oldest + window, newest + backoff)
    if resume_at <= now:
        return None
    return max(MIN_PAUSE_SECONDS, (resume_at - now).total_seconds())


__all__ = ["MIN_PAUSE_SECONDS", "guard_wait", "lookback"]
