"""The OpenAPI document is the contract: auth, errors and statuses as the API really answers.

FastAPI documents what routes declare; this module adds what the app does
around them. Every ``/v1`` operation gets the bearer security scheme (the
Authorize button in ``/docs`` works) with the scope the operation needs (as
the security requirement's role and in its description), and the error
envelope for each status the API can answer; validation errors are
documented as 400 (the status the API uses) instead of FastAPI's default
422, which the API never sends.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from api.contract import ErrorOut
from api.deps import operation_scopes

BEARER = "bearer"


DESCRIPTIONS = {
    400: "Invalid input: malformed JSON or fields, unknown fields, unstorable text "
    "(`invalid_text`), nesting too deep (`too_deep`), invalid UTF-8 in the path (`invalid_path`)",
    401: "Missing or unknown API key",
    403: "The key may not do this",
    404: "Not found, or owned by another tenant (indistinguishable)",
    409: "Conflicts with the current state",
    413: "Body, batch or message over a configured limit; `quota_exceeded` when storing "
    "the batch's large files would pass the tenant's `max_file_bytes`",
    429: "Rate limited (`rate_limited`; `Retry-After` says when to try again), or storing "
    "the batch would pass the tenant's `max_stored_messages` (`quota_exceeded`)",
    503: "A dependency (database, broker, LLM, worker) is unavailable or busy; "
    "`Retry-After` is set when retrying soon is expected to work",
}

# What every authenticated /v1 operation can answer besides its own statuses:
# validation (400), auth (401), a key without the operation's scope (403), a
# path the router does not match (404: e.g. a session key holding a newline),
# the body limit middleware (413), the tenant's rate limit (429), a database
# or broker that is down or busy (503).
V1_STATUSES = (400, 401, 403, 404, 413, 429, 503)


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """``responses=`` for a route: the error envelope under each status."""
    return {s: {"model": ErrorOut, "description": DESCRIPTIONS[s]} for s in statuses}


def install(app: FastAPI) -> None:
    """Replace ``app.openapi`` with one that documents auth and the real error statuses."""

    def build() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = get_openapi(
            title=app.title, version=app.version, description=app.description, routes=app.routes
        )
        components = schema.setdefault("components", {})
        components.setdefault("securitySchemes", {})[BEARER] = {
            "type": "http",
            "scheme": "bearer",
            "description": "A tenant API key: `Authorization: Bearer lcm_…`",
        }
        error_ref = {"$ref": "#/components/schemas/ErrorOut"}
        components.setdefault("schemas", {})
        for name in ("HTTPValidationError", "ValidationError"):
            components["schemas"].pop(name, None)
        for path, operations in schema.get("paths", {}).items():
            for operation in operations.values():
                responses = operation.setdefault("responses", {})
                responses.pop("422", None)
                statuses = V1_STATUSES if path.startswith("/v1/") else (400,)
                for status in statuses:
                    responses.setdefault(
                        str(status),
                        {
                            "description": DESCRIPTIONS[status],
                            "content": {"application/json": {"schema": error_ref}},
                        },
                    )
                if path.startswith("/v1/"):
                    operation["security"] = [{BEARER: []}]
        for (method, path), scope in operation_scopes(app.routes).items():
            if scope is None:
                continue
            operation = schema["paths"][path][method.lower()]
            # OpenAPI 3.1 lets a bearer requirement list the roles it needs.
            operation["security"] = [{BEARER: [scope]}]
            needs = f"Needs a key with the `{scope}` scope."
            operation["description"] = f"{operation.get('description', '')}\n\n{needs}".strip()
        app.openapi_schema = schema
        return schema

    app.openapi = build  # type: ignore[method-assign]
