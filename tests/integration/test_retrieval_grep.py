"""grep on real databases (SQLite FTS5 and Postgres tsvector/pg_trgm)."""

from __future__ import annotations

import itertools
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from lcm.db.engine import Database
from lcm.db.migrate import downgrade, upgrade
from lcm.errors import InvalidInput, NotFound
from lcm.retrieval.grep import GrepLimits, GrepQuery, GrepResult, grep
from lcm.retrieval.scope import ScopeSelector, resolve_bounds
from lcm.retrieval.search_repository import SearchRepository, is_timeout
from lcm.tenants.service import IssuedKey
from tests.conftest import new_tenant, settings_for
from tests.integration.retrieval_data import T0, compact, ingest

LIMITS = GrepLimits(timeout_ms=5_000, max_pattern_chars=1_000, half_life_hours=168)
FILLER = [
    "the weather was nice and we talked about lunch plans",
    "a note on the release checklist and the changelog",
    "someone asked about the dashboard colours",
]


def run(
    db: Database,
    tenant_id: str,
    query: GrepQuery,
    selector: ScopeSelector | None = None,
    **bounds: Any,
) -> GrepResult:
    with db.session() as session:
        scope = resolve_bounds(
            session, tenant_id, selector or ScopeSelector(session_key="agent:main"), **bounds
        )
        return grep(session, scope, query, LIMITS)


def test_exact_phrase_outranks_scattered_terms(db: Database, tenant: IssuedKey) -> None:
    phrase = "yesterday we had to roll back the billing migration before lunch"
    scattered = "billing was fine; the migration tool needs a roll of tape; we walked back"
    # The scattered one is newer, so neither recency nor ids favour the phrase.
    ingest(db, tenant.tenant_id, "agent:main", [*FILLER, phrase, *FILLER, scattered])
    result = run(
        db,
        tenant.tenant_id,
        GrepQuery("roll back billing migration", "full_text", scope="messages", sort="relevance"),
    )
    assert [m.snippet.replace("«", "").replace("»", "") for m in result.matches] == [
        phrase,
        scattered,
    ]
    assert result.matches[0].score is not None
    assert result.matches[1].score is not None
    assert result.matches[0].score > result.matches[1].score
    assert "«roll» «back» the «billing» «migration»" in result.matches[0].snippet


def test_recency_order_is_strict(db: Database, tenant: IssuedKey) -> None:
    contents = [f"deploy attempt {i} of the api server" for i in range(30)]
    ingest(db, tenant.tenant_id, "agent:main", contents, step=timedelta(seconds=7))
    for mode, pattern in (("full_text", "deploy attempt"), ("regex", r"deploy attempt \d+")):
        result = run(
            db,
            tenant.tenant_id,
            GrepQuery(pattern, mode, scope="messages", limit=12),  # type: ignore[arg-type]
        )
        times = [m.created_at for m in result.matches]
        assert len(times) == 12
        assert all(a > b for a, b in itertools.pairwise(times)), mode
        assert result.matches[0].seq == 30


def test_hybrid_decays_relevance_with_age(db: Database, tenant: IssuedKey) -> None:
    exact_old = "the kafka consumer lag alert fired"
    scattered_new = "kafka was slow; the consumer saw lag; then an alert"
    ingest(
        db,
        tenant.tenant_id,
        "agent:main",
        [exact_old, scattered_new, *FILLER],
        start=T0,
        step=timedelta(days=60),
    )
    query = GrepQuery("kafka consumer lag alert", "full_text", scope="messages", sort="hybrid")
    with db.session() as session:
        bounds = resolve_bounds(session, tenant.tenant_id, ScopeSelector(session_key="agent:main"))
        now = T0 + timedelta(days=61)
        slow_decay = grep(session, bounds, query, GrepLimits(5_000, 1_000, 24 * 3650), now=now)
        fast_decay = grep(session, bounds, query, GrepLimits(5_000, 1_000, 24 * 5), now=now)
    assert [m.seq for m in slow_decay.matches] == [1, 2]  # ~ relevance: the phrase wins
    assert [m.seq for m in fast_decay.matches] == [2, 1]  # 60 days of age outweigh it


@pytest.mark.parametrize(
    ("content", "query"),
    [
        ("我们决定把数据库迁移到新的集群上", "数据库迁移"),
        ("我们决定把数据库迁移到新的集群上", "迁移"),  # two characters: below a trigram
        ("昨日のデプロイは失敗しました。原因は設定ファイルです", "設定ファイル"),
        ("昨日のデプロイは失敗しました。原因は設定ファイルです", "デプロイ 失敗"),
    ],
)
def test_chinese_and_japanese_are_found_by_full_text(
    db: Database, tenant: IssuedKey, content: str, query: str
) -> None:
    ingest(db, tenant.tenant_id, "agent:main", [*FILLER, content, "今日は晴れです"])
    result = run(db, tenant.tenant_id, GrepQuery(query, "full_text", scope="messages"))
    assert [m.seq for m in result.matches] == [4]
    assert "«" in result.matches[0].snippet


def test_catastrophic_regex_over_100kb_returns_quickly(db: Database, tenant: IssuedKey) -> None:
    ingest(db, tenant.tenant_id, "agent:main", ["a" * 100_000, "a" * 100_000 + "b", "hello"])
    started = time.perf_counter()
    result = run(db, tenant.tenant_id, GrepQuery("(a+)+$", scope="messages"))
    assert time.perf_counter() - started < 3.0
    assert [m.seq for m in result.matches] == [1]
    assert result.complete


