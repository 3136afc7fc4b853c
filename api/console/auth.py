"""Console sign-in: the session cookie, the signed-in user dependency and CSRF checks.

The cookie holds a signed session token, not the key (see
``lcm/tenants/console_sessions.py`` for why). It is ``HttpOnly`` (no script
reads it), ``SameSite=Strict`` (no other site's page sends it, so no
cross-site form can act as the user) and ``Secure`` on https. Every POST form
also carries the session's CSRF token, checked before anything runs.
"""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import Depends, Request, Response
from starlette.datastructures import FormData

from api.deps import DatabaseDep
from lcm.db.models import utcnow
from lcm.errors import Forbidden, Unauthenticated
from lcm.tenants.console_sessions import (
    SESSION_SECONDS,
    ConsoleSession,
    check_session,
    csrf_matches,
    text_matches,
)

SESSION_COOKIE = "lcm_console"
# Sign-in has no session yet: its form is guarded by a double-submit token
# (a random cookie echoed in the form), so another site cannot sign a
# browser in under the attacker's key.
LOGIN_COOKIE = "lcm_console_login"
COOKIE_PATH = "/console"


def set_cookie(request: Request, response: Response, name: str, value: str, max_age: int) -> None:
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        path=COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def new_login_token() -> str:
    return secrets.token_urlsafe(24)


def login_token_matches(request: Request, submitted: str | None) -> bool:
    expected = request.cookies.get(LOGIN_COOKIE)
    return bool(expected and submitted) and text_matches(expected or "", submitted or "")


def sign_in(request: Request, response: Response, console: ConsoleSession) -> None:
    set_cookie(request, response, SESSION_COOKIE, console.token, SESSION_SECONDS)
    response.delete_cookie(LOGIN_COOKIE, path=COOKIE_PATH, httponly=True, samesite="strict")


def sign_out(response: Response) -> None:
    response.delete_cookie(SESSION_COOKIE, path=COOKIE_PATH, httponly=True, samesite="strict")


def current_session(request: Request, database: DatabaseDep) -> ConsoleSession:
    """The signed-in admin, re-checked against the key row on every request.

    A short read-only session of its own, like the API's key check: it never
    waits for the write lock, and there is no cache, so a revoked key's
    console session ends on its next request.
    """
    token = request.cookies.get(SESSION_COOKIE)
    if not token:
        raise Unauthenticated("not signed in")
    with database.read_session() as session:
        return check_session(session, token, utcnow())


ConsoleUser = Annotated[ConsoleSession, Depends(current_session)]


async def checked_form(request: Request, console: ConsoleUser) -> FormData:
    """The POSTed form, once its CSRF token is the session's; ``Forbidden`` otherwise."""
    form = await request.form()
    token = form.get("csrf_token")
    if not csrf_matches(console, token if isinstance(token, str) else None):
        raise Forbidden("the form's CSRF token is missing or stale; reload the page", code="csrf")
    return form


CheckedForm = Annotated[FormData, Depends(checked_form)]
