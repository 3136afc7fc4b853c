"""A bounded share of an API process for heavy requests, per tenant.

A regex grep scans a conversation, a bootstrap or an import writes thousands
of messages, an export reads all of one: each keeps a thread of the process's
pool busy for up to seconds, and on SQLite (one process, one write lock, one
GIL) every one more of them running is time taken from everybody else. 48
concurrent greps of one tenant took every pool thread: another tenant's
one-message ingest queued behind them for ~0.9 s (``python -m bench
isolation``).

So these routes first take a slot here, in the event loop, before any thread:
at most ``heavy_reads_per_tenant`` reads (grep, export) and
``heavy_writes_per_tenant`` writes (bootstrap, import) of one tenant run at
once, and at most ``heavy_requests_total`` of all tenants. A tenant's excess
waits for its own earlier requests, costing others nothing; waiting is
bounded by ``heavy_wait_seconds``, after which the request is refused with
429 ``heavy_busy`` and a Retry-After (its client retries later rather than
holding a connection for ever). The tenant slot is taken before the shared
one, so a tenant with a backlog holds at most its own share of the total.

The limits are per process: with several API processes (scaled mode, on
Postgres) each bounds its own share, and the database's statement timeout
bounds each scan.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from enum import StrEnum

from fastapi import Depends, Request

from api.deps import AdminCaller, IngestCaller, ReadCaller
from lcm.errors import RateLimited
from lcm.settings import Settings


class HeavyKind(StrEnum):
    READ = "read"
    WRITE = "write"


@dataclass
class _TenantSlots:
    semaphore: asyncio.Semaphore
    users: int = 0  # holders and waiters; the entry goes when it drops to 0


@dataclass
class HeavyShare:
    """Per-tenant and process-wide slots for heavy requests (see the module)."""

    reads_per_tenant: int
    writes_per_tenant: int
    total: int
    wait_seconds: float
    _tenants: dict[tuple[str, HeavyKind], _TenantSlots] = field(default_factory=dict)
    _shared: asyncio.Semaphore | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> HeavyShare:
        return cls(
            reads_per_tenant=settings.heavy_reads_per_tenant,
            writes_per_tenant=settings.heavy_writes_per_tenant,
            total=settings.heavy_requests_total,
            wait_seconds=settings.heavy_wait_seconds,
        )

    @asynccontextmanager
    async def slot(self, tenant_id: str, kind: HeavyKind) -> AsyncIterator[None]:
        """Hold one of ``tenant_id``'s ``kind`` slots and one shared slot meanwhile.

        Raises :class:`RateLimited` (``heavy_busy``) after ``wait_seconds``
        without both. Runs in the event loop only, so the dict needs no lock.
        """
        key = (tenant_id, kind)
        mine = self._tenants.get(key)
        if mine is None:
            mine = self._tenants[key] = _TenantSlots(asyncio.Semaphore(self._limit(kind)))
        if self._shared is None:
            self._shared = asyncio.Semaphore(self.total)
        shared = self._shared
        mine.users += 1
        try:
            await self._acquire(mine.semaphore, shared, kind)
            try:
                yield
            finally:
                shared.release()
                mine.semaphore.release()
        finally:
            mine.users -= 1
            if mine.users == 0:
                del self._tenants[key]

    def _limit(self, kind: HeavyKind) -> int:
        return self.reads_per_tenant if kind is HeavyKind.READ else self.writes_per_tenant

    async def _acquire(
        self, mine: asyncio.Semaphore, shared: asyncio.Semaphore, kind: HeavyKind
    ) -> None:
        """Both slots, the tenant's first, within one ``wait_seconds``; none on failure."""
        holding = False
        try:
            async with asyncio.timeout(self.wait_seconds):
                await mine.acquire()
                holding = True
                await shared.acquire()
        except BaseException as exc:
            if holding:
                mine.release()
            if isinstance(exc, TimeoutError):
                raise RateLimited(
                    f"too many heavy {kind} requests are running; retry shortly",
                    code="heavy_busy",
                    retry_after=max(1, math.ceil(self.wait_seconds / 4)),
                ) from None
            raise


# The dependencies of the heavy routes, one per (scope, kind). Each asks for
# the tenant the way its route does (the same dependency, so FastAPI resolves
# it once) and holds the slot until the response is sent: an export streams
# after its route returned.


def heavy_share(request: Request) -> HeavyShare:
    share: HeavyShare = request.app.state.heavy_share
    return share


async def _read_slot(request: Request, caller: ReadCaller) -> AsyncIterator[None]:
    async with heavy_share(request).slot(caller.tenant_id, HeavyKind.READ):
        yield


async def _admin_read_slot(request: Request, caller: AdminCaller) -> AsyncIterator[None]:
    async with heavy_share(request).slot(caller.tenant_id, HeavyKind.READ):
        yield


async def _ingest_write_slot(request: Request, caller: IngestCaller) -> AsyncIterator[None]:
    async with heavy_share(request).slot(caller.tenant_id, HeavyKind.WRITE):
        yield


async def _admin_write_slot(request: Request, caller: AdminCaller) -> AsyncIterator[None]:
    async with heavy_share(request).slot(caller.tenant_id, HeavyKind.WRITE):
        yield


HEAVY_READ = Depends(_read_slot)
HEAVY_ADMIN_READ = Depends(_admin_read_slot)
HEAVY_INGEST_WRITE = Depends(_ingest_write_slot)
HEAVY_ADMIN_WRITE = Depends(_admin_write_slot)
