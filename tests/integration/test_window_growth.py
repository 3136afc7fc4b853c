"""A cached window grown by ingest's appends is the window a read gives (lcm/window_cache.py).

After an ingest the next assembly reads only the appended items and grows
the window kept before them; any other change (a compaction pass, a
structural repair, surgery, a secret erasure) makes it read the window
again. Both backends.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import event, select, update

from lcm.assembly.service import assemble, read_window
from lcm.compaction.engine import CompactionEngine
from lcm.compaction.jobs import CompactionJobs
from lcm.db.engine import Database
from lcm.db.models import ContextItem, Summary
from lcm.doctor.structure import repair_structure
from lcm.erasure.service import erase_conversation
from lcm.secret_access import ErasureRequest, erase_secrets
from lcm.secrets import SecretScan
from lcm.summarize.extractive import ExtractiveProvider
from lcm.summarize.summarizer import Summarizer
from lcm.surgery import SurgeryAsk, perform_surgery
from lcm.tenants.service import IssuedKey
from tests.conftest import new_tenant, settings_for
from tests.integration.retrieval_data import compact, ingest
from tests.integration.test_window_cache import MIN_ITEMS, SETTINGS, direct_window, texts

TOKEN = "ghp_" + "Qm3v" * 9  # a secret some messages carry, for the erasure step


@pytest.fixture
def window_reads(db: Database) -> Iterator[list[tuple[str, Any]]]:
    """The window's reads while the test runs: ("first", …) reads a window from the
    newest end (``AssemblyRepository.window``), ("range", params) one range of ordinals."""
    seen: list[tuple[str, Any]] = []

    def record(conn: Any, cursor: Any, statement: str, parameters: Any, *args: object) -> None:
        if "FROM context_items LEFT OUTER JOIN summaries" in statement:
            seen.append(("first" if "max(" in statement else "range", parameters))

    event.listen(db.engine, "before_cursor_execute", record)
    yield seen
    event.remove(db.engine, "before_cursor_execute", record)


def assembled(db: Database, tenant: IssuedKey, cid: int, budget: int) -> list[dict[str, Any]]:
    with db.snapshot_session() as session:
        return assemble(session, cid, budget, SETTINGS, tenant_id=tenant.tenant_id).messages


def uncached(db: Database, tenant: IssuedKey, cid: int, budget: int) -> list[dict[str, Any]]:
    """What a process without a window cache (nor its message views) assembles."""
    fresh = Database(settings_for(db.settings.database_url, window_cache_size=0))
    try:
        with fresh.snapshot_session() as session:
            return assemble(session, cid, budget, SETTINGS, tenant_id=tenant.tenant_id).messages
    finally:
        fresh.dispose()


def turn_texts(rng: random.Random, start: int, n: int) -> list[str | list[Any]]:
    """``n`` messages of varied sizes; now and then one carries the secret."""
    out: list[str | list[Any]] = []
    for i in range(start, start + n):
        words = " ".join(f"step{rng.randint(0, 99)}" for _ in range(rng.randint(3, 40)))
        secret = f" GITHUB_TOKEN={TOKEN}" if rng.random() < 0.2 else ""
        out.append(f"message {i}: {words}{secret}")
    return out


def jobs_of(db: Database) -> CompactionJobs:
    engine = CompactionEngine(
        db.transaction, Summarizer(ExtractiveProvider()), reads=db.lookup_session
    )
    deployment = db.settings.model_copy(update={"fresh_tail_count": SETTINGS.fresh_tail_count})
    return CompactionJobs(db.transaction, engine, deployment, owner="test")


def dissolve_one(db: Database, tenant: IssuedKey, cid: int) -> bool:
    """Surgery: a condensed summary of the context dissolved into its parents, if any."""
    with db.session() as s:
        condensed = s.scalars(
            select(Summary.id)
            .join(ContextItem, ContextItem.summary_id == Summary.id)
            .where(ContextItem.conversation_id == cid, Summary.kind == "condensed")
        ).first()
    if condensed is None:
        return False
    jobs = jobs_of(db)
    op = perform_surgery(
        db.transaction, lambda: jobs, tenant.tenant_id, SurgeryAsk(condensed, "dissolve"), "inline"
    )
    assert op.status == "done", op.error
    return True


def miscount_and_repair(db: Database, tenant: IssuedKey, cid: int) -> None:
    """An item's token count made wrong behind the context's back, then the doctor's repair."""
    with db.transaction() as s:
        newest = s.scalar(
            select(ContextItem.id)
            .where(ContextItem.conversation_id == cid)
            .order_by(ContextItem.ordinal.desc())
        )
        s.execute(
            update(ContextItem)
            .where(ContextItem.id == newest)
            .values(token_count=ContextItem.token_count + 7)
        )
        repairs = repair_structure(s, tenant.tenant_id, cid)
    assert [r.recounted for r in repairs] == [1]


def erase(db: Database, tenant: IssuedKey) -> None:
    erase_secrets(
        db.transaction, tenant.tenant_id, ErasureRequest(value=TOKEN), SecretScan.of(db.settings)
    )


