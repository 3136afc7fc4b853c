"""Liveness, readiness and Prometheus metrics."""

from __future__ import annotations

import logging

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from api.contract import Health, Readiness
from api.deps import DatabaseDep

router = APIRouter(tags=["health"])
log = logging.getLogger(__name__)


@router.get("/healthz", response_model=Health)
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get(
    "/readyz",
    response_model=Readiness,
    responses={503: {"model": Readiness, "description": "The database or the broker is down"}},
)
def readyz(request: Request, database: DatabaseDep) -> JSONResponse:
    checks: dict[str, str] = {}
    try:
        database.ping()
        checks["database"] = "ok"
    except Exception as exc:
        log.warning("readiness: database unreachable: %s", exc)
        checks["database"] = "unreachable"
    checks["broker"] = "ok" if request.app.state.broker_ping() else "unreachable"
    ready = all(v == "ok" for v in checks.values())
    return JSONResponse(
        {"status": "ready" if ready else "not_ready", "checks": checks}, 200 if ready else 503
    )


@router.get(
    "/metrics",
    response_class=PlainTextResponse,
    responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
)
def metrics() -> Response:
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)
