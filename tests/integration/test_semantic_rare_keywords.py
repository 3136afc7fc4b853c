"""Hybrid grep's full-text candidates: a keyword rare in a big scope is read through
the text index, not by walking the scope newest first. SQLite: a bounded probe of
the FTS table's first matches, with the walk's hits, fused order and ``complete``.
Postgres: the statement is planned for its own keywords every time (never a
prepared statement's generic plan), so its planner picks the text index's bitmap."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import event, text
from sqlalchemy.orm import Session

from bench.growth_seed import Seeder
from lcm.db.engine import Database
from lcm.retrieval import match_repository, semantic_grep
from lcm.retrieval.grep import GrepLimits, GrepQuery, grep
from lcm.retrieval.prompt_terms import keywords_query
from lcm.retrieval.query import parse_text_query
from lcm.retrieval.scope import ScopeSelector, resolve_bounds
from lcm.retrieval.search_backlog import index_search_backlog
from lcm.retrieval.search_repository import SearchRepository
from lcm.retrieval.semantic_grep import SemanticOptions
from tests.conftest import RecordingSender, api_client, new_tenant
from tests.integration.retrieval_data import compact
from tests.integration.semantic_helpers import FILLER, post_messages

LIMITS = GrepLimits(30_000, 1_000, 168.0, SemanticOptions(True, "both"))
# In the seeded text: "payments" 1 message in 500, "timeout" 1 in 300, "build" ~1 in 5.
RARE, MEDIUM, COMMON = "payments", "timeout", "build"


def _seed(base: Database) -> tuple[Database, str]:
    """One tenant of 9,000 messages in three conversations, indexed and ANALYZEd."""
    db = Database(base.settings.model_copy(update={"semantic": True}), RecordingSender())
    tenant = new_tenant(db).tenant_id
    with db.engine.connect() as conn:
        Seeder(conn, tenant).raw(["a", "b", "c"], 3_000)
        conn.commit()
    index_search_backlog(db.transaction)  # SQLite's FTS tables (nothing on Postgres)
    with db.engine.begin() as conn:
        conn.execute(
            text("ANALYZE messages" if db.engine.dialect.name == "postgresql" else "ANALYZE")
        )
    return db, tenant


@pytest.fixture
def seeded(sqlite_db: Database) -> Iterator[tuple[Database, str]]:
    db, tenant = _seed(sqlite_db)
    yield db, tenant
    db.dispose()


@pytest.fixture
def pg_seeded(pg_db: Database) -> Iterator[tuple[Database, str]]:
    db, tenant = _seed(pg_db)
    yield db, tenant
    db.dispose()


def _grep(
    db: Database, tenant: str, pattern: str, params: dict[str, Any] | None = None
) -> tuple[Any, list[str]]:
    """The grep's result and the full-text candidate statements it ran (EXPLAIN aside)."""
    seen: list[str] = []

    def listen(_c: Any, _cur: Any, statement: str, bound: Any, *_rest: Any) -> None:
        text_match = "content_tsv @@" in statement or "messages_fts MATCH" in statement
        candidates = text_match and "ts_rank" not in statement and "bm25" not in statement
        if candidates and not statement.startswith("EXPLAIN"):
            seen.append(statement)
            if params is not None:
                params[statement] = bound

    event.listen(db.engine, "before_cursor_execute", listen)
    try:
        with db.read_session() as session:
            bounds = resolve_bounds(session, tenant, ScopeSelector(all_conversations=True))
            query = GrepQuery(pattern, "hybrid", "messages", "relevance", 50)
            found = grep(session, bounds, query, LIMITS)
    finally:
        event.remove(db.engine, "before_cursor_execute", listen)
    return found, seen


def _same(probed: Any, walked: Any) -> None:
    assert [m.ref for m in probed.matches] == [m.ref for m in walked.matches]
    assert [m.score for m in probed.matches] == pytest.approx([m.score for m in walked.matches])
    assert probed.complete is walked.complete
    assert probed.notes == walked.notes


