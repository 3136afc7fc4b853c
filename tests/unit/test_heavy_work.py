"""The heavy-request share: per-tenant and total slots, raced by many tasks at once."""

from __future__ import annotations

import asyncio

import pytest

from api.heavy_work import HeavyKind, HeavyShare
from lcm.errors import RateLimited


def share(reads: int = 2, writes: int = 1, total: int = 4, wait: float = 5.0) -> HeavyShare:
    return HeavyShare(
        reads_per_tenant=reads, writes_per_tenant=writes, total=total, wait_seconds=wait
    )


class Census:
    """How many requests hold a slot, per tenant and kind and in all, and the peaks."""

    def __init__(self) -> None:
        self.now: dict[tuple[str, HeavyKind], int] = {}
        self.peak: dict[tuple[str, HeavyKind], int] = {}
        self.total = 0
        self.peak_total = 0

    async def hold(self, heavy: HeavyShare, tenant: str, kind: HeavyKind, seconds: float) -> None:
        async with heavy.slot(tenant, kind):
            key = (tenant, kind)
            self.now[key] = self.now.get(key, 0) + 1
            self.peak[key] = max(self.peak.get(key, 0), self.now[key])
            self.total += 1
            self.peak_total = max(self.peak_total, self.total)
            await asyncio.sleep(seconds)
            self.now[key] -= 1
            self.total -= 1


def test_a_tenant_never_holds_more_than_its_share_and_all_never_more_than_the_total() -> None:
    heavy, census = share(reads=2, writes=1, total=4), Census()

    async def main() -> None:
        work = [census.hold(heavy, "a", HeavyKind.READ, 0.01) for _ in range(40)]
        work += [census.hold(heavy, "a", HeavyKind.WRITE, 0.01) for _ in range(10)]
        work += [census.hold(heavy, t, HeavyKind.READ, 0.01) for t in "bcd" for _ in range(5)]
        await asyncio.gather(*work)

    asyncio.run(main())
    assert census.peak[("a", HeavyKind.READ)] == 2
    assert census.peak[("a", HeavyKind.WRITE)] == 1
    assert census.peak_total == 4
    assert heavy._tenants == {}  # every entry went with its last user


def test_another_tenant_is_admitted_while_a_tenant_has_a_backlog() -> None:
    heavy = share(reads=2, total=4)

    async def main() -> float:
        backlog = [
            asyncio.create_task(Census().hold(heavy, "a", HeavyKind.READ, 0.2)) for _ in range(30)
        ]
        await asyncio.sleep(0.05)  # a's first two run, 28 wait
        started = asyncio.get_running_loop().time()
        async with heavy.slot("b", HeavyKind.READ):
            waited = asyncio.get_running_loop().time() - started
        for task in backlog:
            task.cancel()
        await asyncio.gather(*backlog, return_exceptions=True)
        return waited

    assert asyncio.run(main()) < 0.1  # not behind a's 28 (which would take 2.8 s)
    assert heavy._tenants == {}


def test_a_request_waiting_too_long_is_refused_with_retry_after_and_frees_what_it_took() -> None:
    heavy = share(reads=2, total=2, wait=0.05)

    async def main() -> None:
        async with heavy.slot("a", HeavyKind.READ), heavy.slot("b", HeavyKind.READ):
            # c's tenant slot is free, the shared ones are not: refused after the wait,
            # c's tenant slot handed back.
            with pytest.raises(RateLimited) as refused:
                async with heavy.slot("c", HeavyKind.READ):
                    pass
            assert refused.value.code == "heavy_busy"
            assert refused.value.retry_after is not None
            assert refused.value.retry_after >= 1
            assert ("c", HeavyKind.READ) not in heavy._tenants
        # Everything was released: four in a row get in at once.
        for tenant in "abcd":
            async with heavy.slot(tenant, HeavyKind.READ):
                pass

    asyncio.run(main())
    assert heavy._tenants == {}


def test_cancelled_waiters_leak_no_slot() -> None:
    heavy = share(reads=1, total=1)

    async def main() -> None:
        async with heavy.slot("a", HeavyKind.READ):
            waiters = [
                asyncio.create_task(Census().hold(heavy, "a", HeavyKind.READ, 0)) for _ in range(10)
            ]
            waiters += [
                asyncio.create_task(Census().hold(heavy, "b", HeavyKind.READ, 0)) for _ in range(10)
            ]
            await asyncio.sleep(0.01)
            for task in waiters:
                task.cancel()
            await asyncio.gather(*waiters, return_exceptions=True)
        async with asyncio.timeout(1):  # the one slot is free again
            async with heavy.slot("b", HeavyKind.READ):
                pass

    asyncio.run(main())
    assert heavy._tenants == {}
