"""Security headers of the console: on its responses only, HSTS only over https."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from api.console.headers import HEADERS, ConsoleHeaders


def _app() -> Starlette:
    def page(_request: object) -> PlainTextResponse:
        return PlainTextResponse("ok")

    def broken(_request: object) -> PlainTextResponse:
        raise RuntimeError("a bug")

    routes = [Route("/console/x", page), Route("/v1/x", page), Route("/console/broken", broken)]
    # as in api/app.py: inside Starlette's own error middleware
    return Starlette(routes=routes, middleware=[Middleware(ConsoleHeaders)])


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


def test_an_unexpected_error_is_a_500_page_with_the_headers_not_raised_on() -> None:
    # Raised past the app, uvicorn would close the kept-alive connection.
    answered = TestClient(_app(), raise_server_exceptions=True).get("/console/broken")
    assert answered.status_code == 500
    assert answered.headers["content-type"].startswith("text/html")
    assert answered.headers["x-frame-options"] == "DENY"
