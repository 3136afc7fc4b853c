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
from workers.sender import DRAIN_DELAY_SECONDS, CelerySender, DrainRequests
from workers.tasks.search import drain

Sent = list[tuple[str, float | None]]  # each job handed to the broker: its type, its countdown


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def delays(monkeypatch: pytest.MonkeyPatch) -> Sent:
    """Every job the sender hands to the broker: its type and countdown."""
    seen: Sent = []

    def submit(job_type: Any, args: list[object], countdown: float | None = None) -> None:
        seen.append((job_type.name, countdown))

    monkeypatch.setattr(sender_module, "submit", submit)
    return seen


def names(delays: Sent) -> list[str]:
    return [name for name, _ in delays]


def test_a_burst_of_commits_sends_one_drain_and_every_wake_up(
    delays: Sent,
) -> None:
    sender = CelerySender(DrainRequests(clock=Clock()))
    for conversation_id in range(1, 51):  # fifty requests' outboxes, one after the other
        sender.send([IndexSearchBacklog(), WakeCompaction(conversation_id)])
    assert names(delays).count(INDEX_SEARCH_BACKLOG.name) == 1
    assert names(delays).count(LEAF.name) == 50


def test_a_drain_is_sent_to_start_a_second_after_the_commit_asking_for_it(
    delays: Sent,
) -> None:
    # It then takes that second's commits in one chunk: one write transaction
    # and one set of FTS5 segments instead of one per ~10 messages.
    CelerySender(DrainRequests(clock=Clock())).send([IndexSearchBacklog(), WakeCompaction(7)])
    assert delays == [(INDEX_SEARCH_BACKLOG.name, DRAIN_DELAY_SECONDS), (LEAF.name, None)]
    assert DRAIN_DELAY_SECONDS >= 0.5


def test_a_commit_while_the_drain_runs_sends_the_next_drain_after_the_delay(
    delays: Sent,
) -> None:
    clock = Clock()
    drains = DrainRequests(clock=clock)
    sender = CelerySender(drains)
    sender.send([IndexSearchBacklog()])

    def index() -> int:  # the worker's drain: it may have read the backlog already
        sender.send([IndexSearchBacklog()])
        sender.send([IndexSearchBacklog()])
        return 12

    assert drain(index, drains) == 12
    # Rows came in as it ran: it sent the next drain, with the delay, and that
    # one counts as queued: the commits after it send nothing until it runs.
    assert delays == [(INDEX_SEARCH_BACKLOG.name, DRAIN_DELAY_SECONDS)] * 2
    clock.now += DRAIN_DELAY_SECONDS
    sender.send([IndexSearchBacklog()])
    assert len(delays) == 2
    assert drain(lambda: 3, drains) == 3  # nothing committed as it ran: no next drain
    assert len(delays) == 2
    sender.send([IndexSearchBacklog()])  # the next commit sends one
    assert len(delays) == 3


def test_a_drain_that_fails_sends_nothing_and_the_next_commit_sends_one(
    delays: Sent,
) -> None:
    drains = DrainRequests(clock=Clock())
    sender = CelerySender(drains)
    sender.send([IndexSearchBacklog()])

    def index() -> int:
        sender.send([IndexSearchBacklog()])
        raise RuntimeError("database is locked")

    with pytest.raises(RuntimeError):
        drain(index, drains)
    assert len(delays) == 1
    sender.send([IndexSearchBacklog()])
    assert len(delays) == 2


def test_a_drain_finishing_with_no_commit_meanwhile_stops(
    delays: Sent,
) -> None:
    drains = DrainRequests(clock=Clock())
    assert drains.should_send()
    drains.started()
    assert drains.finished() is False
    assert drains.should_send()


def test_a_drain_that_never_starts_here_is_sent_again_after_a_while(
    delays: Sent,
) -> None:
    # The worker may be another process: this process never sees it start.
    clock = Clock()
    sender = CelerySender(DrainRequests(clock=clock))
    sender.send([IndexSearchBacklog()])
    clock.now += DRAIN_DELAY_SECONDS + 0.5  # due, not started yet: may still be on its way
    sender.send([IndexSearchBacklog()])
    clock.now += 0.6
    sender.send([IndexSearchBacklog()])
    assert names(delays) == [INDEX_SEARCH_BACKLOG.name] * 2


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
