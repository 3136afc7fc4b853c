"""Embedded mode's first-start conveniences, and its process's collector thresholds."""

from __future__ import annotations

import gc

from rich.console import Console

from lcm.db.engine import Database
from lcm.settings import Settings
from lcm.tenants.service import any_tenant, create_tenant

LOCAL_TENANT = "local"
# ``gc.set_threshold`` in ``lcm serve`` (Python's: 700, 10, 10): the youngest
# generation collected every 50,000 allocations, the middle one every 50 of
# those, the oldest every 100 of those.
GC_THRESHOLDS = (50_000, 50, 100)


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


def tune_collector() -> None:
    """Fewer, larger collections in ``lcm serve`` (:data:`GC_THRESHOLDS`).

    ``lcm serve`` runs the API and the worker on one interpreter lock, so its
    turns a second are bound by one core's Python. A turn builds thousands
    of containers (rows, assembled messages, their JSON) that live past a
    young collection at Python's threshold of 700 allocations and are
    walked again by the older ones. The objects of the process's start are
    frozen out of every collection by the app (``lcm.heap``); this makes
    the collections rarer. Measured under ``bench gateway_ab --embedded``:
    ``lcm serve`` spent 2% less CPU a turn (median of four runs, -4.3% to
    +0.6%). Garbage in a cycle waits longer to be freed; what refcounting
    frees (nearly everything) is freed at once as before.
    """
    gc.set_threshold(*GC_THRESHOLDS)
