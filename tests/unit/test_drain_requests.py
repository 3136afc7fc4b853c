"""SQLite's search-backlog drains: one queued at a time per process, not one per request.

Under a gateway's load ``lcm serve`` queued a drain per ingest request, and
a compaction wake-up waited behind hundreds of them (workers/sender.py:
``DrainRequests``). These pin what the sender sends.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from lcm.job_types import INDEX_SEARCH_BACKLOG, LEAF
from lcm.outbox import IndexSearchBacklog, WakeCompaction
from workers import sender as sender_module
from workers.sender import CelerySender, DrainRequests


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def submitted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The job type of every job the sender hands to the broker."""
    seen: list[str] = []

    def submit(job_type: Any, args: list[object], countdown: float | None = None) -> None:
        seen.append(job_type.name)

    monkeypatch.setattr(sender_module, "submit", submit)
    return seen


def test_a_burst_of_commits_sends_one_drain_and_every_wake_up(submitted: list[str]) -> None:
    sender = CelerySender(DrainRequests(clock=Clock()))
    for conversation_id in range(1, 51):  # fifty requests' outboxes, one after the other
        sender.send([IndexSearchBacklog(), WakeCompaction(conversation_id)])
    assert submitted.count(INDEX_SEARCH_BACKLOG.name) == 1
    assert submitted.count(LEAF.name) == 50


def test_a_commit_while_the_drain_runs_makes_it_drain_again_instead(
    submitted: list[str],
) -> None:
    drains = DrainRequests(clock=Clock())
    sender = CelerySender(drains)
    sender.send([IndexSearchBacklog()])
    drains.started()  # the worker began the drain: it may have read the backlog already
    sender.send([IndexSearchBacklog()])
    sender.send([IndexSearchBacklog()])
    assert submitted == [INDEX_SEARCH_BACKLOG.name]
    assert drains.finished() is True  # rows came in as it ran: once more
    assert drains.finished() is False  # nothing since: done
    sender.send([IndexSearchBacklog()])  # the next commit sends a new drain
    assert submitted == [INDEX_SEARCH_BACKLOG.name] * 2


def test_a_drain_finishing_with_no_commit_meanwhile_stops(submitted: list[str]) -> None:
    drains = DrainRequests(clock=Clock())
    assert drains.should_send()
    drains.started()
    assert drains.finished() is False
    assert drains.should_send()


def test_a_drain_that_never_starts_here_is_sent_again_after_a_while(
    submitted: list[str],
) -> None:
    # The worker may be another process: this process never sees it start.
    clock = Clock()
    sender = CelerySender(DrainRequests(resend_seconds=1.0, clock=clock))
    sender.send([IndexSearchBacklog()])
    clock.now += 0.5
    sender.send([IndexSearchBacklog()])
    clock.now += 0.6
    sender.send([IndexSearchBacklog()])
    assert submitted == [INDEX_SEARCH_BACKLOG.name] * 2


def test_a_drain_the_broker_refused_does_not_count_as_queued(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    results = iter([False, True])
    sent: list[str] = []

    def send(job_type: Any, args: list[object], what: str, countdown: float | None = None) -> bool:
        sent.append(job_type.name)
        return next(results)

    monkeypatch.setattr(sender_module, "_send", send)
    sender = CelerySender(DrainRequests(clock=Clock()))
    sender.send([IndexSearchBacklog()])  # refused: logged by _send
    sender.send([IndexSearchBacklog()])
    assert sent == [INDEX_SEARCH_BACKLOG.name] * 2


def test_request_threads_racing_send_one_drain_between_two_starts() -> None:
    drains = DrainRequests(clock=Clock())
    barrier = threading.Barrier(16)
    allowed: list[bool] = []

    def request() -> None:
        barrier.wait()
        allowed.append(drains.should_send())

    for _ in range(3):  # rounds of racing requests, a drain running to its end between them
        allowed.clear()
        threads = [threading.Thread(target=request) for _ in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert allowed.count(True) == 1
        drains.started()
        assert drains.finished() is False


def test_requests_racing_a_drain_s_end_are_never_lost() -> None:
    """Every request made while a drain runs is either sent or drained again."""
    drains = DrainRequests(clock=Clock())
    for _ in range(200):
        assert drains.should_send()
        drains.started()
        sent: list[bool] = []
        barrier = threading.Barrier(2)

        def request(sent: list[bool] = sent, barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            sent.append(drains.should_send())

        thread = threading.Thread(target=request)
        thread.start()
        barrier.wait()
        again = drains.finished()
        thread.join()
        if again:
            assert drains.finished() is False
        # The request was covered by exactly one of: a new drain, or the running one again.
        assert sent[0] != again
        drains.forget()
