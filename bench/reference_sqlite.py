"""The embedded mode's reference: the least a durable ingest on SQLite can do.

``bench/reference_app.py`` on SQLite instead of Postgres: a minimal FastAPI
app answering the three calls of a gateway turn at lcm-server's paths with
its bodies. ``…/messages`` and ``…/turns`` insert one row per message and
one per content block in one transaction (``BEGIN IMMEDIATE`` … ``COMMIT``),
``…/assemble`` reads the conversation's newest messages back. The database
runs as ``lcm serve`` runs its own: WAL, ``synchronous=NORMAL`` (a commit
survives the process, not a power cut), foreign keys on.

One connection, used on the event loop itself: SQLite takes one writer at a
time anyway, and a thread-pool hand-off per call is work this reference
leaves out. Run with ``uvicorn bench.reference_sqlite:app``;
``REFERENCE_SQLITE_PATH`` names the database file (created on start).
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request

SCHEMA = """
CREATE TABLE IF NOT EXISTS ref_messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant TEXT NOT NULL,
    conversation TEXT NOT NULL,
    seq INTEGER NOT NULL,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    client_id TEXT,
    UNIQUE (tenant, conversation, seq)
);
CREATE TABLE IF NOT EXISTS ref_parts (
    message_id INTEGER NOT NULL REFERENCES ref_messages (id),
    ordinal INTEGER NOT NULL,
    text TEXT NOT NULL,
    PRIMARY KEY (message_id, ordinal)
);
"""
INSERT_MESSAGE = """
INSERT INTO ref_messages (tenant, conversation, seq, role, content, client_id)
SELECT ?, ?, coalesce(max(seq), 0) + 1, ?, ?, ?
FROM ref_messages WHERE tenant = ? AND conversation = ?
RETURNING id
"""
INSERT_PART = "INSERT INTO ref_parts (message_id, ordinal, text) VALUES (?, ?, ?)"
NEWEST = """
SELECT role, content FROM ref_messages WHERE tenant = ? AND conversation = ?
ORDER BY seq DESC LIMIT 200
"""

_db: dict[str, sqlite3.Connection] = {}


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    conn = sqlite3.connect(os.environ["REFERENCE_SQLITE_PATH"], isolation_level=None)
    for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "foreign_keys=ON"):
        conn.execute(f"PRAGMA {pragma}")
    conn.execute("PRAGMA busy_timeout=5000")
    conn.executescript(SCHEMA)
    _db["conn"] = conn
    yield
    conn.close()


app = FastAPI(lifespan=_lifespan)


def _tenant(request: Request) -> str:
    return request.headers.get("authorization", "")[-16:]


def _store(tenant: str, key: str, messages: list[dict[str, Any]]) -> int:
    conn = _db["conn"]
    conn.execute("BEGIN IMMEDIATE")
    try:
        for message in messages:
            content = message["content"]
            blocks = content if isinstance(content, list) else [{"text": content}]
            text = content if isinstance(content, str) else json.dumps(content)
            (message_id,) = conn.execute(
                INSERT_MESSAGE,
                (tenant, key, message["role"], text, message.get("id"), tenant, key),
            ).fetchone()
            conn.executemany(
                INSERT_PART,
                [
                    (message_id, n, str(block.get("text", "")) if isinstance(block, dict) else "")
                    for n, block in enumerate(blocks)
                ],
            )
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return len(messages)


@app.post("/v1/conversations/{key}/messages")
async def messages(key: str, request: Request) -> dict[str, int]:
    body = await request.json()
    return {"ingested": _store(_tenant(request), key, body["messages"])}


@app.post("/v1/conversations/{key}/turns")
async def turns(key: str, request: Request) -> dict[str, int]:
    body = await request.json()
    return {"ingested": _store(_tenant(request), key, body["messages"])}


@app.post("/v1/conversations/{key}/assemble")
async def assemble(key: str, request: Request) -> dict[str, Any]:
    rows = _db["conn"].execute(NEWEST, (_tenant(request), key)).fetchall()
    return {"messages": [{"role": r, "content": c} for r, c in reversed(rows)]}
