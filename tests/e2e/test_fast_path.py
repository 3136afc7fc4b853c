"""The turn routes' fast path (``api/fast_path.py``) does every duty of the stack it skips.

An ordinary ``POST …/messages``, ``…/assemble`` or ``…/turns`` is served by
one outer layer instead of the app's middleware stack. These pin that it is
(the stack's innermost layer never sees it), and that each duty of the
stack holds for those routes: the request id, the metrics, the body limit
(declared and streamed), the UTF-8 check, the key gate before the body,
the error mapping (the domain's errors and an unexpected one).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from prometheus_client import REGISTRY
from starlette.types import Message, Receive, Scope, Send

from api.limits import BodySizeLimit
from api.routes import conversations
from lcm.db.engine import Database
from lcm.tenants.keys import IssuedKey
from tests.conftest import RecordingSender, api_client, auth, new_tenant

LIMIT = 64 * 1024
BASE = "/v1/conversations/agent:main"
ASK: dict[str, Any] = {"messages": [{"role": "user", "content": "run the tests"}]}
TURN: dict[str, Any] = {"messages": [{"role": "assistant", "content": "ok"}], "token_budget": 5000}
ASSEMBLE: dict[str, Any] = {"token_budget": 5000}
BODIES: dict[str, dict[str, Any]] = {"/messages": ASK, "/turns": TURN, "/assemble": ASSEMBLE}
TEMPLATE = "/v1/conversations/{key:path}"


@pytest.fixture
def small_client(db: Database) -> Iterator[TestClient]:
    settings = db.settings.model_copy(update={"max_body_bytes": LIMIT})
    yield from api_client(settings, db, RecordingSender())


@pytest.fixture
def stacked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The path of every request that reached the stack's innermost layer (the body limit)."""
    seen: list[str] = []
    real = BodySizeLimit.__call__

    async def counting(self: BodySizeLimit, scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(scope["path"])
        await real(self, scope, receive, send)

    monkeypatch.setattr(BodySizeLimit, "__call__", counting)
    return seen


@pytest.fixture
def known(small_client: TestClient, db: Database) -> dict[str, str]:
    """A tenant's headers, its key already past the gate (so its turns take the fast path)."""
    headers = auth(new_tenant(db))
    assert small_client.post(f"{BASE}/messages", json=ASK, headers=headers).status_code == 200
    return headers


def counted(path: str, status: int) -> float:
    """Requests counted under the route's template (``unmatched``: refused before routing)."""
    route = "unmatched" if path == "unmatched" else f"{TEMPLATE}{path}"
    labels = {"method": "POST", "route": route, "status": str(status)}
    return REGISTRY.get_sample_value("lcm_http_requests_total", labels) or 0.0


@pytest.mark.parametrize("path", ["/messages", "/assemble", "/turns"])
def test_an_ordinary_turn_request_skips_the_stack_and_is_counted_and_identified(
    small_client: TestClient, known: dict[str, str], stacked: list[str], path: str
) -> None:
    before = counted(path, 200)
    response = small_client.post(f"{BASE}{path}", json=BODIES[path], headers=known)
    assert response.status_code == 200, response.text
    assert stacked == []
    assert counted(path, 200) == before + 1
    assert re.fullmatch(r"[0-9a-f]{32}", response.headers["x-request-id"])
    given = {**known, "X-Request-ID": "gw-turn.42"}
    response = small_client.post(f"{BASE}{path}", json=BODIES[path], headers=given)
    assert response.headers["x-request-id"] == "gw-turn.42"
    assert stacked == []


def test_a_key_not_seen_lately_goes_through_the_stack_then_the_fast_path(
    small_client: TestClient, db: Database, stacked: list[str]
) -> None:
    headers = auth(new_tenant(db))
    for _ in range(2):
        assert small_client.post(f"{BASE}/messages", json=ASK, headers=headers).status_code == 200
    assert stacked == [f"{BASE}/messages"]


def test_a_declared_body_over_the_limit_is_413(
    small_client: TestClient, known: dict[str, str]
) -> None:
    before = counted("unmatched", 413)  # as before the fast path: refused before routing
    body = b'{"messages": []}' + b" " * LIMIT
    headers = {**known, "content-type": "application/json"}
    response = small_client.post(f"{BASE}/messages", content=body, headers=headers)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "too_large"
    assert "x-request-id" in response.headers
    assert counted("unmatched", 413) == before + 1


def test_a_streamed_body_over_the_limit_is_413(
    small_client: TestClient, known: dict[str, str], db: Database
) -> None:
    def chunks() -> Iterator[bytes]:  # no Content-Length: the size shows only as it comes
        yield b'{"messages": [{"role": "user", "content": "'
        for _ in range(8):
            yield b"x" * (LIMIT // 4)
        yield b'"}]}'

    headers = {**known, "content-type": "application/json"}
    response = small_client.post(f"{BASE}/messages", content=chunks(), headers=headers)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "too_large"
    status = small_client.get(f"{BASE}/status", headers=known).json()
    assert status["messages"] == 1  # only the first (known's) message: nothing written


def test_a_path_that_is_not_utf8_is_400(small_client: TestClient, known: dict[str, str]) -> None:
    response = small_client.post("/v1/conversations/%FF/messages", json=ASK, headers=known)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_path"


def test_a_body_that_does_not_validate_is_answered_by_fastapi(
    small_client: TestClient, known: dict[str, str]
) -> None:
    response = small_client.post(f"{BASE}/messages", json={"mesages": []}, headers=known)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_input"
    assert "x-request-id" in response.headers


def test_no_key_is_401_before_one_byte_of_the_body(small_client: TestClient) -> None:
    app = small_client.app
    received: list[Message] = []
    sent: list[Message] = []

    async def receive() -> Message:
        received.append({"type": "http.request"})
        raise AssertionError("the body was read")

    async def send(message: Message) -> None:
        sent.append(message)

    scope: Scope = {
        "type": "http",
        "method": "POST",
        "path": f"{BASE}/turns",
        "raw_path": f"{BASE}/turns".encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"content-type", b"application/json"), (b"content-length", b"99")],
    }
    asyncio.run(app(scope, receive, send))  # type: ignore[arg-type]
    assert received == []
    assert sent[0]["status"] == 401
    assert any(name == b"x-request-id" for name, _ in sent[0]["headers"])


