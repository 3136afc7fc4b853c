"""The token bucket on plain numbers and in one process (no Redis)."""

from __future__ import annotations

import pytest

from api.rate_limit import BucketLimit, Decision, LocalRateLimiter, refill_and_take
from lcm.settings import Settings


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_then_one_token_per_refill_interval() -> None:
    clock = Clock()
    limiter = LocalRateLimiter(clock)
    limit = BucketLimit(rate=2.0, burst=3)
    assert [limiter.take("t", limit).allowed for _ in range(4)] == [True, True, True, False]
    refused = limiter.take("t", limit)
    assert refused == Decision(False, 0.5)  # half a second until the next token
    assert refused.retry_after_header == 1
    clock.now += 0.5
    assert limiter.take("t", limit).allowed
    assert not limiter.take("t", limit).allowed
    clock.now += 60  # a long pause refills to the burst, never beyond
    assert [limiter.take("t", limit).allowed for _ in range(4)] == [True, True, True, False]


def test_tenants_have_their_own_buckets() -> None:
    limiter = LocalRateLimiter(Clock())
    limit = BucketLimit(rate=1.0, burst=1)
    assert limiter.take("a", limit).allowed
    assert not limiter.take("a", limit).allowed
    assert limiter.take("b", limit).allowed


def test_retry_after_is_a_whole_second_at_least() -> None:
    assert Decision(False, 0.01).retry_after_header == 1
    assert Decision(False, 2.2).retry_after_header == 3
    _, decision = refill_and_take(0.0, 0.0, 0.0, BucketLimit(rate=0.1, burst=1))
    assert decision.retry_after_header == 10


@pytest.mark.parametrize(
    ("rate", "burst", "expected"),
    [
        (None, None, None),
        (0, 10, None),  # 0 is unlimited
        (5, None, BucketLimit(5, 5)),  # default burst: one second's worth
        (0.2, None, BucketLimit(0.2, 1)),
        (5, 50, BucketLimit(5, 50)),
    ],
)
def test_limit_from_settings(
    rate: float | None, burst: int | None, expected: BucketLimit | None
) -> None:
    settings = Settings(rate_limit_per_second=rate, rate_limit_burst=burst)
    assert BucketLimit.of(settings) == expected
