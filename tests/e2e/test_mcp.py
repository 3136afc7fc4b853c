"""``lcm mcp`` over stdio, driven by the official MCP SDK client against a live API."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import uvicorn
from mcp import Client, StdioServerParameters
from sqlalchemy import select

from lcm.db.engine import Database
from lcm.db.models import Message, Summary
from tests import servers
from tests.conftest import new_tenant
from tests.integration.retrieval_data import compact, ingest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def live_api(celery_worker: Any, pg_db: Database) -> Iterator[str]:
    """The HTTP API on a real socket (Postgres, the real worker for expand-query)."""
    from api.app import create_app
    from workers.link import CeleryLink

    app = create_app(pg_db.settings, link=CeleryLink(), database=pg_db, broker_ping=lambda: True)
    port = servers.free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "API did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)


@pytest.mark.celery
def test_mcp_tools_listed_and_called_over_stdio(live_api: str, pg_db: Database) -> None:
    tenant = new_tenant(pg_db)
    texts = [f"step {i}: rotated the TLS certificate for host web-{i}" for i in range(30)]
    cid = ingest(pg_db, tenant.tenant_id, "agent:main", texts)
    compact(pg_db, tenant.tenant_id, cid)
    ingest(pg_db, new_tenant(pg_db, "other").tenant_id, "agent:main", ["TLS for someone else"])
    with pg_db.session() as s:
        summary_id = str(s.scalar(select(Summary.id).where(Summary.conversation_id == cid)))
        fourth = select(Message.id).where(Message.conversation_id == cid, Message.seq == 4)
        step_3 = f"msg_{s.scalar(fourth)}"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "cli.main", "mcp"],
        cwd=str(ROOT),
        env={
            "LCM_MCP_API_URL": live_api,
            "LCM_MCP_API_KEY": tenant.api_key,
            "LCM_MCP_SESSION_KEY": "agent:main",
            "LCM_DATABASE_URL": pg_db.settings.database_url,
        },
    )
    seen: dict[str, Any] = {}

    async def scenario() -> None:
        async with Client(params, read_timeout_seconds=60) as client:
            listed = await client.list_tools()
            seen["tools"] = {tool.name: tool.description or "" for tool in listed.tools}
            grep = await client.call_tool(
                "lcm_grep", {"pattern": "web-2\\d", "scope": "messages", "limit": 5}
            )
            seen["grep"] = grep.structured_content
            in_file = await client.call_tool(
                "lcm_grep", {"pattern": "web", "file_ids": ["file_0123456789abcdef"]}
            )
            seen["in_file"] = in_file.structured_content
            described = await client.call_tool("lcm_describe", {"id": summary_id})
            seen["describe"] = described.structured_content
            missing = await client.call_tool("lcm_describe", {"id": "sum_0000000000000000"})
            seen["missing"] = (missing.is_error, missing.content[0].text)  # type: ignore[union-attr]
            answer = await client.call_tool(
                "lcm_expand_query", {"prompt": "Which host was step 3?", "query": "web-3"}
            )
            seen["answer"] = answer.structured_content

    anyio.run(scenario)
    assert set(seen["tools"]) == {"lcm_grep", "lcm_describe", "lcm_expand_query"}
    assert "regex" in seen["tools"]["lcm_grep"]
    assert "ORIGINAL" in seen["tools"]["lcm_expand_query"]
    assert [m["seq"] for m in seen["grep"]["matches"]] == [30, 29, 28, 27, 26]
    # file_ids reach the server as a files search: the unknown file is named, nothing found.
    assert seen["in_file"]["matches"] == []
    assert seen["in_file"]["notes"] == ["not in this scope: file_0123456789abcdef"]
    assert seen["describe"]["id"] == summary_id
    assert seen["missing"][0]
    assert "not_found" in seen["missing"][1]
    cited = seen["answer"]["cited_ids"]
    assert seen["answer"]["offline"] is True
    assert step_3 in cited
    assert all(ref == step_3 or ref.startswith("sum_") for ref in cited)
    assert "someone else" not in seen["answer"]["answer"]


@pytest.mark.celery
def test_mcp_tools_over_streamable_http(live_api: str, pg_db: Database) -> None:
    import os
    import subprocess

    tenant = new_tenant(pg_db)
    ingest(pg_db, tenant.tenant_id, "agent:main", [f"deploy {i} of api-{i}" for i in range(12)])
    port = servers.free_port()
    env = {
        **os.environ,
        "LCM_MCP_API_URL": live_api,
        "LCM_MCP_API_KEY": tenant.api_key,
        "LCM_MCP_SESSION_KEY": "agent:main",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "mcp", "--transport", "http", "--port", str(port)],
        cwd=str(ROOT),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    seen: dict[str, Any] = {}

    async def scenario() -> None:
        async with Client(f"http://127.0.0.1:{port}/mcp", read_timeout_seconds=30) as client:
            listed = await client.list_tools()
            seen["tools"] = {tool.name for tool in listed.tools}
            grep = await client.call_tool("lcm_grep", {"pattern": "api-1[01]", "limit": 5})
            seen["grep"] = grep.structured_content

    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                anyio.run(scenario)
                break
            except Exception:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.3)  # the server is still starting
    finally:
        proc.terminate()
        proc.wait(10)
    assert seen["tools"] == {"lcm_grep", "lcm_describe", "lcm_expand_query"}
    assert [m["seq"] for m in seen["grep"]["matches"]] == [12, 11]