@pytest.mark.parametrize(("seed", "budget"), [(1, 400), (2, 400), (3, 100_000), (4, 100_000)])
def test_a_window_grown_by_appends_is_the_window_a_read_gives(
    db: Database, window_reads: list[tuple[str, Any]], seed: int, budget: int
) -> None:
    """Any mix of ingest, compaction passes, repairs, surgery and erasures, a few steps
    between assemblies: each time the cached window equals the one read directly in
    the same snapshot, and the assembly equals a cacheless process's; after ingests
    alone, nothing but the appended items was read."""
    rng = random.Random(seed)
    tenant = new_tenant(db)
    cid = ingest(db, tenant.tenant_id, "agent", turn_texts(rng, 0, 30))
    count, grown, since = 30, 0, set[str]()
    assembled(db, tenant, cid, budget)  # the window the first steps grow or replace
    steps = ["ingest"] * 4 + ["compact", "repair", "erase", "dissolve"]
    for _ in range(24):
        step = rng.choice(steps)
        if step == "ingest":
            n = rng.randint(1, 3)
            ingest(db, tenant.tenant_id, "agent", turn_texts(rng, count, n), index=False)
            count += n
        elif step == "compact":
            compact(db, tenant.tenant_id, cid)
        elif step == "repair":
            miscount_and_repair(db, tenant, cid)
        elif step == "erase":
            erase(db, tenant)
        elif step == "dissolve" and not dissolve_one(db, tenant, cid):
            continue
        since.add(step)
        if rng.random() < 0.4:
            continue  # another step before the next assembly
        window_reads.clear()
        with db.snapshot_session() as session:
            cached = read_window(session, cid, budget, MIN_ITEMS)
            reads = list(window_reads)
            direct = direct_window(session, cid, budget)
        assert (cached.entries, cached.whole) == direct, since
        if since == {"ingest"}:
            # Grown: one range read from the window's newest item on, no window read.
            assert [kind for kind, _ in reads] == ["range"], reads
            grown += 1
        else:  # read again, or kept where the steps changed nothing (no pass was due)
            assert not reads or reads[0][0] == "first", (since, reads)
        assert assembled(db, tenant, cid, budget) == uncached(db, tenant, cid, budget), since
        since.clear()
    assert grown > 0


def test_appends_past_a_first_range_read_the_window_again(
    db: Database, window_reads: list[tuple[str, Any]]
) -> None:
    """More items appended than a read's first range covers: a read is no dearer."""
    tenant = new_tenant(db)
    cid = ingest(db, tenant.tenant_id, "agent", texts(40))
    assembled(db, tenant, cid, 400)
    ingest(db, tenant.tenant_id, "agent", texts(300, start=40), index=False)
    window_reads.clear()
    assert assembled(db, tenant, cid, 400) == uncached(db, tenant, cid, 400)
    assert window_reads[0][0] == "first"


def test_readers_racing_ingest_and_compaction_grow_only_their_own_snapshot(
    db: Database, window_reads: list[tuple[str, Any]]
) -> None:
    """Reader threads assemble through the shared cache while another thread ingests one
    message at a time and compacts now and then: in every reader's snapshot the window
    (read, kept or grown) is the one the database holds, and windows did grow."""
    tenant = new_tenant(db)
    cid = ingest(db, tenant.tenant_id, "agent", texts(30))
    stop = threading.Event()
    failures: list[str] = []
    checked = [0]

    def reader() -> None:
        while not stop.is_set():
            try:
                with db.snapshot_session() as session:
                    cached = read_window(session, cid, 600, MIN_ITEMS)
                    direct = direct_window(session, cid, 600)
                if (cached.entries, cached.whole) != direct:
                    failures.append(f"stale window: {cached.entries[-1]} vs {direct[0][-1]}")
                checked[0] += 1
            except Exception as error:
                failures.append(repr(error))

    readers = [threading.Thread(target=reader) for _ in range(3)]
    for thread in readers:
        thread.start()
    try:
        for i in range(40):
            ingest(db, tenant.tenant_id, "agent", texts(1, start=30 + i), index=False)
            if i % 10 == 9:
                compact(db, tenant.tenant_id, cid)
    finally:
        stop.set()
        for thread in readers:
            thread.join()
    assert failures == []
    assert checked[0] > 0
    assert any(kind == "range" for kind, _ in window_reads)  # some windows grew
    assert assembled(db, tenant, cid, 600) == uncached(db, tenant, cid, 600)


def test_a_conversation_erased_elsewhere_and_its_id_given_again_is_not_grown(
    db: Database, window_reads: list[tuple[str, Any]]
) -> None:
    """On SQLite the next conversation may take an erased one's id and, by ingests alone,
    a stamp that follows appends to the kept window's: its item at the kept window's
    newest ordinal is another message, so the window is read, not grown."""
    tenant = new_tenant(db)
    cid = ingest(db, tenant.tenant_id, "agent", texts(10))
    secret = assembled(db, tenant, cid, 10_000)
    other = Database(db.settings)  # another process: this one's cache is not told
    try:
        with other.transaction() as session:
            erase_conversation(session, tenant.tenant_id, cid)
    finally:
        other.dispose()
    again = ingest(db, tenant.tenant_id, "agent", texts(10, start=100))
    ingest(db, tenant.tenant_id, "agent", texts(3, start=110))
    if db.dialect == "sqlite":
        assert again == cid  # the id was given again
    window_reads.clear()
    shown = assembled(db, tenant, again, 10_000)
    # On SQLite the range from the kept newest ordinal shows another message there.
    assert [kind for kind, _ in window_reads][-1] == "first"
    assert shown != secret
    assert "message 0:" not in str(shown)
    assert shown == uncached(db, tenant, again, 10_000)
