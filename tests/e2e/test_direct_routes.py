"""A gateway turn's routes skip FastAPI's generic handling, and answer as it would.

``api/direct_routes.py``: the ordinary request to ``…/messages``,
``…/assemble`` and ``…/turns`` is validated from its raw bytes and run
without FastAPI's dependency solver; anything else (a body that is not
``application/json`` or does not validate, a key that does not) goes to
FastAPI's own handler. These pin both sides: the ordinary request never
reaches the solver, the others are answered as FastAPI answers them, and
the OpenAPI document is the one the plain routes make.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import fastapi.routing
import pytest
from fastapi import APIRouter
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from starlette.requests import Request

from api.direct_routes import DirectRoute
from api.routes import conversations
from lcm.db.engine import Database
from tests.conftest import auth, new_tenant

BASE = "/v1/conversations/agent:main"
ASK: dict[str, Any] = {"messages": [{"role": "user", "content": "run the tests"}]}
TURN: dict[str, Any] = {
    "messages": [{"role": "assistant", "content": "done"}],
    "token_budget": 50_000,
}
ASSEMBLE: dict[str, Any] = {"token_budget": 50_000}
BODIES: dict[str, dict[str, Any]] = {"/messages": ASK, "/turns": TURN, "/assemble": ASSEMBLE}


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The path of every request whose body FastAPI's generic handler parsed."""
    seen: list[str] = []
    real = Request.json

    async def counting(self: Request) -> Any:
        seen.append(self.url.path)
        return await real(self)

    monkeypatch.setattr(Request, "json", counting)
    return seen


@pytest.fixture
def solved(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The path of every request FastAPI's dependency solver handled."""
    seen: list[str] = []
    real = fastapi.routing.solve_dependencies

    async def counting(*, request: Any, **kwargs: Any) -> Any:
        seen.append(request.url.path)
        return await real(request=request, **kwargs)

    monkeypatch.setattr(fastapi.routing, "solve_dependencies", counting)
    return seen


@pytest.mark.parametrize("path", ["/messages", "/assemble", "/turns"])
def test_an_ordinary_request_of_a_turn_skips_the_dependency_solver(
    db: Database, client: TestClient, solved: list[str], path: str
) -> None:
    headers = auth(new_tenant(db))
    assert client.post(f"{BASE}/messages", json=ASK, headers=headers).status_code == 200
    solved.clear()
    response = client.post(f"{BASE}{path}", json=BODIES[path], headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    assert solved == []
    # Still counted under its route template (api/metrics.py reads scope["route"]).
    metrics = client.get("/metrics").text
    assert f'route="/v1/conversations/{{key:path}}{path}",status="200"' in metrics


def _post(
    client: TestClient, path: str, content: bytes, headers: dict[str, str]
) -> tuple[int, Any]:
    response = client.post(f"{BASE}{path}", content=content, headers=headers)
    return response.status_code, response.json()


# Bodies FastAPI refuses, each answered by its own handler (the solver runs).
REFUSED: dict[str, Callable[[dict[str, Any]], bytes]] = {
    "not JSON": lambda body: b"{not json",
    "an unknown field": lambda body: json.dumps({**body, "tokenBudget": 5}).encode(),
    "a wrong type": lambda body: json.dumps({**body, "token_budget": "many"}).encode(),
    "a lone surrogate": lambda body: json.dumps({**body, "session_id": "\ud800"}).encode(),
    "not an object": lambda body: b"[1, 2]",
}


@pytest.mark.parametrize("path", ["/messages", "/assemble", "/turns"])
@pytest.mark.parametrize("refusal", sorted(REFUSED))
def test_a_refused_body_is_answered_by_fastapi_itself(
    db: Database, client: TestClient, parsed: list[str], path: str, refusal: str
) -> None:
    headers = {**auth(new_tenant(db)), "content-type": "application/json"}
    status, body = _post(client, path, REFUSED[refusal](BODIES[path]), headers)
    assert status == 400, body
    assert body["error"]["code"] in ("invalid_input", "invalid_text")
    assert parsed == [f"{BASE}{path}"]


@pytest.mark.parametrize("path", ["/messages", "/assemble", "/turns"])
def test_a_body_sent_as_another_media_type_is_refused_as_before(
    db: Database, client: TestClient, solved: list[str], path: str
) -> None:
    headers = {**auth(new_tenant(db)), "content-type": "text/plain"}
    status, body = _post(client, path, json.dumps(BODIES[path]).encode(), headers)
    assert status == 400
    assert body["error"]["code"] == "invalid_input"
    assert solved == [f"{BASE}{path}"]


def test_json_with_a_charset_is_an_ordinary_request(
    db: Database, client: TestClient, solved: list[str]
) -> None:
    headers = {**auth(new_tenant(db)), "content-type": "application/json; charset=utf-8"}
    status, body = _post(client, "/messages", json.dumps(ASK).encode(), headers)
    assert status == 200, body
    assert body["ingested"] == 1
    assert solved == []


def test_an_ordinary_body_is_not_parsed_by_fastapi(
    db: Database, client: TestClient, parsed: list[str]
) -> None:
    response = client.post(f"{BASE}/messages", json=ASK, headers=auth(new_tenant(db)))
    assert response.status_code == 200, response.text
    assert parsed == []


@pytest.mark.parametrize("path", ["/messages", "/assemble", "/turns"])
def test_a_refused_session_key_is_answered_as_before(
    db: Database, client: TestClient, path: str
) -> None:
    headers = auth(new_tenant(db))
    zero_width = "/v1/conversations/agent%E2%80%8Bmain"
    response = client.post(f"{zero_width}{path}", json=BODIES[path], headers=headers)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_session_key"


def test_a_turn_with_nothing_stored_is_encoded_as_fastapi_would(
    db: Database, client: TestClient
) -> None:
    headers = auth(new_tenant(db))
    response = client.post(f"{BASE}/turns", json={**TURN, "messages": []}, headers=headers)
    assert response.status_code == 200, response.text
    sent = response.json()
    route = next(
        r
        for r in conversations.turn_router.routes
        if isinstance(r, APIRoute) and r.path.endswith("/turns")
    )
    assert route.response_model is not None
    # The bytes FastAPI makes from the response model (its dump_json path).
    expected = route.response_model.model_validate(sent).model_dump_json(by_alias=True)
    assert response.content == expected.encode()


def _direct_routes() -> list[APIRoute]:
    return [r for r in conversations.turn_router.routes if isinstance(r, DirectRoute)]


def _plain_turn_router() -> APIRouter:
    """The turn router with its routes declared alike as plain APIRoutes."""
    router = APIRouter()
    for route in _direct_routes():
        router.add_api_route(
            route.path,
            route.endpoint,
            response_model=route.response_model,
            responses=route.responses,
            methods=sorted(route.methods or ()),
            tags=route.tags,
            name=route.name,
        )
    return router


def test_the_openapi_document_is_the_plain_routes_document(
    db: Database, client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from api.app import create_app
    from workers.link import CeleryLink

    assert len(_direct_routes()) == 3
    served = client.get("/openapi.json").json()
    monkeypatch.setattr(conversations, "turn_router", _plain_turn_router())
    plain = create_app(
        db.settings, link=CeleryLink(), database=db, broker_ping=lambda: True
    ).openapi()
    assert served == plain
