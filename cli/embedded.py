"""Embedded mode's first-start conveniences."""

from __future__ import annotations

from rich.console import Console

from lcm.db.engine import Database
from lcm.settings import Settings
from lcm.tenants.service import any_tenant, create_tenant

LOCAL_TENANT = "local"


def embedded_settings(base: Settings, concurrency: int | None) -> Settings:
    """``base`` with an in-process broker: embedded mode needs no Redis."""
    overrides: dict[str, object] = {
        "broker_url": "memory://",
        "result_backend_url": "cache+memory://",
    }
    if concurrency is not None:
        overrides["worker_concurrency"] = concurrency
    return base.model_copy(update=overrides)


def bootstrap_local_tenant(database: Database, console: Console) -> None:
    """On first start (no tenant at all), create ``local`` and print its key once."""
    with database.session() as session:
        if any_tenant(session):
            console.print("Tenants exist; `lcm key create local` issues another key.")
            return
        issued = create_tenant(session, LOCAL_TENANT)
        session.commit()
    console.print(f"Created tenant '{LOCAL_TENANT}'. API key (shown once):")
    # The key goes to stdout alone on its line so scripts can capture it.
    print(issued.api_key, flush=True)
