"""``/console/login`` and ``/console/logout``."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from api.console.auth import (
    LOGIN_COOKIE,
    CheckedForm,
    login_token_matches,
    new_login_token,
    set_cookie,
    sign_in,
    sign_out,
)
from api.console.rendering import render
from api.contract import Text
from api.deps import DatabaseDep
from lcm.db.models import utcnow
from lcm.errors import Forbidden, Unauthenticated
from lcm.tenants.console_sessions import open_session

router = APIRouter(prefix="/console", include_in_schema=False)

LOGIN_TOKEN_SECONDS = 3600


def _login_page(request: Request, error: str | None, status_code: int = 200) -> HTMLResponse:
    token = new_login_token()
    page = render(
        request, "login.html", None, status_code=status_code, login_token=token, error=error
    )
    set_cookie(request, page, LOGIN_COOKIE, token, LOGIN_TOKEN_SECONDS)
    return page


@router.get("/login")
def login_form(request: Request) -> HTMLResponse:
    return _login_page(request, None)


@router.post("/login")
def login(
    request: Request,
    database: DatabaseDep,
    api_key: Annotated[Text, Form(max_length=200)] = "",
    login_token: Annotated[Text, Form(max_length=200)] = "",
) -> Response:
    if not login_token_matches(request, login_token):
        return _login_page(request, "The sign-in form expired; try again.", 403)
    try:
        with database.read_session() as session:
            console = open_session(session, api_key, utcnow())
    except Unauthenticated:
        return _login_page(request, "That API key is not valid.", 401)
    except Forbidden:
        return _login_page(request, "The console needs a key with the admin scope.", 403)
    response = RedirectResponse("/console/conversations", status_code=303)
    sign_in(request, response, console)
    return response


@router.post("/logout")
def logout(_form: CheckedForm) -> Response:
    response = RedirectResponse("/console/login", status_code=303)
    sign_out(response)
    return response
