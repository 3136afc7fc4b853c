"""Telling waiting requests that work finished: in-process, and across hosts over Redis.

Embedded mode runs the API and the worker in one process, so the worker
notifies the process's :class:`~lcm.completions.Completions` directly. In
the scaled deployment the worker also publishes the key on a Redis channel,
and each API process relays that channel into its own hub (one subscriber
thread, started by the first wait). Both are hints after the commit: a
waiter re-reads the database or the result backend when woken and at a
bounded re-check interval anyway, so a lost message only costs latency.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from celery.signals import task_postrun

from lcm.completions import Completions, task_key
from lcm.job_types import JOB_TYPES
from workers import runtime

log = logging.getLogger(__name__)

CHANNEL = "lcm:completions"
# How often a waiter re-reads the truth when no wake-up came: the bound on
# what a lost wake-up costs.
RECHECK_SECONDS = 0.5

HUB = Completions()

_relay_lock = threading.Lock()
_relay: threading.Thread | None = None
_relay_stop = threading.Event()
_relay_pubsub: Any = None
_publisher: tuple[str, Any] | None = None


def _redis_url(broker_url: str) -> str | None:
    return broker_url if broker_url.startswith(("redis://", "rediss://")) else None


def announce(key: str) -> None:
    """Wake whoever waits on ``key``, here and (over Redis) in API processes elsewhere."""
    HUB.notify(key)
    url = _redis_url(runtime.settings().broker_url)
    if url is None:
        return
    global _publisher
    try:
        import redis

        if _publisher is None or _publisher[0] != url:
            _publisher = (url, redis.Redis.from_url(url, socket_timeout=2))
        _publisher[1].publish(CHANNEL, key)
    except Exception:
        # Only latency is lost: the waiter re-checks within RECHECK_SECONDS.
        log.warning("completion of %s not published", key, exc_info=True)


def hub(broker_url: str) -> Completions:
    """The process's hub, fed from Redis too when the broker is Redis (scaled mode)."""
    global _relay
    url = _redis_url(broker_url)
    if url is not None:
        with _relay_lock:
            if _relay is None:
                _relay = threading.Thread(
                    target=_relay_forever,
                    args=(url, _relay_stop),
                    name="lcm-completions",
                    daemon=True,
                )
                _relay.start()
    return HUB


def _relay_forever(url: str, stop: threading.Event) -> None:
    global _relay_pubsub
    import redis

    while not stop.is_set():
        try:
            pubsub = redis.Redis.from_url(url).pubsub(ignore_subscribe_messages=True)
            with _relay_lock:
                _relay_pubsub = pubsub
            pubsub.subscribe(CHANNEL)
            for message in pubsub.listen():
                HUB.notify(message["data"].decode())
        except Exception as exc:
            if stop.is_set():  # stop_relay closed the connection under us
                return
            # Waiters fall back to re-checking meanwhile; reconnect shortly.
            log.warning("completions relay lost Redis (%s); reconnecting", exc)
            stop.wait(1.0)


def stop_relay(timeout: float = 5.0) -> None:
    """Stop the relay thread, if one runs, before its Redis goes away (a test
    session's teardown, a process shutting down): it ends without a warning."""
    global _relay, _relay_pubsub, _relay_stop
    with _relay_lock:
        thread, pubsub, stop = _relay, _relay_pubsub, _relay_stop
        _relay, _relay_pubsub, _relay_stop = None, None, threading.Event()
    if thread is None:
        return
    stop.set()
    if pubsub is not None:
        # Closing the connection wakes the thread blocked reading it.
        try:
            pubsub.close()
        except Exception:
            log.debug("closing the completions relay", exc_info=True)
    thread.join(timeout)


# Jobs whose result a request waits for; other jobs' results nobody awaits.
AWAITED_JOBS = frozenset(job.name for job in JOB_TYPES if job.awaited)


@task_postrun.connect
def _job_finished(task_id: str | None = None, task: Any = None, **_kwargs: Any) -> None:
    """Celery stored the job's result (postrun comes after the store): wake its waiter."""
    if task_id is not None and getattr(task, "name", None) in AWAITED_JOBS:
        announce(task_key(task_id))
