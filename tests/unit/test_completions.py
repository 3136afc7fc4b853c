"""Waiting woken by completion: the hub's semantics and the expand-query wait's deadline."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from celery.exceptions import TimeoutError as CeleryTimeout

from lcm.completions import Completions, task_key
from workers.tasks.expansion import wait_for_result


def test_a_notify_between_the_read_and_the_wait_is_not_lost() -> None:
    hub = Completions()
    with hub.watch("debt:1") as woken:
        woken.clear()
        hub.notify("debt:1")  # lands after the waiter read the truth, before it waits
        assert woken.wait(0)
    with hub.watch("debt:1") as other:
        hub.notify("debt:2")
        assert not other.is_set()  # keys are separate
    assert hub._waiters == {}  # nothing left behind once the waits ended


class StoredResult:
    """Stands in for a Celery ``AsyncResult`` whose backend the test fills."""

    def __init__(self, task_id: str) -> None:
        self.id = task_id
        self.value: dict[str, Any] | None = None
        self.reads = 0

    def ready(self) -> bool:
        self.reads += 1
        return self.value is not None

    def get(self, timeout: float, propagate: bool) -> dict[str, Any]:
        assert self.value is not None
        assert timeout > 0
        return self.value


def test_the_wait_returns_the_stored_result_when_woken() -> None:
    hub = Completions()
    pending = StoredResult("t1")

    def finish() -> None:
        time.sleep(0.1)
        pending.value = {"answer": "42"}
        hub.notify(task_key("t1"))

    threading.Thread(target=finish).start()
    # A re-check interval far past the deadline: only the wake-up can end it in time.
    assert wait_for_result(pending, 30, hub, recheck=60) == {"answer": "42"}
    assert pending.reads == 2  # read once before waiting, once when woken: no polling


def test_a_lost_wake_up_costs_a_re_check_not_the_answer() -> None:
    pending = StoredResult("t2")
    threading.Timer(0.1, lambda: setattr(pending, "value", {"answer": "late"})).start()
    assert wait_for_result(pending, 30, Completions(), recheck=0.05) == {"answer": "late"}


def test_a_job_that_never_stores_a_result_still_meets_the_deadline() -> None:
    hub = Completions()
    pending = StoredResult("t3")
    spam = threading.Timer(0.05, lambda: hub.notify(task_key("t3")))  # woken, nothing there
    spam.start()
    started = time.monotonic()
    with pytest.raises(CeleryTimeout):
        wait_for_result(pending, 0.3, hub, recheck=60)
    assert 0.3 <= time.monotonic() - started < 30
