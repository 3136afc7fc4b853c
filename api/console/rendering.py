"""Templates, filters and error pages of the console (HTML, server-rendered)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from lcm.conversations.session_keys import printable_session_key
from lcm.db.models import utcnow
from lcm.tenants.console_sessions import ConsoleSession

HERE = Path(__file__).parent
templates = Jinja2Templates(directory=HERE / "templates")


def _age(value: datetime | None) -> str:
    """``3m``, ``2h``, ``5d``: how long ago ``value`` was."""
    if value is None:
        return "—"
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    seconds = max(0, int((utcnow() - value).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _when(value: datetime | None) -> str:
    return "—" if value is None else value.strftime("%Y-%m-%d %H:%M:%S")


def _pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


templates.env.filters["age"] = _age
templates.env.filters["when"] = _when
templates.env.filters["pretty_json"] = _pretty_json
# Keys stored before the session-key rule may hold characters that do not show.
templates.env.filters["key"] = printable_session_key


def render(
    request: Request,
    name: str,
    console: ConsoleSession | None,
    status_code: int = 200,
    **context: Any,
) -> HTMLResponse:
    return templates.TemplateResponse(
        request,
        name,
        {"console": console, "csrf_token": console.csrf_token if console else "", **context},
        status_code=status_code,
        # The pages show a tenant's history: no shared cache keeps them.
        headers={"Cache-Control": "no-store"},
    )


def is_console(request: Request) -> bool:
    return request.url.path == "/console" or request.url.path.startswith("/console/")


def error_page(request: Request, status: int, code: str, message: str) -> Response:
    """A console error: sign-in again for 401 on a page, an HTML page with the status otherwise."""
    if status == 401 and request.method == "GET":
        return RedirectResponse("/console/login", status_code=303)
    return render(
        request, "error.html", None, status_code=status, status=status, code=code, message=message
    )
