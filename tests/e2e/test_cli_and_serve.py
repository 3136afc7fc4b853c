"""The ``lcm`` command as an operator runs it: real processes, real sockets."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
from sqlalchemy import select

from lcm.db.engine import Database
from lcm.db.models import ApiKey
from lcm.tenants.keys import hash_key
from tests import servers
from tests.conftest import settings_for
from tests.servers import run_lcm as lcm


def test_db_upgrade_and_tenant_create_json(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    env = {"LCM_DATABASE_URL": url}
    assert lcm("db", "upgrade", env=env).returncode == 0
    created = lcm("tenant", "create", "acme", "--json", env=env)
    assert created.returncode == 0, created.stderr
    printed = json.loads(created.stdout)
    assert set(printed) == {"tenant_id", "api_key", "key"}
    assert printed["key"]["scopes"] == ["ingest", "read", "admin"]
    again = lcm("tenant", "create", "acme", "--json", env=env)
    assert again.returncode == 1
    assert "already exists" in again.stderr
    database = Database(settings_for(url))
    with database.session() as s:
        hashes = s.scalars(select(ApiKey.key_hash)).all()
    database.dispose()
    assert hashes == [hash_key(printed["api_key"])]


def test_embedded_serve_accepts_messages_with_the_printed_key(tmp_path: Path) -> None:
    env = {
        "LCM_HOME": str(tmp_path / "home"),
        "LCM_FRESH_TAIL_COUNT": "4",
        "LCM_LEAF_MIN_FANOUT": "4",
        "LCM_LEAF_CHUNK_TOKENS": "300",
    }
    handle = servers.start_serve(env, log=tmp_path / "serve.log")
    try:
        key = handle.printed_key()  # the first start prints the local tenant's key
        base = handle.base_url
        headers = {"Authorization": f"Bearer {key}"}
        r = httpx.post(
            f"{base}/v1/conversations/demo/messages",
            headers=headers,
            json={"messages": [{"role": "user", "content": "hello", "id": "1"}]},
        )
        assert r.status_code == 200, r.text
        assert r.json()["ingested"] == 1
        assert (tmp_path / "home" / "lcm.db").exists()
        # The service loop in one process: after-turn debt, the in-process worker drains it.
        messages = [
            {"role": "user" if i % 2 else "assistant", "content": f"step {i} " * 60}
            for i in range(24)
        ]
        turn = httpx.post(
            f"{base}/v1/conversations/demo/turns",
            headers=headers,
            json={"messages": messages, "token_budget": 1_000},
        )
        assert turn.status_code == 200, turn.text
        assert turn.json()["compaction"] == "scheduled"
        deadline = time.monotonic() + 30
        while True:
            status = httpx.get(f"{base}/v1/conversations/demo/status", headers=headers).json()
            if status["debt"]["status"] == "done":
                break
            assert time.monotonic() < deadline, f"debt not drained: {status}"
            time.sleep(0.2)
        assert status["summaries"]["0"] >= 2
        assert status["context_tokens"] < turn.json()["context_tokens"]
        metrics = httpx.get(f"{base}/metrics").text
        assert 'lcm_compaction_passes_total{escalation="normal",kind="leaf"}' in metrics
        assert 'lcm_compaction_debt{status="pending"} 0.0' in metrics  # the one debt is done
        assert "lcm_compaction_queue_lag_seconds_count" in metrics
    finally:
        handle.stop()


def test_serve_runs_on_uvicorns_c_parser_and_libuv_loop(tmp_path: Path) -> None:
    """httptools and uvloop are dependencies, and uvicorn picks them up by itself.

    They are what keeps an API process's CPU per request down (CHANGELOG.md);
    an install that lost them would still serve, only slower, so this looks at
    what the running server has loaded.
    """
    handle = servers.start_serve({"LCM_HOME": str(tmp_path / "home")}, log=tmp_path / "serve.log")
    try:
        assert httpx.get(f"{handle.base_url}/healthz").status_code == 200
        loaded = Path(f"/proc/{handle.process.pid}/maps").read_text()
    finally:
        handle.stop()
    assert "/httptools/parser/" in loaded
    assert "/uvloop/loop." in loaded
