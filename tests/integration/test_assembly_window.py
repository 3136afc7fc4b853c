"""Assembly's window read (ordinal ranges from the newest end) against reading everything."""

from __future__ import annotations

import pytest
from sqlalchemy import delete

from lcm.assembly.repository import FIRST_SPAN, AssemblyRepository
from lcm.compaction.repository import CompactionRepository
from lcm.context import ContextEntry
from lcm.db.engine import Database
from lcm.db.models import ContextItem
from lcm.tenants.service import IssuedKey
from tests.integration.retrieval_data import compact, ingest


def expected_window(
    entries: list[ContextEntry], budget: int, min_items: int
) -> tuple[list[ContextEntry], bool]:
    """The newest entries up to the one that takes the total past the budget (brute force)."""
    total = 0
    for count, entry in enumerate(reversed(entries), start=1):
        total += entry.token_count
        if total > budget and count >= min_items:
            return entries[-count:], False
    return entries, True


def check_window(db: Database, cid: int, budget: int, min_items: int) -> None:
    with db.read_session() as session:
        everything = CompactionRepository(session).load_entries(cid)
        window = AssemblyRepository(session).window(cid, budget, min_items)
        # What assembly reads next: the context from the window's first item on.
        start = window.items[0].ordinal if window.items else None
        entries = CompactionRepository(session).load_entries(cid, from_ordinal=start)
    want, whole = expected_window(everything, budget, min_items)
    assert window.whole == whole
    assert [i.ordinal for i in window.items] == [e.ordinal for e in want]
    assert entries == want


@pytest.mark.parametrize("budget", [1, 500, 5_000, 60_000, 10_000_000])
def test_window_across_gaps_wider_than_a_range(
    db: Database, tenant: IssuedKey, budget: int
) -> None:
    texts = [
        f"message {i}: " + "checked the deploy logs again " * (1 + i % 7) for i in range(3_000)
    ]
    cid = ingest(db, tenant.tenant_id, "gaps", texts)
    with db.transaction() as session:
        # Gaps like the ones compaction leaves: one wider than two ranges, and
        # scattered single ones near the newest end.
        session.execute(
            delete(ContextItem).where(
                ContextItem.conversation_id == cid,
                ContextItem.ordinal.between(300, 300 + 2 * FIRST_SPAN + 100),
            )
        )
        session.execute(
            delete(ContextItem).where(
                ContextItem.conversation_id == cid,
                ContextItem.ordinal.between(2_600, 2_990),
                ContextItem.ordinal % 3 == 0,
            )
        )
    for min_items in (1, 33, 2_000):
        check_window(db, cid, budget, min_items)


@pytest.mark.parametrize("budget", [50, 2_000, 10_000_000])
def test_window_of_a_compacted_context(db: Database, tenant: IssuedKey, budget: int) -> None:
    texts = [f"message {i}: deployed build {i} to staging and ran the checks" for i in range(60)]
    cid = ingest(db, tenant.tenant_id, "compacted", texts)
    compact(db, tenant.tenant_id, cid)
    with db.read_session() as session:
        assert any(e.is_summary for e in CompactionRepository(session).load_entries(cid))
    check_window(db, cid, budget, 5)


def test_window_of_an_empty_context(db: Database, tenant: IssuedKey) -> None:
    cid = ingest(db, tenant.tenant_id, "empty", ["only message"])
    with db.transaction() as session:
        session.execute(delete(ContextItem).where(ContextItem.conversation_id == cid))
    with db.read_session() as session:
        window = AssemblyRepository(session).window(cid, 1_000, 5)
        assert window.items == []
        assert window.whole


@pytest.mark.parametrize("extra", [1, 6])
def test_window_reaches_the_items_just_below_the_first_range(
    db: Database, tenant: IssuedKey, extra: int
) -> None:
    texts = [f"message {i}: checked the deploy logs" for i in range(FIRST_SPAN + extra)]
    cid = ingest(db, tenant.tenant_id, "one-range-and-more", texts)
    check_window(db, cid, 10_000_000, 5)
    check_window(db, cid, 1, FIRST_SPAN + extra)
