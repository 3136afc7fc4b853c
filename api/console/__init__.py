"""The operator console at ``/console``: server-rendered pages over the domain's reads."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from api.console import operations, pages, signin, surgery
from api.console.headers import ConsoleHeaders
from api.console.rendering import HERE

__all__ = ["ConsoleHeaders", "install"]


def install(app: FastAPI) -> None:
    app.include_router(signin.router)
    app.include_router(pages.router)
    app.include_router(operations.router)
    app.include_router(surgery.router)
    app.mount("/console/static", StaticFiles(directory=HERE / "static"), name="console-static")
