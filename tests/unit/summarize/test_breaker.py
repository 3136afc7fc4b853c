"""The circuit breaker on its own: states, timing through an injected clock, threads."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from lcm.errors import ProviderUnavailable
from lcm.summarize.breaker import CircuitBreaker
from tests.unit.summarize.conftest import FakeClock


def open_breaker(clock: FakeClock, failures: int = 2) -> CircuitBreaker:
    breaker = CircuitBreaker(failures, 10.0, clock=clock)
    for _ in range(failures):
        breaker.before_call()
        breaker.record_failure()
    return breaker


def test_opens_after_consecutive_failures_only(clock: FakeClock) -> None:
    breaker = CircuitBreaker(3, 10.0, clock=clock)
    for outcome in ("fail", "fail", "ok", "fail", "fail"):
        breaker.before_call()
        breaker.record_failure() if outcome == "fail" else breaker.record_success()
    assert breaker.state == "closed"  # the success reset the count
    breaker.before_call()
    breaker.record_failure()
    assert breaker.state == "open"
    with pytest.raises(ProviderUnavailable):
        breaker.before_call()


def test_half_open_after_reset_period(clock: FakeClock) -> None:
    breaker = open_breaker(clock)
    clock.advance(9.99)
    assert breaker.state == "open"
    clock.advance(0.01)
    assert breaker.state == "half_open"
    breaker.before_call()  # the trial
    with pytest.raises(ProviderUnavailable, match="trial"):
        breaker.before_call()  # everyone else still fails fast
    breaker.record_success()
    assert breaker.state == "closed"
    breaker.before_call()


def test_failed_trial_reopens_for_a_full_period(clock: FakeClock) -> None:
    breaker = open_breaker(clock)
    clock.advance(10)
    breaker.before_call()
    breaker.record_failure()
    assert breaker.state == "open"
    clock.advance(9)
    with pytest.raises(ProviderUnavailable):
        breaker.before_call()
    clock.advance(1)
    breaker.before_call()


def test_exactly_one_trial_among_racing_threads(clock: FakeClock) -> None:
    breaker = open_breaker(clock)
    clock.advance(10)
    admitted: list[int] = []
    start = threading.Barrier(16)

    def attempt(n: int) -> None:
        start.wait()
        try:
            breaker.before_call()
        except ProviderUnavailable:
            return
        admitted.append(n)

    threads = [threading.Thread(target=attempt, args=(n,)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(admitted) == 1


def test_concurrent_failures_are_all_counted(clock: FakeClock) -> None:
    breaker = CircuitBreaker(400, 10.0, clock=clock)

    def fail_many() -> None:
        for _ in range(50):
            breaker.record_failure()

    threads = [threading.Thread(target=fail_many) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert breaker.state == "open"  # 8 x 50 = 400 failures, none lost


def test_rejects_a_zero_threshold() -> None:
    with pytest.raises(ValueError, match="failure_threshold must be >= 1"):
        CircuitBreaker(0, 1.0)


def test_racing_threads_share_one_breaker_per_model() -> None:
    """Pool threads asking for a model's breaker at once all get the same one."""
    from concurrent.futures import ThreadPoolExecutor
    from threading import Barrier

    from lcm.summarize.llm import Breakers

    breakers = Breakers(3, 10.0)
    start = Barrier(16)

    def ask(_: int) -> CircuitBreaker:
        start.wait()
        return breakers.for_model("claude-x")

    with ThreadPoolExecutor(16) as pool:
        got = list(pool.map(ask, range(16)))
    assert len({id(b) for b in got}) == 1
    assert list(breakers.states()) == ["claude-x"]


def test_racing_threads_build_the_llm_side_of_services_once(tmp_path: Path) -> None:
    """The first summaries of a worker's pool threads share one client and one summarizer."""
    from concurrent.futures import ThreadPoolExecutor
    from threading import Barrier

    from lcm.services import Services
    from lcm.settings import Settings

    settings = Settings(
        database_url=f"sqlite:///{tmp_path / 'x.db'}",
        files_dir=tmp_path / "files",
        ANTHROPIC_API_KEY="sk-test",
    )
    services = Services.build(settings)
    start = Barrier(8)

    def first_use(_: int) -> tuple[int, int]:
        start.wait()
        return id(services.summarizer), id(services.llm)

    try:
        with ThreadPoolExecutor(8) as pool:
            got = set(pool.map(first_use, range(8)))
    finally:
        services.close()
    assert len(got) == 1
