"""``LCM_LOG_FORMAT=json`` on ``lcm serve``: a request's lines and a compaction pass's, parsed.

The lines a request causes carry its request id (the caller's, echoed back)
and its tenant; each compaction pass is one event naming why it ran, the
range, the tokens before and after, the model, the escalation level and the
time it took, tagged with the worker task that ran it. No line holds
message text or the key.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import httpx

from tests import servers

SECRET_TEXT = "zebra-quartz-7731"
SETTINGS = {
    "fresh_tail_count": 4,
    "leaf_min_fanout": 4,
    "leaf_chunk_tokens": 256,
    "leaf_target_tokens": 64,
}


def json_lines(log: Path) -> tuple[list[dict[str, Any]], list[str]]:
    parsed, other = [], []
    for line in log.read_text().splitlines():
        try:
            parsed.append(json.loads(line))
        except ValueError:
            other.append(line)
    return parsed, other


def test_json_lines_of_a_request_and_a_pass(tmp_path: Path) -> None:
    home, log = tmp_path / "home", tmp_path / "serve.log"
    _, key = servers.embedded_home(home, "acme")
    env = {
        "LCM_HOME": str(home),
        "ANTHROPIC_API_KEY": "",
        "LCM_LOG_FORMAT": "json",
        "LCM_LOG_LEVEL": "INFO",
    }
    serve = servers.start_serve(env, log=log)
    try:
        headers = {"Authorization": f"Bearer {key}"}
        with httpx.Client(base_url=serve.base_url, headers=headers, timeout=60) as http:
            assert http.patch("/v1/tenant/settings", json=SETTINGS).status_code == 200
            texts = [f"{SECRET_TEXT} step {i} of the rollout went fine" for i in range(30)]
            sent = http.post(
                "/v1/conversations/logged/messages",
                json={"messages": [{"role": "user", "content": t} for t in texts]},
                headers={"X-Request-ID": "req-ingest-1"},
            )
            assert sent.status_code == 200, sent.text
            assert sent.headers["x-request-id"] == "req-ingest-1"
            conversation_id = sent.json()["conversation_id"]
            done = http.post(
                "/v1/conversations/logged/compact",
                json={"wait": True, "token_budget": 2000, "target_tokens": 300},
            )
            assert done.json()["status"] == "done", done.text
            generated = http.get("/v1/conversations/logged/status")
            assert re.fullmatch(r"[0-9a-f]{32}", generated.headers["x-request-id"])
            ignored = http.get("/healthz", headers={"X-Request-ID": "bad id with spaces"})
            assert ignored.headers["x-request-id"] != "bad id with spaces"
        time.sleep(0.5)  # the last lines reach the file
    finally:
        serve.stop()

    lines, other = json_lines(log)
    assert lines, other
    assert all({"time", "level", "logger", "message"} <= set(line) for line in lines)
    mine = [line for line in lines if line.get("request_id") == "req-ingest-1"]
    assert mine, "no line carries the caller's request id"
    assert {line.get("tenant_id") for line in mine} == {_tenant_id(home)}

    passes = [line for line in lines if line.get("event") == "compaction_pass"]
    assert passes, "no compaction pass event"
    for event in passes:
        assert event["conversation_id"] == conversation_id
        assert event["tenant_id"] == _tenant_id(home)
        assert event["kind"] in ("leaf", "condensed")
        assert event["tokens_after"] < event["tokens_before"]
        assert event["first_ordinal"] <= event["last_ordinal"]
        assert {"reason", "model", "escalation", "duration_ms", "token_budget"} <= set(event)
        assert event.get("task_id"), "the pass ran in a worker task: its id is on the line"

    text = log.read_text()
    assert SECRET_TEXT not in text
    assert key not in text
    # Whatever is not JSON is not a log line (nothing but what the CLI prints).
    assert not [line for line in other if '"level"' in line or " INFO " in line], other


def _tenant_id(home: Path) -> str:
    import sqlite3

    with sqlite3.connect(home / "lcm.db") as db:
        return str(db.execute("SELECT id FROM tenants").fetchone()[0])
