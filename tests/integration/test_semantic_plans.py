"""The dense statement on Postgres with pgvector: the HNSW index can serve a wide
scope, a narrow one is scored exactly, and the query vector stays a vector in a
prepared statement's generic plan."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import event, text
from sqlalchemy.orm import Session

from lcm.db.engine import Database
from lcm.db.models import Conversation, utcnow
from lcm.semantic import nearest_repository
from lcm.semantic.embedder import MODEL_NAME
from lcm.semantic.repository import EmbeddingRepository
from tests.conftest import RecordingSender, new_tenant

pytestmark = pytest.mark.postgres
HNSW = "ix_embeddings_embedding_hnsw"
SUMMARY_HNSW = "ix_embeddings_summary_hnsw"


def _unit(rng: random.Random) -> list[float]:
    vector = [rng.gauss(0, 1) for _ in range(384)]
    norm = sum(x * x for x in vector) ** 0.5
    return [x / norm for x in vector]


@pytest.fixture
def seeded(pg_db: Database) -> Iterator[tuple[Database, str, list[int]]]:
    """Two tenants' vectors (two conversations each), ANALYZEd."""
    db = Database(pg_db.settings.model_copy(update={"semantic": True}), RecordingSender())
    rng, now = random.Random(5), utcnow()
    tenants = [new_tenant(db, name).tenant_id for name in ("a", "b")]
    cids: list[int] = []
    with db.transaction() as session:
        for tenant_id in tenants:
            for key in ("one", "two"):
                conversation = Conversation(tenant_id=tenant_id, session_key=key, session_id=key)
                session.add(conversation)
                session.flush()
                cids.append(conversation.id)
        rows = []
        for n in range(800):
            vector = _unit(rng)
            cid = cids[n % len(cids)]
            rows.append(
                {
                    "tenant_id": tenants[n % len(cids) // 2],
                    "conversation_id": cid,
                    "target": "summary",
                    "source": f"sum_t{n}",
                    "message_id": None,
                    "chunk": 0,
                    "model": MODEL_NAME,
                    "dimension": 384,
                    "at": now,
                    "created_at": now,
                    "vector": None,
                    "embedding": "[" + ",".join(f"{x:.6g}" for x in vector) + "]",
                }
            )
        repo = EmbeddingRepository(session)
        assert repo.uses_pgvector
        repo.store(rows)
    with db.engine.begin() as conn:
        conn.execute(text("ANALYZE embeddings"))
    yield db, tenants[0], cids[:2]
    db.dispose()


def _nearest(
    session: Session,
    tenant_id: str,
    cids: list[int] | None,
    seed: int,
    targets: tuple[str, ...] = ("summary",),
) -> Any:
    return EmbeddingRepository(session).nearest(
        tenant_id, MODEL_NAME, cids, targets, None, None, _unit(random.Random(seed)), 30
    )


def _dense_statement(
    db: Database,
    tenant_id: str,
    cids: list[int] | None,
    targets: tuple[str, ...] = ("summary",),
) -> Any:
    """The nearest rows, and the ordered statement that found them with its parameters."""
    seen: list[tuple[str, Any]] = []

    def listen(_c: Any, _cur: Any, statement: str, params: Any, *_rest: Any) -> None:
        if "FROM embeddings" in statement and "ORDER BY" in statement:
            seen.append((statement, params))

    event.listen(db.engine, "before_cursor_execute", listen)
    try:
        with db.read_session() as session:
            found = _nearest(session, tenant_id, cids, 1, targets)
    finally:
        event.remove(db.engine, "before_cursor_execute", listen)
    ((statement, params),) = seen
    return found, statement, params


def _plan(db: Database, statement: str, params: Any, off: tuple[str, ...]) -> str:
    with db.engine.begin() as conn:
        for setting in off:
            conn.execute(text(f"SET LOCAL {setting} = off"))
        conn.execute(text("SET LOCAL hnsw.iterative_scan = relaxed_order"))
        return "\n".join(r[0] for r in conn.exec_driver_sql("EXPLAIN " + statement, params))


def test_a_tenant_wide_dense_search_can_walk_the_hnsw_index(
    seeded: tuple[Database, str, list[int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Above the exact-search threshold, with sorts and scans priced out, the plan
    must be the index's ordered scan: the ORDER BY is the operator class's own
    expression with LIMIT right above it."""
    db, tenant_id, _cids = seeded
    monkeypatch.setattr(nearest_repository, "EXACT_SEARCH_BELOW", 100)  # the tenant holds 400
    monkeypatch.setattr(nearest_repository, "EXACT_SUMMARIES_BELOW", 100)
    found, statement, params = _dense_statement(db, tenant_id, None)
    assert len(found) == 30
    assert all(row[0] == "summary" for row in found)
    plan = _plan(db, statement, params, ("enable_seqscan", "enable_bitmapscan", "enable_sort"))
    # Every vector here is a summary, so either graph serves it at the same cost.
    assert HNSW in plan or SUMMARY_HNSW in plan, plan
    assert "Sort" not in plan, plan


def test_a_narrow_scope_is_scored_exactly_with_the_hits_of_the_hnsw_walk(
    seeded: tuple[Database, str, list[int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Below the threshold the statement orders by an expression the HNSW index
    cannot serve, even with every other plan priced out, and finds what an
    exhaustive walk of the graph finds (and what scoring every vector finds)."""
    db, tenant_id, cids = seeded
    found, statement, params = _dense_statement(db, tenant_id, cids[:1])
    assert len(found) == 30
    assert {row[2] for row in found} == {cids[0]}
    plan = _plan(db, statement, params, ("enable_seqscan", "enable_sort"))
    assert HNSW not in plan, plan
    assert "Sort" in plan, plan

    monkeypatch.setattr(nearest_repository, "EXACT_SEARCH_BELOW", 0)  # always the HNSW walk
    monkeypatch.setattr(nearest_repository, "EXACT_SUMMARIES_BELOW", 0)
    with db.read_session() as session:
        # A search list wider than the table: the walk visits every vector.
        session.execute(text("SELECT set_config('hnsw.ef_search', '1000', true)"))
        walked = _nearest(session, tenant_id, cids[:1], 1)
    with db.read_session() as session:
        scored = session.execute(
            text(
                "SELECT source, -(embedding <#> CAST(:q AS vector)) FROM embeddings "
                "WHERE conversation_id = :cid ORDER BY 2 DESC LIMIT 30"
            ),
            {"q": str(_unit(random.Random(1))), "cid": cids[0]},
        ).all()
    assert [row[1] for row in found] == [row[1] for row in walked]
    assert [row[1] for row in found] == [row[0] for row in scored]
    assert [row[3] for row in found] == pytest.approx([row[1] for row in scored], abs=1e-5)


def test_the_query_vector_is_bound_as_a_vector_in_prepared_statements(
    seeded: tuple[Database, str, list[int]],
) -> None:
    """psycopg prepares a statement after five runs; Postgres then may use a
    generic plan. A text parameter cast to vector in it is parsed again for every
    row an exact sort reads (one conversation: hundreds of ms at 2,000 rows)."""
    db, tenant_id, cids = seeded
    with db.engine.connect() as conn:
        results = []
        for n in range(12):
            with Session(bind=conn) as session:
                results.append(_nearest(session, tenant_id, cids[:1], n))
                session.commit()
        types = [
            list(r[0])
            for r in conn.execute(
                text(
                    "SELECT parameter_types FROM pg_prepared_statements "
                    "WHERE statement LIKE '%FROM embeddings%<#>%'"
                )
            )
        ]
    assert types, "the dense statement was never prepared"
    assert all("vector" in t for t in types), types
    assert all(len(r) == 30 and {row[2] for row in r} == {cids[0]} for r in results)


def test_a_small_scope_of_one_target_reads_only_that_targets_rows(
    seeded: tuple[Database, str, list[int]],
) -> None:
    """A tenant's summaries scored exactly: the index holds target (migration 0033),
    so the scan reads the summaries alone, not every vector of the tenant with its
    messages dropped row by row by a filter."""
    db, tenant_id, _cids = seeded
    rng, now = random.Random(9), utcnow()
    with db.transaction() as session:
        cid = session.execute(
            text("SELECT id FROM conversations WHERE tenant_id = :t LIMIT 1"), {"t": tenant_id}
        ).scalar_one()
        session.execute(
            text(
                "INSERT INTO embeddings (tenant_id, conversation_id, target, source, chunk, "
                "model, dimension, at, created_at, embedding) "
                "SELECT :t, :c, 'message', 'msg_' || n, 0, :m, 384, :now, :now, CAST(:v AS vector) "
                "FROM generate_series(1, 4000) n"
            ),
            {"t": tenant_id, "c": cid, "m": MODEL_NAME, "now": now, "v": str(_unit(rng))},
        )
    with db.engine.begin() as conn:
        conn.execute(text("ANALYZE embeddings"))
    found, statement, params = _dense_statement(db, tenant_id, None)
    assert len(found) == 30
    assert all(row[0] == "summary" for row in found)
    plan = _plan(db, statement, params, ("enable_seqscan", "enable_bitmapscan"))
    assert HNSW not in plan, plan
    assert "ix_embeddings_tenant_model_target" in plan, plan
    condition = next(line for line in plan.splitlines() if "Index Cond" in line)
    assert "target" in condition, plan
    assert "Filter" not in plan, plan


def test_a_tenants_twenty_thousand_summaries_walk_the_graph_of_summaries(
    seeded: tuple[Database, str, list[int]],
) -> None:
    """Summaries alone are scored exactly only below ``EXACT_SUMMARIES_BELOW``
    (10,000); above, they walk migration 0035's graph of summaries: at 1M vectors
    a tenant's 23,500 summaries took 50-90 ms exact, 2.5-17 ms walked there. Below
    ``EXACT_SEARCH_BELOW`` (30,000), a scope of messages too is still sorted
    exactly (the graph of every vector is the one it could walk)."""
    db, tenant_id, _cids = seeded
    now = utcnow()
    with db.transaction() as session:
        cid = session.execute(
            text("SELECT id FROM conversations WHERE tenant_id = :t LIMIT 1"), {"t": tenant_id}
        ).scalar_one()
        session.execute(
            text(
                "INSERT INTO embeddings (tenant_id, conversation_id, target, source, chunk, "
                "model, dimension, at, created_at, embedding) "
                "SELECT :t, :c, 'summary', 'sum_many' || n, 0, :m, 384, :now, :now, "
                "CAST(:v AS vector) FROM generate_series(1, 20000) n"
            ),
            {
                "t": tenant_id,
                "c": cid,
                "m": MODEL_NAME,
                "now": now,
                "v": str(_unit(random.Random(3))),
            },
        )
    with db.engine.begin() as conn:
        conn.execute(text("ANALYZE embeddings"))
    found, statement, params = _dense_statement(db, tenant_id, None)
    assert len(found) == 30
    assert "+ 0" not in statement.replace("+0", "+ 0"), statement
    # Every vector of this table is a summary, so the two graphs are the same
    # size and the planner may take either (at 1M vectors, summaries 6% of
    # them, it takes the graph of summaries: docs/performance.md). With the
    # graph of all out of the way, the statement's own predicates must let the
    # graph of summaries serve it: the partial index's predicate is implied.
    with db.engine.connect() as conn:
        transaction = conn.begin()
        conn.execute(text(f"DROP INDEX {HNSW}"))
        conn.execute(text("SET LOCAL hnsw.iterative_scan = relaxed_order"))
        plan = "\n".join(r[0] for r in conn.exec_driver_sql("EXPLAIN " + statement, params))
        transaction.rollback()
    assert SUMMARY_HNSW in plan, plan
    assert "Sort" not in plan, plan
    _found, statement, _params = _dense_statement(db, tenant_id, None, ("message", "summary"))
    assert "+ 0" in statement.replace("+0", "+ 0"), statement
