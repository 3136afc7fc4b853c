"""The growth benchmark's histories (``bench/growth_seed.py``) are what lcm itself would hold.

Its figures mean something only if the rows written in bulk, in SQL, are
sound: the doctor's structure check finds nothing, every message is
reachable from the compacted context, and assembly, grep and both kinds of
pass work on them as on any conversation. On SQLite and on Postgres.
"""

from __future__ import annotations

from sqlalchemy import select

from bench.compaction import InstantProvider
from bench.growth import parse_count
from bench.growth_seed import LOOSE_LEAVES, RAW_TAIL, Seeder
from lcm.assembly.service import assemble
from lcm.compaction.engine import CompactionEngine
from lcm.compaction.planning import shallowest_condensation
from lcm.compaction.sweep import next_pass
from lcm.db.engine import Database
from lcm.db.models import ContextItem, Message, SummaryMessage
from lcm.doctor.structure import find_structural
from lcm.retrieval.dag_walk import walk
from lcm.retrieval.grep import GrepLimits, GrepQuery, grep
from lcm.retrieval.repository import HistoryRepository
from lcm.retrieval.search_backlog import index_search_backlog
from lcm.retrieval.search_rows import Bounds
from lcm.summarize.summarizer import Summarizer
from lcm.tenants.service import IssuedKey

MESSAGES = 1_500


def _seed(db: Database, tenant_id: str) -> tuple[int, int]:
    with db.engine.connect() as conn:
        seeder = Seeder(conn, tenant_id)
        raw = seeder.raw(["raw"], 600)[0]
        compacted = seeder.compacted("compacted", MESSAGES)
        conn.commit()
    index_search_backlog(db.transaction)  # SQLite's search index (nothing on Postgres)
    return raw, compacted


def test_the_doctor_finds_nothing_wrong_with_a_seeded_history(
    db: Database, tenant: IssuedKey
) -> None:
    _seed(db, tenant.tenant_id)
    with db.session() as s:
        # Counters, dangling items, and every token count (messages, summaries,
        # the summary items as assembly renders them).
        assert find_structural(s, tenant.tenant_id, None) == {}


def test_every_seeded_message_is_reachable_from_the_compacted_context(
    db: Database, tenant: IssuedKey
) -> None:
    _raw, cid = _seed(db, tenant.tenant_id)
    with db.session() as s:
        items = s.execute(
            select(ContextItem.summary_id, ContextItem.message_id)
            .where(ContextItem.conversation_id == cid)
            .order_by(ContextItem.ordinal)
        ).all()
        tops = [sid for sid, _ in items if sid is not None]
        leaves = walk(HistoryRepository(s), tops).leaves
        under = set(
            s.scalars(
                select(SummaryMessage.message_id).where(SummaryMessage.summary_id.in_(leaves))
            )
        )
        shown = {mid for _, mid in items if mid is not None}
        every = set(s.scalars(select(Message.id).where(Message.conversation_id == cid)))
    assert len(every) == MESSAGES
    assert len(shown) == RAW_TAIL
    assert under | shown == every
    assert not under & shown
    assert len(tops) <= 8 + LOOSE_LEAVES


def test_a_seeded_history_assembles_greps_and_compacts(db: Database, tenant: IssuedKey) -> None:
    raw, cid = _seed(db, tenant.tenant_id)
    with db.session() as s:
        context = assemble(s, cid, 200_000, db.settings)
        assert context.summary_count > LOOSE_LEAVES
        assert context.fresh_tail_count > 0
        limits = GrepLimits(timeout_ms=60_000, max_pattern_chars=1_000, half_life_hours=168)
        bounds = Bounds(tenant.tenant_id, (raw, cid))
        ids = list(s.scalars(select(Message.id).where(Message.conversation_id.in_([raw, cid]))))
        found = grep(s, bounds, GrepQuery("payments rollback", "full_text", "messages"), limits)
        # The phrases are planted by id: one message in 500, and in 300 (module bench.growth_seed).
        assert len(found.matches) == len([i for i in ids if i % 500 == 7]) > 0
        regex = GrepQuery(r"timeout after \d+ ms", "regex", "messages", "recency", 200)
        timeouts = [i for i in ids if i % 300 == 11 and i % 500 != 7]
        assert len(grep(s, bounds, regex, limits).matches) == len(timeouts) > 0
    engine = CompactionEngine(db.transaction, Summarizer(InstantProvider()))
    leaf = next_pass(engine.load(cid), db.settings, 200_000)
    assert leaf is not None
    assert leaf.kind == "leaf"
    assert engine.run_pass(tenant.tenant_id, cid, leaf, db.settings).entry is not None
    entries = engine.load(cid)
    first = next(i for i, e in enumerate(entries) if e.summary_depth == 0)
    condensed = shallowest_condensation(
        entries[: first + 4], db.settings, fanout=4, max_result_depth=None, phase="routine"
    )
    assert condensed is not None
    assert condensed.depth == 1
    assert engine.run_pass(tenant.tenant_id, cid, condensed, db.settings).entry is not None


def test_sizes_read_with_their_suffix() -> None:
    assert [parse_count(v) for v in ("500", "1k", "10K", "1m", "2.5m")] == [
        500,
        1_000,
        10_000,
        1_000_000,
        2_500_000,
    ]
