"""The reference a gateway load is compared with: the least a durable ingest can do.

A minimal FastAPI app on psycopg: the three calls of a gateway turn, at the
same paths and with the same bodies as lcm-server's, each one transaction
committed with Postgres's durable defaults. ``…/messages`` and ``…/turns``
insert one row per message and one per content block (the rows lcm-server
stores as the history itself, without its context, indexes and debt);
``…/assemble`` reads the conversation's newest messages back. Run with
``uvicorn bench.reference_app:app``; ``REFERENCE_DATABASE_URL`` names the
database (the tables are created on start).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from fastapi import FastAPI, Request

POOL_SIZE = 10
SCHEMA = """
CREATE TABLE IF NOT EXISTS ref_messages (
    id bigserial PRIMARY KEY,
    tenant text NOT NULL,
    conversation text NOT NULL,
    seq bigint NOT NULL,
    role text NOT NULL,
    content text NOT NULL,
    client_id text,
    UNIQUE (tenant, conversation, seq)
);
CREATE TABLE IF NOT EXISTS ref_parts (
    message_id bigint NOT NULL REFERENCES ref_messages (id),
    ordinal int NOT NULL,
    text text NOT NULL,
    PRIMARY KEY (message_id, ordinal)
);
"""
INSERT_MESSAGE = """
INSERT INTO ref_messages (tenant, conversation, seq, role, content, client_id)
SELECT %s, %s, coalesce(max(seq), 0) + 1, %s, %s, %s
FROM ref_messages WHERE tenant = %s AND conversation = %s
RETURNING id
"""
NEWEST = """
SELECT role, content FROM ref_messages WHERE tenant = %s AND conversation = %s
ORDER BY seq DESC LIMIT 200
"""

# One connection per in-flight request, taken from and given back to this queue.
_pool: asyncio.Queue[psycopg.AsyncConnection[Any]] = asyncio.Queue()


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    url = os.environ["REFERENCE_DATABASE_URL"]
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as setup:
        # Several server processes start at once: one creates the tables.
        await setup.execute("SELECT pg_advisory_lock(4242)")
        await setup.execute(SCHEMA)
        await setup.execute("SELECT pg_advisory_unlock(4242)")
    for _ in range(POOL_SIZE):
        await _pool.put(await psycopg.AsyncConnection.connect(url))
    yield
    while not _pool.empty():
        await (await _pool.get()).close()


app = FastAPI(lifespan=_lifespan)


def _tenant(request: Request) -> str:
    return request.headers.get("authorization", "")[-16:]


async def _store(tenant: str, key: str, messages: list[dict[str, Any]]) -> int:
    conn = await _pool.get()
    try:
        # The per-conversation lock keeps seq gap-free under concurrent calls,
        # as lcm-server's conversation row lock does.
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (tenant + key,))
            for message in messages:
                content = message["content"]
                blocks = content if isinstance(content, list) else [{"text": content}]
                text = content if isinstance(content, str) else json.dumps(content)
                cursor = await conn.execute(
                    INSERT_MESSAGE,
                    (tenant, key, message["role"], text, message.get("id"), tenant, key),
                )
                row = await cursor.fetchone()
                assert row is not None
                async with conn.cursor() as parts:
                    await parts.executemany(
                        "INSERT INTO ref_parts (message_id, ordinal, text) VALUES (%s, %s, %s)",
                        [
                            (
                                row[0],
                                n,
                                str(block.get("text", "")) if isinstance(block, dict) else "",
                            )
                            for n, block in enumerate(blocks)
                        ],
                    )
    finally:
        await _pool.put(conn)
    return len(messages)


@app.post("/v1/conversations/{key}/messages")
async def messages(key: str, request: Request) -> dict[str, int]:
    body = await request.json()
    return {"ingested": await _store(_tenant(request), key, body["messages"])}


@app.post("/v1/conversations/{key}/turns")
async def turns(key: str, request: Request) -> dict[str, int]:
    body = await request.json()
    return {"ingested": await _store(_tenant(request), key, body["messages"])}


@app.post("/v1/conversations/{key}/assemble")
async def assemble(key: str, request: Request) -> dict[str, Any]:
    conn = await _pool.get()
    try:
        cursor = await conn.execute(NEWEST, (_tenant(request), key))
        rows = await cursor.fetchall()
        await conn.rollback()
    finally:
        await _pool.put(conn)
    return {"messages": [{"role": r, "content": c} for r, c in reversed(rows)]}
