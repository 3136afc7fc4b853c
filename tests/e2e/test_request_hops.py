"""A gateway turn's requests each make one thread-pool hop: the route looks its key up itself.

A hop (a sync dependency or route run by ``anyio.to_thread.run_sync``) wakes
a pool thread and then the event loop again. One API process serving a
gateway is CPU-bound, and the hand-offs were a measurable part of its CPU
(CHANGELOG.md): a plain ``def`` dependency adds one per request, so
these pin the count.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio.to_thread
import pytest
from fastapi.testclient import TestClient

from api import direct_routes
from lcm.db.engine import Database
from tests.conftest import auth, new_tenant

HOPS_PER_REQUEST = 1

BASE = "/v1/conversations/agent:main"
ASK = {"messages": [{"role": "user", "content": "run the tests"}]}
TURN = {"messages": [{"role": "assistant", "content": "done"}], "token_budget": 50_000}


@pytest.fixture
def hops(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The name of every callable sent to a thread while the test runs: through
    anyio's pool (dependencies, other routes) or the turn routes' own executor
    (``api/turn_threads.py``)."""
    seen: list[str] = []
    real = anyio.to_thread.run_sync
    real_turn = direct_routes.run_in_turn_thread

    async def counting(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        seen.append(getattr(func, "__qualname__", repr(func)))
        return await real(func, *args, **kwargs)

    async def counting_turn(func: Callable[..., Any], /, **kwargs: Any) -> Any:
        seen.append(getattr(func, "__qualname__", repr(func)))
        return await real_turn(func, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counting)
    monkeypatch.setattr(direct_routes, "run_in_turn_thread", counting_turn)
    return seen


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/messages", ASK),
        ("/assemble", {"token_budget": 50_000}),
        ("/turns", TURN),
    ],
)
def test_each_request_of_a_turn_hops_once(
    db: Database, client: TestClient, hops: list[str], path: str, body: dict[str, Any]
) -> None:
    headers = auth(new_tenant(db))
    # The conversation exists, as on every turn but a session's first.
    assert client.post(f"{BASE}/messages", json=ASK, headers=headers).status_code == 200
    hops.clear()
    response = client.post(f"{BASE}{path}", json=body, headers=headers)
    assert response.status_code == 200, response.text
    assert len(hops) == HOPS_PER_REQUEST, hops


@pytest.mark.parametrize("path", ["/messages", "/turns", "/assemble"])
def test_an_unknown_key_is_refused_in_the_routes_hop(
    db: Database, client: TestClient, hops: list[str], path: str
) -> None:
    new_tenant(db)
    body = {"/messages": ASK, "/turns": TURN, "/assemble": {"token_budget": 50_000}}[path]
    response = client.post(f"{BASE}{path}", json=body, headers={"Authorization": "Bearer nope"})
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthenticated"
    assert len(hops) == 1, hops


@pytest.mark.parametrize("path", ["/messages", "/turns", "/assemble"])
@pytest.mark.parametrize("header", [None, "Basic abc", "Bearer  "])
def test_a_request_without_a_bearer_token_is_refused_before_any_hop(
    client: TestClient, hops: list[str], path: str, header: str | None
) -> None:
    headers = {} if header is None else {"Authorization": header}
    response = client.post(f"{BASE}{path}", json=TURN, headers=headers)
    assert response.status_code == 401
    assert len(hops) == 0, hops


@pytest.mark.parametrize("path", ["/messages", "/turns", "/assemble"])
def test_a_refused_body_of_a_known_key_is_answered_before_the_routes_hop(
    db: Database, client: TestClient, hops: list[str], path: str
) -> None:
    headers = auth(new_tenant(db))
    assert client.post(f"{BASE}/messages", json=ASK, headers=headers).status_code == 200
    hops.clear()
    # A key the gate (api/key_gate.py) has seen: the body is refused without a hop.
    response = client.post(f"{BASE}{path}", json={"token_budget": "many"}, headers=headers)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_input"
    assert len(hops) == 0, hops


@pytest.mark.parametrize("path", ["/messages", "/turns", "/assemble"])
def test_an_unknown_key_is_refused_before_its_body_is_read(
    client: TestClient, hops: list[str], path: str
) -> None:
    headers = {"Authorization": "Bearer not-a-key"}
    response = client.post(f"{BASE}{path}", json={"token_budget": "many"}, headers=headers)
    assert response.status_code == 401
    assert len(hops) == 1, hops  # the gate's lookup
