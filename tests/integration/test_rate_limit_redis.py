"""The rate limit bucket in Redis is one bucket for every API process; Redis down fails open."""

from __future__ import annotations

import time

from api.rate_limit import RATE_LIMIT_FAILED_OPEN, BucketLimit, RedisRateLimiter
from tests import servers


def test_two_limiters_share_one_bucket(redis_server: servers.RedisHandle) -> None:
    # Two instances, as two API processes would hold: no state in common but Redis.
    first = RedisRateLimiter(redis_server.url, prefix=f"test{time.time_ns()}")
    second = RedisRateLimiter(redis_server.url, prefix=first._prefix)
    limit = BucketLimit(rate=0.5, burst=5)
    taken = [first.take("acme", limit).allowed for _ in range(3)]
    taken += [second.take("acme", limit).allowed for _ in range(2)]
    assert taken == [True] * 5
    refused = [second.take("acme", limit), first.take("acme", limit)]
    assert not any(d.allowed for d in refused)
    # The next token is ~2 s away (rate 0.5/s), whichever process asks.
    assert all(1.5 < d.retry_after <= 2.0 for d in refused)
    assert refused[0].retry_after_header == 2
    # Another tenant's bucket is untouched.
    assert first.take("other", limit).allowed
    first.close()
    second.close()


def test_the_bucket_refills_at_the_rate(redis_server: servers.RedisHandle) -> None:
    limiter = RedisRateLimiter(redis_server.url, prefix=f"test{time.time_ns()}")
    limit = BucketLimit(rate=20.0, burst=1)
    assert limiter.take("acme", limit).allowed
    assert not limiter.take("acme", limit).allowed
    time.sleep(0.06)  # more than 1/20 s: one token back
    assert limiter.take("acme", limit).allowed
    limiter.close()


def test_redis_down_lets_requests_through() -> None:
    port = servers.free_port()  # nothing listens there
    limiter = RedisRateLimiter(f"redis://127.0.0.1:{port}/0", timeout=0.2)
    before = RATE_LIMIT_FAILED_OPEN._value.get()
    started = time.monotonic()
    decisions = [limiter.take("acme", BucketLimit(rate=1.0, burst=1)) for _ in range(20)]
    elapsed = time.monotonic() - started
    assert all(d.allowed for d in decisions)
    assert RATE_LIMIT_FAILED_OPEN._value.get() - before == 20
    # Only the first request waited for the connect timeout; the rest skip Redis.
    assert elapsed < 1.0
