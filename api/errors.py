"""The one place where domain errors become HTTP responses.

Every error body is ``{"error": {"code", "message"}}``. A client mistake is a
4xx, never a 500; an unexpected failure is a 500 with a generic message (the
details go to the log, not to the caller).
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException

from api.console import rendering as console
from api.validation import ERROR_CODES
from lcm import errors
from lcm.db.busy import is_busy

log = logging.getLogger(__name__)

# Seconds a client should wait after ``database_busy``: write transactions are
# kept well under a second (a bootstrap commits in chunks), so the lock that
# timed out is usually free again by then.
BUSY_RETRY_AFTER_SECONDS = 1

STATUS = {
    errors.InvalidInput: 400,
    errors.Unauthenticated: 401,
    errors.Forbidden: 403,
    errors.NotFound: 404,
    errors.Conflict: 409,
    errors.TooLarge: 413,
    errors.RateLimited: 429,
    errors.DependencyUnavailable: 503,
    errors.StaleLease: 409,
    errors.ContextChanged: 409,
    errors.SummarizerError: 503,
}

HTTP_CODES = {
    400: "invalid_input",
    401: "unauthenticated",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "too_large",
    415: "unsupported_media_type",
    429: "rate_limited",
}


def error_response(
    status: int,
    code: str,
    message: str,
    headers: dict[str, str] | None = None,
    details: dict[str, object] | None = None,
) -> JSONResponse:
    """``{"error": {"code", "message", ...details}}`` (details: what an error names,
    e.g. the setting and ceiling of ``above_ceiling``)."""
    if status == 401:
        headers = {**(headers or {}), "WWW-Authenticate": "Bearer"}
    error = {**(details or {}), "code": code, "message": message}
    return JSONResponse({"error": error}, status, headers=headers)


def _status_for(exc: errors.LcmError) -> int:
    for cls in type(exc).__mro__:
        if cls in STATUS:
            return STATUS[cls]
    return 500


def _describe_validation(exc: RequestValidationError) -> str:
    problems = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
        if err.get("type") == "extra_forbidden":
            message = "unknown field (refused rather than ignored)"
        else:
            message = err.get("msg", "invalid")
        problems.append(f"{loc or 'body'}: {message}")
    return "; ".join(problems) or "invalid request"


def _validation_code(exc: RequestValidationError) -> str:
    """``invalid_text`` / ``too_deep`` when that is what failed, else ``invalid_input``."""
    for err in exc.errors():
        code = ERROR_CODES.get(str(err.get("type")))
        if code:
            return code
    return "invalid_input"


def install(app: FastAPI) -> None:
    @app.exception_handler(errors.LcmError)
    async def _lcm_error(request: Request, exc: errors.LcmError) -> Response:
        if console.is_console(request):  # the console's pages answer in HTML
            return console.error_page(request, _status_for(exc), exc.code, exc.message)
        retry_after = getattr(exc, "retry_after", None)
        headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
        details = getattr(exc, "details", None)
        return error_response(_status_for(exc), exc.code, exc.message, headers, details)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> Response:
        code, message = _validation_code(exc), _describe_validation(exc)
        if console.is_console(request):
            return console.error_page(request, 400, code, message)
        return error_response(400, code, message)

    @app.exception_handler(HTTPException)
    async def _http(request: Request, exc: HTTPException) -> Response:
        code = HTTP_CODES.get(exc.status_code, "http_error")
        if console.is_console(request):
            return console.error_page(request, exc.status_code, code, str(exc.detail))
        return error_response(exc.status_code, code, str(exc.detail))

    @app.exception_handler(OperationalError)
    @app.exception_handler(PoolTimeout)
    async def _db_error(_request: Request, exc: Exception) -> JSONResponse:
        if is_busy(exc):
            log.warning("database busy: %s", exc)
            return error_response(
                503,
                "database_busy",
                "the database is busy; retry shortly",
                {"Retry-After": str(BUSY_RETRY_AFTER_SECONDS)},
            )
        log.warning("database unavailable: %s", exc)
        return error_response(503, "dependency_unavailable", "the database is unavailable")

    @app.exception_handler(Exception)
    async def _unexpected(_request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error", exc_info=exc)
        return error_response(500, "internal_error", "internal error")
