"""No task message carries a tenant's text: everything Redis sees during a real cycle.

Ingest through the API, compaction by a real worker process, an expand-query
answered by it: Redis's MONITOR records every command any process sends
(task messages, Flower's events, results, completion wake-ups). Kombu
encodes message bodies in base64, so every base64 run is decoded too; then
none of the user's words may appear anywhere.
"""

from __future__ import annotations

import base64
import binascii
import re
import secrets
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from api.app import create_app
from lcm.db.engine import Database
from lcm.settings import Settings
from tests import servers
from tests.conftest import auth, new_tenant
from workers.link import CeleryLink
from workers.sender import CelerySender

pytestmark = pytest.mark.celery

_BASE64_RUN = re.compile(r"[A-Za-z0-9+/]{16,}={0,2}")
_STOP = "lcm-test-monitor-stop"


class BrokerTraffic:
    """Every command Redis receives (from any process) while it runs, decoded."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.commands: list[str] = []
        self._monitor = redis.Redis.from_url(url).monitor()
        self._monitor.__enter__()  # MONITOR is on before the cycle starts
        self._thread = threading.Thread(target=self._record, daemon=True)
        self._thread.start()

    def _record(self) -> None:
        while True:
            command = str(self._monitor.next_command()["command"])
            if _STOP in command:
                return
            self.commands.append(command)

    def stop(self) -> str:
        """All traffic as one text: raw commands plus every base64 run decoded."""
        redis.Redis.from_url(self.url).echo(_STOP)
        self._thread.join(10)
        self._monitor.__exit__()
        return "\n".join([*self.commands, *(base64_decoded(c) for c in self.commands)])


def base64_decoded(command: str) -> str:
    """Every base64 run in ``command`` decoded (a message body travels encoded), one per line."""
    parts = []
    for run in _BASE64_RUN.findall(command):
        try:
            parts.append(base64.b64decode(run, validate=True).decode("utf-8", "replace"))
        except (binascii.Error, ValueError):
            continue
    return "\n".join(parts)


@pytest.fixture
def api(pg_db: Database, celery_worker: Any, worker_env: dict[str, str]) -> Iterator[TestClient]:
    from workers.bootstrap import bootstrap

    # This process sends and awaits jobs through the test Redis (as the API does).
    bootstrap(
        Settings(
            database_url=worker_env["LCM_DATABASE_URL"],
            broker_url=worker_env["LCM_BROKER_URL"],
            result_backend_url=worker_env["LCM_RESULT_BACKEND_URL"],
        )
    )
    app = create_app(
        pg_db.settings,
        link=CeleryLink(),
        database=pg_db,
        broker_ping=lambda: True,
        sender=CelerySender(),
    )
    with TestClient(app) as client:
        yield client


def wait_for_debt(api: TestClient, headers: dict[str, str], key: str) -> dict[str, Any]:
    deadline = time.monotonic() + 90
    while True:
        status = api.get(f"/v1/conversations/{key}/status", headers=headers).json()
        if status["debt"] and status["debt"]["status"] in ("done", "failed"):
            return status
        if time.monotonic() > deadline:
            pytest.fail(f"compaction did not finish: {status}")
        time.sleep(0.2)


def test_no_published_message_carries_the_users_text(
    pg_db: Database, api: TestClient, redis_server: servers.RedisHandle
) -> None:
    tenant = new_tenant(pg_db)
    headers = auth(tenant)
    in_messages = f"quokkasecret{secrets.token_hex(6)}"
    in_prompt = f"promptsecret{secrets.token_hex(6)}"
    overrides = {"fresh_tail_count": 4, "leaf_min_fanout": 4, "leaf_chunk_tokens": 400}
    assert api.patch("/v1/tenant/settings", headers=headers, json=overrides).status_code == 200

    traffic = BrokerTraffic(redis_server.url)
    try:
        messages = [
            {
                "role": "user" if i % 2 == 0 else "assistant",
                "content": f"turn {i}: the {in_messages} config was changed and retested " * 5,
            }
            for i in range(24)
        ]
        turn = api.post(
            "/v1/conversations/private/turns",
            headers=headers,
            json={"messages": messages, "token_budget": 1_500},
        )
        assert turn.status_code == 200, turn.text
        assert turn.json()["compaction"] == "scheduled", turn.text
        status = wait_for_debt(api, headers, "private")
        assert status["debt"]["status"] == "done", status
        assert status["summaries"], status
        answer = api.post(
            "/v1/expand-query",
            headers=headers,
            json={
                "prompt": f"What changed in the config? {in_prompt}",
                "query": in_messages,
                "session_key": "private",
            },
        )
        assert answer.status_code == 200, answer.text
        # The answer quotes the history: it is the tenant's text, and it must
        # have reached the API without passing through Redis.
        assert in_messages in answer.json()["answer"]
    finally:
        seen = traffic.stop()

    # The capture saw the jobs themselves (else the test proves nothing).
    for task in ("compaction.leaf", "expansion.query"):
        assert task in seen, f"no {task} message captured"
    for text in (in_messages, in_prompt, "retested"):
        assert text not in seen, f"{text!r} went through Redis"


def test_a_wake_up_is_one_push_onto_its_queue_and_no_event(
    worker_env: dict[str, str], redis_server: servers.RedisHandle
) -> None:
    # A "task-sent" event per publish was a second Redis publish, ~0.5 ms of
    # the sender's ~1.2 ms per job, sent whether or not a monitor listened.
    from workers.bootstrap import bootstrap
    from workers.sender import wake

    bootstrap(
        Settings(
            database_url=worker_env["LCM_DATABASE_URL"],
            broker_url=worker_env["LCM_BROKER_URL"],
            result_backend_url=worker_env["LCM_RESULT_BACKEND_URL"],
        )
    )
    redis.Redis.from_url(redis_server.url).delete("compaction")
    traffic = BrokerTraffic(redis_server.url)
    try:
        wake(987_654)
    finally:
        traffic.stop()
    pushes = [c for c in traffic.commands if c.startswith("LPUSH")]
    publishes = [c for c in traffic.commands if c.startswith("PUBLISH")]
    assert len(pushes) == 1
    assert pushes[0].startswith("LPUSH compaction ")
    assert "987654" in base64_decoded(pushes[0])
    assert publishes == []