def _walked(db: Database, tenant: str, pattern: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    with monkeypatch.context() as m:
        m.setattr(match_repository, "_probed_fts", lambda *_: None)  # the walk
        found, seen = _grep(db, tenant, pattern)
    assert all("ORDER BY" in s for s in seen), seen
    return found


@pytest.mark.parametrize("pattern", [RARE, f"{RARE} zzqx", MEDIUM])
def test_a_rare_keyword_is_read_through_the_text_index_with_the_walks_hits(
    seeded: tuple[Database, str], monkeypatch: pytest.MonkeyPatch, pattern: str
) -> None:
    db, tenant = seeded
    walked = _walked(db, tenant, pattern, monkeypatch)
    probed, seen = _grep(db, tenant, pattern)
    assert walked.matches, "the seeded text holds the keyword"
    _same(probed, walked)
    assert probed.complete is True
    # The probe's statement has no ORDER BY, and no walk ran after it.
    assert [s for s in seen if "ORDER BY" in s] == [], seen
    assert any("LIMIT" in s for s in seen), seen


def test_between_the_bound_and_the_probe_the_newest_are_kept_and_the_cut_is_reported(
    seeded: tuple[Database, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """More matches than the full-text bound, fewer than the probe reads: the probe
    picks the newest (as the walk would) and the grep says it was cut."""
    db, tenant = seeded
    monkeypatch.setattr(semantic_grep, "FULL_TEXT_CANDIDATES", 7)
    walked = _walked(db, tenant, MEDIUM, monkeypatch)
    probed, seen = _grep(db, tenant, MEDIUM)
    _same(probed, walked)
    assert probed.complete is False
    assert [s for s in seen if "ORDER BY" in s] == [], seen


def test_more_matches_than_the_probe_reads_fall_back_to_the_walk(
    seeded: tuple[Database, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    db, tenant = seeded
    monkeypatch.setattr(match_repository, "PROBE_ROWS", 5)
    walked = _walked(db, tenant, MEDIUM, monkeypatch)
    probed, seen = _grep(db, tenant, MEDIUM)
    _same(probed, walked)
    # The probe ran, found more than it reads, and the walk answered.
    assert any("ORDER BY" not in s for s in seen), seen
    assert any("ORDER BY" in s for s in seen), seen


def _candidates(db: Database, tenant: str, words: list[str]) -> tuple[list[Any], str, Any]:
    """``newest_matches`` for each of ``words`` on one connection (psycopg prepares a
    statement after five runs); the prepared candidates statements' plan counts, and
    the last statement with its parameters."""
    seen: list[tuple[str, Any]] = []

    def listen(_c: Any, _cur: Any, statement: str, bound: Any, *_rest: Any) -> None:
        if "content_tsv @@" in statement and "FROM messages" in statement:
            seen.append((statement, bound))

    event.listen(db.engine, "before_cursor_execute", listen)
    try:
        with db.engine.connect() as conn:
            for word in words:
                with Session(bind=conn) as session:
                    bounds = resolve_bounds(session, tenant, ScopeSelector(all_conversations=True))
                    query = keywords_query(parse_text_query(word))
                    SearchRepository(session).newest_matches("message", bounds, query, 1_001)
                    session.commit()
            counts = conn.execute(
                text(
                    "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
                    "WHERE statement LIKE '%content_tsv @@%ORDER BY%'"
                )
            ).all()
    finally:
        event.remove(db.engine, "before_cursor_execute", listen)
    statement, params = seen[-1]
    return list(counts), statement, params


@pytest.mark.postgres
def test_postgres_plans_the_candidates_for_their_own_keywords_every_time(
    pg_seeded: tuple[Database, str],
) -> None:
    """Common keywords first, then rare ones, on one connection: the statement is
    prepared, and each run is still a custom plan; for a rare keyword that plan reads
    the matches, not the tenant's messages newest first."""
    db, tenant = pg_seeded
    counts, statement, params = _candidates(db, tenant, [COMMON] * 8 + [RARE, "zzqx"] * 4)
    assert counts, "the candidates statement was never prepared"
    assert all(generic == 0 and custom > 0 for generic, custom in counts), counts
    with db.engine.begin() as conn:
        conn.execute(text("SET LOCAL plan_cache_mode = force_custom_plan"))
        plan = "\n".join(r[0] for r in conn.exec_driver_sql("EXPLAIN " + statement, params))
    # The matches are read and sorted (at this size a scan may beat the bitmap),
    # not the tenant's messages walked newest first.
    assert "ix_messages_tenant_created" not in plan, plan
    assert "Sort Key: messages.created_at DESC" in plan or "Sort Key: created_at DESC" in plan, plan


def test_summaries_take_the_probe_on_sqlite_with_the_walks_hits(
    sqlite_db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The summaries' FTS table drives their probe as the messages' does."""
    db = Database(sqlite_db.settings.model_copy(update={"semantic": True}), RecordingSender())
    client = next(api_client(db.settings, db, RecordingSender()))
    who = new_tenant(db)
    history = [*FILLER, *(f"{text} Again, day {i}." for i in range(3) for text in FILLER)]
    cid = post_messages(client, who, "agent:main", history)
    compact(db, who.tenant_id, cid, fresh_tail=2)
    index_search_backlog(db.transaction)
    seen: list[str] = []

    def listen(_c: Any, _cur: Any, statement: str, *_rest: Any) -> None:
        if "summaries_fts MATCH" in statement and "bm25" not in statement:
            seen.append(statement)

    def ask() -> Any:
        with db.read_session() as session:
            bounds = resolve_bounds(session, who.tenant_id, ScopeSelector(all_conversations=True))
            query = GrepQuery("the kitten from the shelter", "hybrid", "summaries", "relevance", 20)
            return grep(session, bounds, query, LIMITS)

    with monkeypatch.context() as m:
        m.setattr(match_repository, "_probed_fts", lambda *_: None)  # the walk
        walked = ask()
    event.listen(db.engine, "before_cursor_execute", listen)
    try:
        probed = ask()
    finally:
        event.remove(db.engine, "before_cursor_execute", listen)
    assert any(m.type == "summary" for m in walked.matches), walked.matches
    _same(probed, walked)
    assert seen, seen
    assert [s for s in seen if "ORDER BY" in s] == [], seen
    db.dispose()
