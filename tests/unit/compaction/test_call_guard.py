"""The call guard's wait: the window, then the backoff from the call that filled it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from lcm.compaction.call_guard import guard_wait
from lcm.settings import CompactionSettings

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(*seconds: float) -> list[datetime]:
    """Call times, newest first."""
    return sorted((T0 + timedelta(seconds=s) for s in seconds), reverse=True)


def settings(backoff: float) -> CompactionSettings:
    return CompactionSettings(
        summary_max_calls_per_window=3,
        summary_call_window_seconds=60,
        summary_spend_backoff_seconds=backoff,
    )


def test_no_limit_or_fewer_calls_never_wait() -> None:
    assert guard_wait(at(0, 1, 2), CompactionSettings(), T0) is None
    assert guard_wait(at(0, 1), settings(600), T0 + timedelta(seconds=2)) is None


def test_the_backoff_runs_from_the_call_that_filled_the_window() -> None:
    calls = at(0, 10, 20)
    s = settings(600)
    assert guard_wait(calls, s, T0 + timedelta(seconds=30)) == 590
    # The window has room again at 60 s; the backoff still holds.
    assert guard_wait(calls, s, T0 + timedelta(seconds=61)) == 559
    assert guard_wait(calls, s, T0 + timedelta(seconds=620)) is None


def test_without_a_backoff_the_window_alone_decides() -> None:
    calls = at(0, 10, 20)
    assert guard_wait(calls, settings(0), T0 + timedelta(seconds=30)) == 30
    assert guard_wait(calls, settings(0), T0 + timedelta(seconds=60)) is None


def test_calls_spread_wider_than_the_window_never_opened_it() -> None:
    assert guard_wait(at(0, 40, 70), settings(600), T0 + timedelta(seconds=71)) is None


def test_a_short_wait_is_rounded_up() -> None:
    assert guard_wait(at(0, 10, 20), settings(0), T0 + timedelta(seconds=59.9)) == 0.5
