"""The three calls of a gateway turn are matched first, and nothing routes differently.

Starlette tries the app's routes in order (twice a request: the router, then
the route in it), so the turn's routes are included first. That is only
sound while no other route's pattern takes a POST to a path ending in
``/messages``, ``/turns`` or ``/assemble``.
"""

from __future__ import annotations

from pathlib import Path

from fastapi.routing import APIRoute, iter_route_contexts
from starlette.routing import Match

from api.app import create_app
from lcm.settings import Settings
from workers.link import CeleryLink

TURN_PATHS = {
    "/v1/conversations/{key}/messages",
    "/v1/conversations/{key}/turns",
    "/v1/conversations/{key}/assemble",
}


def test_the_turn_routes_come_first_and_no_other_route_takes_their_requests(
    tmp_path: Path,
) -> None:
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'lcm.db'}", broker_url="memory://")
    app = create_app(settings, link=CeleryLink())
    contexts = [
        c for c in iter_route_contexts(app.router.routes) if isinstance(c.original_route, APIRoute)
    ]
    first_api = [c for c in contexts if str(c.path_format).startswith("/v1/")][:3]
    assert {str(c.path_format) for c in first_api} == TURN_PATHS
    assert all(c.methods == {"POST"} for c in first_api)
    others = [c for c in contexts if str(c.path_format) not in TURN_PATHS]
    for suffix in ("messages", "turns", "assemble"):
        for path in (f"/v1/conversations/a/{suffix}", f"/v1/conversations/a/b/fork/{suffix}"):
            scope = {"type": "http", "method": "POST", "path": path, "root_path": ""}
            taken = [
                str(c.path_format)
                for c in others
                if c.original_route.matches(scope)[0] == Match.FULL
            ]
            assert taken == [], f"{path} would also match {taken}"
