"""The property that lets Postgres be distributed on ``tenant_id`` (docs/operations.md).

Citus (or any engine distributing tables by a column) needs three things of
a schema: every distributed table carries the distribution column, every
primary key and unique constraint includes it (uniqueness is enforced per
shard), and every query of the request path names one tenant (so it runs on
one node). Tables that are not distributed are *reference* tables,
replicated to every node: they must be small and global.

The schema test reads the migrated Postgres schema and asserts the exact list
of constraints that do not include ``tenant_id`` today: the schema is not
changed here (docs/operations.md says what the migration would change), and a
new table or constraint without ``tenant_id`` fails this test. The request
path test records every SQL statement of a run of the HTTP request path
(ingest, turns, assemble, grep, describe, expand, status) and asserts each
one that touches a tenant table filters on ``tenant_id`` (or, for an
INSERT, writes it), except the exact list below.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event, inspect

from lcm.db.engine import Database
from tests.conftest import RecordingSender, auth, new_tenant
from tests.integration.retrieval_data import compact
from tests.servers import PostgresHandle
from tests.sql_plans import recording, sequential_scans

# Not distributed: replicated reference tables.
GLOBAL_TABLES = {
    # Alembic's one-row schema version: the same on every node.
    "alembic_version": "schema version, one row",
    # The tenants themselves: one row per tenant, keyed by the distribution
    # value (its id is what every other table's tenant_id names).
    "tenants": "the distribution key's own table",
    # Read by key hash on every request *before* the tenant is known (that
    # is how the tenant is found): a small replicated table, like tenants.
    "api_keys": "authentication finds the tenant from the key",
    # One lease row for the deployment's embedding backfill (lcm.semantic.backfill).
    "embedding_runs": "the one backfill lease, global by design",
}

# Today's schema, checked exactly: every table carries tenant_id, but the
# keys are surrogate ids. A migration to distribute on tenant_id would make
# each of these (tenant_id, ...) (docs/operations.md, "What the migration changes").
KNOWN_VIOLATIONS = {
    "compaction_debt: primary key (conversation_id)",
    "compaction_runs: primary key (id)",
    "context_items: primary key (id)",
    "embeddings: primary key (id)",
    "conversation_forks: primary key (child_conversation_id)",
    "conversations: primary key (id)",
    "expansion_grants: primary key (id)",
    "host_usage: primary key (id)",
    "large_files: primary key (id)",
    "llm_usage: primary key (id)",
    "message_parts: primary key (id)",
    "messages: primary key (id)",
    "secret_reads: primary key (id)",
    "secret_scans: primary key (id)",
    "secret_spans: primary key (id)",
    "summaries: primary key (id)",
    "summary_messages: primary key (summary_id, message_id)",
    "summary_parents: primary key (summary_id, parent_id)",
    "summary_operations: primary key (id)",
    "turn_commits: primary key (id)",
    "context_items: unique (conversation_id, ordinal)",
    "embeddings: unique (source, chunk, model)",
    "message_parts: unique (message_id, ordinal)",
    "messages: unique (conversation_id, client_id)",
    "messages: unique (conversation_id, seq)",
    "turn_commits: unique (conversation_id, advancement_key)",
    "compaction_debt: foreign key (conversation_id) -> conversations(id)",
    "compaction_runs: foreign key (conversation_id) -> conversations(id)",
    "context_items: foreign key (conversation_id) -> conversations(id)",
    "context_items: foreign key (message_id) -> messages(id)",
    "context_items: foreign key (summary_id) -> summaries(id)",
    "conversation_forks: foreign key (child_conversation_id) -> conversations(id)",
    "conversation_forks: foreign key (parent_conversation_id) -> conversations(id)",
    "embeddings: foreign key (conversation_id) -> conversations(id)",
    "embeddings: foreign key (message_id) -> messages(id)",
    "host_usage: foreign key (conversation_id) -> conversations(id)",
    "large_files: foreign key (conversation_id) -> conversations(id)",
    "large_files: foreign key (message_id) -> messages(id)",
    "llm_usage: foreign key (conversation_id) -> conversations(id)",
    "message_parts: foreign key (message_id) -> messages(id)",
    "messages: foreign key (conversation_id) -> conversations(id)",
    "secret_scan_marks: foreign key (conversation_id) -> conversations(id)",
    "secret_scans: foreign key (conversation_id) -> conversations(id)",
    "secret_spans: foreign key (conversation_id) -> conversations(id)",
    "secret_spans: foreign key (file_id) -> large_files(id)",
    "secret_spans: foreign key (message_id) -> messages(id)",
    "summaries: foreign key (conversation_id) -> conversations(id)",
    "summary_parents: foreign key (parent_id) -> summaries(id)",
    "summary_parents: foreign key (summary_id) -> summaries(id)",
    "summary_operations: foreign key (conversation_id) -> conversations(id)",
    "turn_commits: foreign key (conversation_id) -> conversations(id)",
}


def _schema_violations(url: str) -> set[str]:
    from sqlalchemy import create_engine

    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        inspector = inspect(engine)
        found: set[str] = set()
        for table in sorted(inspector.get_table_names()):
            if table in GLOBAL_TABLES:
                continue
            columns = {c["name"] for c in inspector.get_columns(table)}
            if "tenant_id" not in columns:
                found.add(f"{table}: no tenant_id column")
                continue
            pk = inspector.get_pk_constraint(table)["constrained_columns"]
            if "tenant_id" not in pk:
                found.add(f"{table}: primary key ({', '.join(pk)})")
            for unique in inspector.get_unique_constraints(table):
                cols = unique["column_names"]
                if "tenant_id" not in cols:
                    found.add(f"{table}: unique ({', '.join(cols)})")
            for fk in inspector.get_foreign_keys(table):
                cols = fk["constrained_columns"]
                if fk["referred_table"] not in GLOBAL_TABLES and "tenant_id" not in cols:
                    target = f"{fk['referred_table']}({', '.join(fk['referred_columns'])})"
                    found.add(f"{table}: foreign key ({', '.join(cols)}) -> {target}")
            for index in inspector.get_indexes(table):
                cols = [c for c in index["column_names"] if c]
                if index.get("duplicates_constraint"):
                    continue  # the index behind a unique constraint, listed above
                if index["unique"] and "tenant_id" not in cols:
                    found.add(f"{table}: unique index ({', '.join(cols)})")
        return found
    finally:
        engine.dispose()


def test_schema_distribution_violations_are_exactly_the_known_ones(
    pg_server: PostgresHandle,
) -> None:
    assert _schema_violations(pg_server.url) == KNOWN_VIOLATIONS


# --- the request path's SQL ---------------------------------------------------------

_TABLE_REF = re.compile(r"\b(?:FROM|JOIN|INTO|UPDATE)\s+\"?(\w+)", re.IGNORECASE)
_TENANT_FILTER = re.compile(r"tenant_id\s*(?:=|IN\b|=\s*ANY)", re.IGNORECASE)


def tenant_tables_of(statement: str) -> set[str]:
    return {t for t in _TABLE_REF.findall(statement) if t not in GLOBAL_TABLES}


_INSERT_COLUMNS = re.compile(r"\bINSERT\s+INTO\s+\w+\s*\(([^)]*)\)", re.IGNORECASE)
_WITH_NAMES = re.compile(r"(?:\bWITH|,)\s*(\w+)\s+AS\s*\(", re.IGNORECASE)


def names_a_tenant(statement: str) -> bool:
    """A tenant_id predicate, or INSERTs all writing tenant_id (routed by its value).

    A ``WITH`` statement of INSERTs only (a batch written in one statement)
    counts as its INSERTs when it reads no table but its own sub-statements
    and ``unnest`` of its parameters.
    """
    head = statement.lstrip().upper()
    if head.startswith("INSERT"):
        return "tenant_id" in _INSERT_COLUMNS.findall(statement)[0]
    if head.startswith("WITH") and not re.search(r"\b(?:UPDATE|DELETE)\b", head):
        own = {name.lower() for name in _WITH_NAMES.findall(statement)} | {"unnest"}
        read = {t.lower() for t in re.findall(r"\b(?:FROM|JOIN)\s+(\w+)", statement, re.I)}
        inserts = _INSERT_COLUMNS.findall(statement)
        if inserts and read <= own:
            return all("tenant_id" in columns for columns in inserts)
    return bool(_TENANT_FILTER.search(statement))


@pytest.fixture
def recorded(pg_db: Database) -> Iterator[list[str]]:
    statements: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: object) -> None:
        statements.append(statement)

    event.listen(pg_db.engine, "before_cursor_execute", record)
    yield statements
    event.remove(pg_db.engine, "before_cursor_execute", record)


_PREDICATE = re.compile(r"(\w+)\.(\w+)\s*(?:=|IN\b|>=|<=|<|>)", re.IGNORECASE)


def signature(statement: str) -> str:
    """``VERB tables by columns``: what a statement reads or writes, and what selects the rows."""
    statement = " ".join(statement.split())
    verb = statement.split(None, 1)[0].upper()
    tables = sorted(tenant_tables_of(statement))
    where = statement.upper().find(" WHERE ")
    columns = sorted(
        {f"{t}.{c}" for t, c in _PREDICATE.findall(statement[where:])} if where >= 0 else set()
    )
    return f"{verb} {','.join(tables)} by {','.join(columns) or '-'}"


# Statements of the request path without a tenant_id predicate. Each is
# keyed by an id that the same request first resolved under its tenant (the
# conversation by (tenant_id, session_key), a summary or file by (tenant_id,
# id), search hits by tenant_id): correct and isolated today, checked below by
# the first statement of every request naming the tenant. Distributed on
# tenant_id, each would go to every shard: the migration adds
# ``tenant_id = :tenant`` to each (docs/operations.md).
UNSCOPED_BY_AN_ID_ALREADY_SCOPED = {
    "SELECT compaction_debt by compaction_debt.conversation_id",
    "SELECT compaction_runs by compaction_runs.conversation_id",
    "SELECT context_items by context_items.conversation_id",
    "SELECT context_items by context_items.summary_id",
    "SELECT context_items,summaries by "
    "context_items.conversation_id,context_items.ordinal,summaries.id",
    "SELECT conversations by conversations.id",
    "SELECT message_parts by message_parts.message_id",
    "SELECT message_parts,messages by message_parts.message_id,messages.content_shape",
    "SELECT messages by messages.client_id,messages.conversation_id",
    "SELECT messages by messages.conversation_id",
    "SELECT messages by messages.id",
    "SELECT messages,summary_messages by summary_messages.summary_id",
    "SELECT summaries by summaries.conversation_id",
    "SELECT summary_parents by summary_parents.parent_id",
    "SELECT summary_parents by summary_parents.summary_id",
    "UPDATE context_items,conversations by context_items.conversation_id,conversations.id",
    "UPDATE conversations by conversations.id",
}


def _request_path(pg_db: Database, recorded: list[str]) -> dict[str, list[str]]:
    """Every statement of each request of a gateway's day, by request."""
    from api.app import create_app
    from workers.link import CeleryLink

    tenant = new_tenant(pg_db)
    app = create_app(
        pg_db.settings,
        link=CeleryLink(),
        database=pg_db,
        broker_ping=lambda: True,
        sender=RecordingSender(),
    )
    headers = auth(tenant)
    base = "/v1/conversations/agent:main"
    texts = [f"message {i}: rotated the TLS cert on web-{i}" for i in range(30)]
    seen: dict[str, list[str]] = {}

    def call(name: str, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        recorded.clear()
        r = http.request(method, path, json=body, headers=headers)
        assert r.status_code == 200, (name, r.text)
        seen[name] = list(recorded)
        return r.json()

    with TestClient(app, raise_server_exceptions=False) as http:
        batch: list[dict[str, Any]] = [
            {"role": "user", "content": t, "id": f"m{i}"} for i, t in enumerate(texts)
        ]
        # A tool call and its result: block messages, whose parts are read too.
        call_id = "call_cert"
        batch[-2:] = [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": call_id, "name": "sh", "input": {}}],
                "id": "m28",
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": call_id, "content": "ok"}],
                "id": "m29",
            },
        ]
        cid = call("ingest", "POST", f"{base}/messages", {"messages": batch})["conversation_id"]
        compact(pg_db, tenant.tenant_id, cid)  # a worker's job, not the request path
        assert pg_db.message_cache is not None
        # An API process that has not read this conversation yet: its reads
        # below build the views (with the block messages' parts) themselves.
        pg_db.message_cache.forget_conversations([cid])
        more = [{"role": "assistant", "content": "web-31 is done", "id": "m31"}]
        call("turns", "POST", f"{base}/turns", {"messages": more, "token_budget": 1_000})
        call("assemble", "POST", f"{base}/assemble", {"token_budget": 100_000})
        found = call("grep", "POST", "/v1/grep", {"pattern": "TLS", "session_key": "agent:main"})
        call(
            "grep all (regex)",
            "POST",
            "/v1/grep",
            {"pattern": r"web-1\d", "mode": "regex", "all_conversations": True},
        )
        call("status", "GET", f"{base}/status")
        summary_id = next(m["id"] for m in found["matches"] if str(m["id"]).startswith("sum_"))
        call("describe", "GET", f"/v1/summaries/{summary_id}")
        call("expand", "POST", "/v1/expand", {"summary_ids": [summary_id]})
    return seen


def test_request_path_statements_name_the_tenant(pg_db: Database, recorded: list[str]) -> None:
    seen = _request_path(pg_db, recorded)
    for name, statements in seen.items():
        touching = [s for s in statements if tenant_tables_of(s)]
        assert touching, name
        assert names_a_tenant(touching[0]), f"{name} starts unscoped: {touching[0][:200]}"
    unscoped = {
        signature(s)
        for statements in seen.values()
        for s in statements
        if tenant_tables_of(s) and not names_a_tenant(s)
    }
    assert unscoped == UNSCOPED_BY_AN_ID_ALREADY_SCOPED


def test_request_path_statements_find_their_rows_through_an_index(pg_db: Database) -> None:
    """No statement of a gateway's day reads a whole table (``tests/sql_plans.py``).

    A scan's cost grows with every tenant's rows, not the request's: at a
    billion messages one such statement is a turn's whole budget many times
    over. The compaction pass the day includes is checked too.
    """
    with recording(pg_db.engine) as statements:
        _request_path(pg_db, [])  # its per-request lists are not needed here
    assert len(statements) > 50
    scans = sequential_scans(pg_db.engine, statements)
    assert scans == [], "\n\n".join(scans)
