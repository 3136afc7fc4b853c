"""Per-tenant request rate limits: one token bucket per tenant.

A bucket holds at most ``burst`` tokens and refills at ``rate`` tokens a
second; a request takes one token or is refused with the time until the next
token (``Retry-After``). With Redis the buckets are shared by every API
process: the whole read-refill-take-write runs in one Lua script, which Redis
executes atomically, and it reads Redis's own clock so that API hosts whose
clocks differ still agree on a bucket. Embedded mode (no Redis) keeps the
buckets in the process.

Why not a library: ``limits`` (Redis and memory backends) offers fixed and
moving windows but no token bucket; a moving window of ``burst`` per
``burst / rate`` seconds makes a client that spent its burst wait the whole
window instead of one refill interval, and the Lua below is the whole
algorithm.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import redis
from prometheus_client import Counter

from lcm.settings import TenantLimits

log = logging.getLogger(__name__)

RATE_LIMITED = Counter(
    "lcm_rate_limited_requests_total", "Requests refused by a tenant's rate limit", ["tenant"]
)
RATE_LIMIT_FAILED_OPEN = Counter(
    "lcm_rate_limit_failed_open_total",
    "Requests let through unchecked because the rate limit store was unreachable",
)


@dataclass(frozen=True, slots=True)
class BucketLimit:
    rate: float  # tokens per second
    burst: int  # bucket size

    @classmethod
    def of(cls, limits: TenantLimits) -> BucketLimit | None:
        """The tenant's bucket, or None when its rate is unlimited (0 or unset)."""
        rate = limits.rate_limit_per_second
        if not rate:
            return None
        # Default burst: one second's worth (at least one request).
        burst = limits.rate_limit_burst or max(1, math.ceil(rate))
        return cls(rate, burst)


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    retry_after: float = 0.0  # seconds until a token is there (when refused)

    @property
    def retry_after_header(self) -> int:
        """Whole seconds, at least 1 (``Retry-After`` takes integers; 0 invites a hot loop)."""
        return max(1, math.ceil(self.retry_after))


class RateLimiter(Protocol):
    def take(self, tenant_id: str, limit: BucketLimit) -> Decision:
        """Take one token from the tenant's bucket, or say how long until one is there."""


def refill_and_take(
    tokens: float, last: float, now: float, limit: BucketLimit
) -> tuple[float, Decision]:
    """The bucket algorithm on plain numbers (the Lua script does the same)."""
    tokens = min(float(limit.burst), tokens + max(0.0, now - last) * limit.rate)
    if tokens >= 1.0:
        return tokens - 1.0, Decision(True)
    return tokens, Decision(False, (1.0 - tokens) / limit.rate)


class LocalRateLimiter:
    """Buckets in this process (embedded mode: one API process, no Redis)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}
        # Request threads share the buckets; the lock makes take() atomic.
        self._lock = threading.Lock()

    def take(self, tenant_id: str, limit: BucketLimit) -> Decision:
        with self._lock:
            now = self._clock()
            tokens, last = self._buckets.get(tenant_id, (float(limit.burst), now))
            tokens, decision = refill_and_take(tokens, last, now, limit)
            self._buckets[tenant_id] = (tokens, now)
            return decision


# KEYS[1] bucket; ARGV rate, burst. Returns {allowed, seconds to wait} (the wait
# as a string: Redis truncates Lua numbers to integers).
_TAKE = """
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1]) or burst
local last = tonumber(state[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - last) * rate)
local allowed, wait = 0, 0
if tokens >= 1 then
  tokens = tokens - 1
  allowed = 1
else
  wait = (1 - tokens) / rate
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil(burst / rate * 1000) + 1000)
return {allowed, tostring(wait)}
"""


class RedisRateLimiter:
    """Buckets in Redis, shared by every API process that uses the same Redis.

    Fails open: when Redis cannot be reached the request goes through, with a
    log line and ``lcm_rate_limit_failed_open_total``. A rate limit protects
    the service from one tenant; turning a Redis outage into a 5xx for every
    tenant would do more harm than letting requests through unmetered for a
    while. After a failure Redis is not asked again for ``retry_seconds``,
    so an outage costs one connect timeout, not one per request.
    """

    def __init__(
        self, url: str, *, timeout: float = 0.25, retry_seconds: float = 5.0, prefix: str = "lcm"
    ) -> None:
        self._redis = redis.Redis.from_url(
            url, socket_timeout=timeout, socket_connect_timeout=timeout
        )
        self._script = self._redis.register_script(_TAKE)
        self._prefix = prefix
        self._retry_seconds = retry_seconds
        self._down_until = 0.0

    def take(self, tenant_id: str, limit: BucketLimit) -> Decision:
        if time.monotonic() < self._down_until:
            RATE_LIMIT_FAILED_OPEN.inc()
            return Decision(True)
        key = f"{self._prefix}:ratelimit:{tenant_id}"
        try:
            allowed, wait = self._script(keys=[key], args=[limit.rate, limit.burst])
        except redis.RedisError as exc:
            self._down_until = time.monotonic() + self._retry_seconds
            RATE_LIMIT_FAILED_OPEN.inc()
            log.warning(
                "rate limit store unreachable (%s): letting requests through unchecked for %.0f s",
                exc,
                self._retry_seconds,
            )
            return Decision(True)
        return Decision(bool(int(allowed)), float(wait))

    def close(self) -> None:
        self._redis.close()


def build_rate_limiter(redis_url: str) -> RateLimiter:
    """Shared buckets when there is a Redis, this process's own otherwise."""
    return RedisRateLimiter(redis_url) if redis_url else LocalRateLimiter()
