"""The Redis broker transport shares one Redis client per channel (workers/redis_broker.py).

Kombu's own transport builds a ``redis.Redis`` object for every publish,
reservation and acknowledgement; ours builds one per channel and pool. These
tests count the clients each builds for the same traffic over a real Redis,
check that nothing is lost or reordered, that a replaced pool gets a client
of its own, and race threads that share one channel's client.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kombu import Connection
from kombu.transport import redis as kombu_redis

from tests import servers
from workers import redis_broker
from workers.celery_app import broker_transport

MESSAGES = 50


@pytest.fixture(params=["ours", "kombu's"])
def connection(request: Any, redis_server: servers.RedisHandle) -> Iterator[Connection]:
    transport = redis_broker.Transport if request.param == "ours" else kombu_redis.Transport
    with Connection(redis_server.url, transport=transport) as conn:
        yield conn


def _count_clients(channel: Any) -> list[Any]:
    """Every client ``channel`` builds from now on for its operations.

    Not the event loop's (over ``async_pool``): kombu builds that one once
    per channel, for BRPOP, whichever transport.
    """
    built: list[Any] = []
    make = channel.Client

    def counting(*args: Any, **kwargs: Any) -> Any:
        client = make(*args, **kwargs)
        if kwargs.get("connection_pool") is not channel._async_pool:
            built.append(client)
        return client

    channel.Client = counting
    return built


def test_a_queue_round_trip_builds_one_client_on_our_transport(connection: Connection) -> None:
    channel = connection.default_channel
    built = _count_clients(channel)
    queue = connection.SimpleQueue(f"broker-test-{uuid.uuid4().hex}", channel=channel)
    for n in range(MESSAGES):
        queue.put({"n": n})
    received = []
    for _ in range(MESSAGES):
        message = queue.get(timeout=5)
        received.append(message.payload["n"])
        message.ack()
    assert received == list(range(MESSAGES))
    with pytest.raises(queue.Empty):
        queue.get(timeout=0.2)
    if isinstance(channel, redis_broker.Channel):
        assert len(built) == 1
    else:
        # What the shared client saves: kombu's own builds one per operation.
        assert len(built) >= 2 * MESSAGES
    queue.close()


def test_a_replaced_pool_gets_a_client_of_its_own(redis_server: servers.RedisHandle) -> None:
    with Connection(redis_server.url, transport=redis_broker.Transport) as conn:
        channel = conn.default_channel
        with channel.conn_or_acquire() as first:
            assert first.ping()
        old_pool = channel.pool
        # What kombu does after a connection error: drop its pools.
        channel._disconnect_pools()
        with channel.conn_or_acquire() as second:
            assert second.ping()
        assert channel.pool is not old_pool
        assert second is not first
        assert second.connection_pool is channel.pool
        with channel.conn_or_acquire() as third:
            assert third is second


def test_threads_sharing_a_channel_client_lose_no_command(
    redis_server: servers.RedisHandle,
) -> None:
    """A worker's pool threads acknowledge on one channel at once: pipelines in parallel.

    Eight threads: kombu caps a channel's pool at ten connections, and a
    pipeline holds one while it executes, whichever transport.
    """
    threads, rounds = 8, 200
    prefix = f"broker-race-{uuid.uuid4().hex}"
    with Connection(redis_server.url, transport=redis_broker.Transport) as conn:
        channel = conn.default_channel
        built = _count_clients(channel)
        start = threading.Barrier(threads)
        errors: list[BaseException] = []

        def work(n: int) -> None:
            try:
                start.wait()
                for _ in range(rounds):
                    with channel.conn_or_acquire() as client, client.pipeline() as pipe:
                        pipe.incr(f"{prefix}:{n}")
                        pipe.incr(f"{prefix}:all")
                        pipe.execute()
                    time.sleep(0)  # let another thread in between rounds
            except BaseException as exc:  # reported below, not lost in the thread
                errors.append(exc)

        workers = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(60)
        assert errors == []
        with channel.conn_or_acquire() as client:
            counts = [int(client.get(f"{prefix}:{n}")) for n in range(threads)]
            total = int(client.get(f"{prefix}:all"))
        assert counts == [rounds] * threads
        assert total == threads * rounds
        # Threads that arrived together may each have built one before the
        # first was kept; kombu's own would have built threads * rounds.
        assert 1 <= len(built) <= threads


@pytest.mark.parametrize(
    ("url", "transport"),
    [
        ("redis://localhost:6379/0", "workers.redis_broker:Transport"),
        ("rediss://:secret@redis.example:6380/1", "workers.redis_broker:Transport"),
        ("memory://", "workers.memory_broker:Transport"),
        ("sentinel://localhost:26379", None),
    ],
)
def test_the_broker_url_picks_the_transport(url: str, transport: str | None) -> None:
    assert broker_transport(url) == transport


def test_a_rediss_url_keeps_its_tls_settings_on_our_transport() -> None:
    url = "rediss://:secret@redis.example:6380/1?ssl_cert_reqs=required"
    ours = Connection(url, transport=broker_transport(url))
    kombus = Connection(url)
    assert isinstance(ours.transport, redis_broker.Transport)
    assert ours.ssl == kombus.ssl
    assert ours.ssl
    assert (ours.hostname, ours.port, ours.virtual_host, ours.password) == (
        "redis.example",
        6380,
        "1",
        "secret",
    )
