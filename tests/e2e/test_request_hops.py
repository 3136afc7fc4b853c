"""A gateway turn's requests each make two thread-pool hops: the key lookup, then the work.

A hop (a sync dependency or route run by ``anyio.to_thread.run_sync``) wakes
a pool thread and then the event loop again. One API process serving a
gateway is CPU-bound, and the hand-offs were a measurable part of its CPU
(see docs/scaling.md): a plain ``def`` dependency that only looks something
up adds one per request, so these pin the count.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio.to_thread
import pytest
from fastapi.testclient import TestClient

from lcm.db.engine import Database
from tests.conftest import auth, new_tenant

HOPS_PER_REQUEST = 2

BASE = "/v1/conversations/agent:main"
ASK = {"messages": [{"role": "user", "content": "run the tests"}]}
TURN = {"messages": [{"role": "assistant", "content": "done"}], "token_budget": 50_000}


@pytest.fixture
def hops(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The name of every callable sent to the thread pool while the test runs."""
    seen: list[str] = []
    real = anyio.to_thread.run_sync

    async def counting(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        seen.append(getattr(func, "__qualname__", repr(func)))
        return await real(func, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counting)
    return seen


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/messages", ASK),
        ("/assemble", {"token_budget": 50_000}),
        ("/turns", TURN),
    ],
)
def test_each_request_of_a_turn_hops_twice(
    db: Database, client: TestClient, hops: list[str], path: str, body: dict[str, Any]
) -> None:
    headers = auth(new_tenant(db))
    # The conversation exists, as on every turn but a session's first.
    assert client.post(f"{BASE}/messages", json=ASK, headers=headers).status_code == 200
    hops.clear()
    response = client.post(f"{BASE}{path}", json=body, headers=headers)
    assert response.status_code == 200, response.text
    assert len(hops) == HOPS_PER_REQUEST, hops


def test_a_refused_key_is_answered_after_one_hop(
    db: Database, client: TestClient, hops: list[str]
) -> None:
    new_tenant(db)
    response = client.post(f"{BASE}/turns", json=TURN, headers={"Authorization": "Bearer nope"})
    assert response.status_code == 401
    assert len(hops) == 1, hops
