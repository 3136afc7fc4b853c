"""Embedded mode's in-memory broker wakes its consumer only when there may be work."""

from __future__ import annotations

import uuid
from typing import Any

from kombu import Connection

from workers.memory_broker import ARRIVALS


def _channel_with(messages: int, prefetch: int) -> tuple[Connection, Any, str]:
    conn = Connection("memory://", transport="workers.memory_broker:Transport")
    channel = conn.channel()
    channel.basic_qos(0, prefetch, False)
    queue = f"q-{uuid.uuid4().hex}"
    channel.queue_declare(queue)
    for n in range(messages):
        channel.basic_publish(channel.prepare_message(f"m{n}"), "", queue)
    return conn, channel, queue


def test_a_publish_wakes_the_consumer() -> None:
    before = ARRIVALS.count
    conn, _channel, _queue = _channel_with(1, prefetch=4)
    assert ARRIVALS.count == before + 1
    conn.release()


def test_an_ack_with_room_in_the_prefetch_window_wakes_no_one() -> None:
    """The consumer takes messages whenever the window has room: nothing waits for this ack."""
    conn, channel, queue = _channel_with(2, prefetch=4)
    message = channel.basic_get(queue)
    before = ARRIVALS.count
    message.ack()
    rejected = channel.basic_get(queue)
    rejected.reject()
    assert ARRIVALS.count == before
    conn.release()


def test_an_ack_that_frees_a_full_window_wakes_the_consumer() -> None:
    """A message may be waiting for the freed slot (prefetch limit reached)."""
    conn, channel, queue = _channel_with(3, prefetch=2)
    first = channel.basic_get(queue)
    channel.basic_get(queue)
    assert not channel.qos.can_consume()
    before = ARRIVALS.count
    first.ack()
    assert ARRIVALS.count == before + 1
    assert channel.qos.can_consume()
    conn.release()


def test_a_requeued_message_wakes_the_consumer() -> None:
    conn, channel, queue = _channel_with(1, prefetch=4)
    message = channel.basic_get(queue)
    before = ARRIVALS.count
    message.reject(requeue=True)
    assert ARRIVALS.count > before
    assert channel.basic_get(queue) is not None
    conn.release()