def test_a_domain_error_is_mapped_on_the_fast_path(
    small_client: TestClient, known: dict[str, str], stacked: list[str]
) -> None:
    response = small_client.post(
        "/v1/conversations/never-seen/assemble", json={"token_budget": 1000}, headers=known
    )
    assert response.status_code == 404, response.text
    assert response.json()["error"]["code"] == "not_found"
    assert "x-request-id" in response.headers
    assert stacked == []


def test_an_unexpected_error_is_a_500_with_the_generic_body(
    small_client: TestClient, known: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(conversations, "target_for_assembly", broken)
    before = counted("/assemble", 500)
    response = small_client.post(f"{BASE}/assemble", json=ASSEMBLE, headers=known)
    assert response.status_code == 500
    assert response.json() == {"error": {"code": "internal_error", "message": "internal error"}}
    assert counted("/assemble", 500) == before + 1


def test_a_revoked_key_still_known_to_the_gate_is_refused_by_the_route(
    small_client: TestClient, db: Database, tenant: IssuedKey
) -> None:
    from lcm.tenants.keys import revoke_key

    headers = auth(tenant)
    assert small_client.post(f"{BASE}/messages", json=ASK, headers=headers).status_code == 200
    with db.session() as session:
        revoke_key(session, tenant.tenant_id, tenant.key.id)
        session.commit()
    response = small_client.post(f"{BASE}/messages", json=ASK, headers=headers)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
