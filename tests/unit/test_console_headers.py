"""Security headers of the console: on its responses only, HSTS only over https."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from api.console.headers import HEADERS, ConsoleHeaders


def _app() -> ConsoleHeaders:
    def page(_request: object) -> PlainTextResponse:
        return PlainTextResponse("ok")

    routes = [Route("/console/x", page), Route("/v1/x", page)]
    return ConsoleHeaders(Starlette(routes=routes))


def test_console_responses_carry_the_headers_and_hsts_only_on_https() -> None:
    plain = TestClient(_app()).get("/console/x")
    assert {name: plain.headers[name] for name in HEADERS} == HEADERS
    assert "frame-ancestors 'none'" in plain.headers["content-security-policy"]
    assert "strict-transport-security" not in plain.headers
    secure = TestClient(_app(), base_url="https://testserver").get("/console/x")
    assert secure.headers["strict-transport-security"].startswith("max-age=")


def test_the_api_is_left_alone() -> None:
    answered = TestClient(_app()).get("/v1/x")
    assert "content-security-policy" not in answered.headers
