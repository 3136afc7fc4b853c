"""The completions relay (workers/completions.py) stops quietly when told to."""

from __future__ import annotations

import logging
import time

import pytest
import redis

from tests import servers
from workers import completions


def test_stop_relay_ends_the_thread_without_a_warning(
    redis_server: servers.RedisHandle, caplog: pytest.LogCaptureFixture
) -> None:
    completions.stop_relay()  # another test's relay, if one runs
    completions.hub(redis_server.url)
    thread = completions._relay
    assert thread is not None
    assert thread.is_alive()
    client = redis.Redis.from_url(redis_server.url)
    deadline = time.monotonic() + 5
    while not client.pubsub_numsub(completions.CHANNEL)[0][1]:  # subscribed
        assert time.monotonic() < deadline, "the relay never subscribed"
        time.sleep(0.02)

    with caplog.at_level(logging.WARNING, logger=completions.__name__):
        completions.stop_relay()
    assert not thread.is_alive()
    assert completions._relay is None
    assert not [r for r in caplog.records if "relay lost Redis" in r.getMessage()]
    # A later wait starts a new relay.
    completions.hub(redis_server.url)
    assert completions._relay is not None
    assert completions._relay is not thread
    completions.stop_relay()