def test_regex_prefilter_keeps_every_match(db: Database, tenant: IssuedKey) -> None:
    ingest(
        db,
        tenant.tenant_id,
        "agent:main",
        ["progress: 100%_done now", "ERROR 42 in src/app.py", "error 7 in SRC/APP.PY"],
    )
    regex_hits = run(db, tenant.tenant_id, GrepQuery(r"100%_done", scope="messages"))
    assert [m.seq for m in regex_hits.matches] == [1]
    cased = run(db, tenant.tenant_id, GrepQuery(r"(?i)error \d+ in src/app\.py", scope="messages"))
    assert sorted(m.seq or 0 for m in cased.matches) == [2, 3]
    exact = run(db, tenant.tenant_id, GrepQuery(r"ERROR \d+", scope="messages"))
    assert [m.seq for m in exact.matches] == [2]


def test_summaries_are_searched_and_cited_by_id(db: Database, tenant: IssuedKey) -> None:
    texts = [f"step {i}: configured the PostgreSQL replica number {i}" for i in range(24)]
    cid = ingest(db, tenant.tenant_id, "agent:main", texts)
    compact(db, tenant.tenant_id, cid)
    result = run(db, tenant.tenant_id, GrepQuery("replica", "full_text", scope="summaries"))
    assert result.matches
    assert all(m.type == "summary" for m in result.matches)
    assert all(str(m.id).startswith("sum_") and m.ref == m.id for m in result.matches)
    both = run(db, tenant.tenant_id, GrepQuery("replica", "full_text", scope="both", limit=200))
    assert {m.type for m in both.matches} == {"message", "summary"}
    assert len([m for m in both.matches if m.type == "message"]) == 24


def test_since_and_before_bound_the_search(db: Database, tenant: IssuedKey) -> None:
    ingest(db, tenant.tenant_id, "agent:main", ["cache miss"] * 10, step=timedelta(hours=1))
    result = run(
        db,
        tenant.tenant_id,
        GrepQuery("cache", scope="messages"),
        since=T0 + timedelta(hours=3),
        before=T0 + timedelta(hours=6),
    )
    assert [m.seq for m in result.matches] == [6, 5, 4]


def test_isolation_between_tenants_and_families(db: Database, tenant: IssuedKey) -> None:
    other = new_tenant(db, "other")
    mine = ingest(db, tenant.tenant_id, "agent:main", ["secret token alpha"])
    ingest(db, tenant.tenant_id, "agent:other-family", ["secret token beta"])
    theirs = ingest(db, other.tenant_id, "agent:main", ["secret token gamma"])
    for mode in ("regex", "full_text"):
        family = run(db, tenant.tenant_id, GrepQuery("secret token", mode))
        assert [m.conversation_id for m in family.matches] == [mine]
        assert "alpha" in family.matches[0].snippet
        everything = run(
            db,
            tenant.tenant_id,
            GrepQuery("secret", mode),
            ScopeSelector(all_conversations=True),
        )
        assert {m.conversation_id for m in everything.matches} == {mine, mine + 1}
        assert theirs not in {m.conversation_id for m in everything.matches}
    with pytest.raises(NotFound):
        run(db, tenant.tenant_id, GrepQuery("secret"), ScopeSelector(conversation_id=theirs))
    with pytest.raises(NotFound):
        run(db, tenant.tenant_id, GrepQuery("secret"), ScopeSelector(session_key="nobody"))


def test_one_scope_is_required_and_limits_are_enforced(db: Database, tenant: IssuedKey) -> None:
    ingest(db, tenant.tenant_id, "agent:main", ["x"])
    with pytest.raises(InvalidInput) as none_given:
        run(db, tenant.tenant_id, GrepQuery("x"), ScopeSelector())
    assert none_given.value.code == "scope_required"
    with pytest.raises(InvalidInput):
        run(
            db,
            tenant.tenant_id,
            GrepQuery("x"),
            ScopeSelector(session_key="agent:main", all_conversations=True),
        )
    with pytest.raises(InvalidInput):
        run(db, tenant.tenant_id, GrepQuery("x", limit=201))


def test_the_statement_deadline_cancels_a_long_query(db: Database) -> None:
    endless = text(
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 100000000) "
        "SELECT count(*) FROM c"
    )
    with db.session() as session:
        repo = SearchRepository(session)
        started = time.perf_counter()
        with pytest.raises(OperationalError) as caught, repo.statement_deadline(100):
            session.execute(endless)
        assert is_timeout(caught.value)
        assert time.perf_counter() - started < 3.0


def test_migration_0002_indexes_existing_rows_and_reverts(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    upgrade(url)
    database = Database(settings_for(url))
    try:
        # Rows written through today's models, then the schema taken back to
        # before the search indexes: 0002 must index rows it did not see written.
        tenant = new_tenant(database)
        ingest(database, tenant.tenant_id, "agent:main", ["written before the search indexes"])
        downgrade(url, "0001")
        assert not _search_tables(database)
        upgrade(url, "0002")
        with database.session() as s:
            found = s.execute(
                text("SELECT rowid FROM messages_fts WHERE messages_fts MATCH 'search indexes'")
            ).all()
        assert len(found) == 1
        downgrade(url, "0001")
        assert not _search_tables(database)
    finally:
        database.dispose()


def _search_tables(database: Database) -> set[str]:
    with database.session() as s:
        tables = {r[0] for r in s.execute(text("SELECT name FROM sqlite_master"))}
    return {t for t in tables if t.startswith(("messages_fts", "summaries_trigram"))}


def test_beat_sweeps_expired_grants() -> None:
    from lcm.settings import Settings
    from workers.celery_app import app, beat_schedule

    entry = beat_schedule(Settings())["expansion-sweep-grants"]
    assert entry["task"] == "expansion.sweep_grants"
    assert app.amqp.router.route({}, "expansion.query")["queue"].name == "expansion"
