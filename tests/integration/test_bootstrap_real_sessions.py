"""Real public sessions under ../shared/data (skipped only when that directory is absent).

The expected figures come from an independent pass over the JSON lines here,
not from the parsers: messages that take part in the model's context, and
tool calls that have a result.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from lcm.db.engine import Database
from lcm.db.models import Message, MessagePart
from lcm.tenants.service import IssuedKey
from lcm.transcripts.importer import import_transcript
from lcm.transcripts.service import BootstrapOptions, bootstrap_transcript

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
SESSIONS = sorted(DATA.rglob("*.jsonl")) if DATA.is_dir() else []

pytestmark = pytest.mark.skipif(not DATA.is_dir(), reason=f"{DATA} is absent")


def expected_pi(rows: list[dict[str, Any]]) -> tuple[int, int]:
    header = rows[0] if rows and rows[0].get("type") == "session" else {}
    entries = [r for r in rows if r.get("type") != "session"]
    if header.get("version", 1) >= 2:  # the active branch: from the last entry to the root
        by_id = {e["id"]: e for e in entries}
        branch: list[dict[str, Any]] = []
        node: dict[str, Any] | None = entries[-1]
        while node is not None:
            branch.append(node)
            node = by_id.get(node.get("parentId"))
        entries = branch[::-1]
    count, calls, results = 0, set(), set()
    for e in entries:
        if e["type"] in ("custom_message", "branch_summary"):
            count += 1
        if e["type"] != "message":
            continue
        m = e["message"]
        role = m["role"]
        if role == "bashExecution" and m.get("excludeFromContext"):
            continue
        if role in ("user", "assistant", "toolResult", "bashExecution", "custom", "hookMessage"):
            count += 1
        if role == "assistant":
            calls |= {b["id"] for b in m["content"] if b.get("type") == "toolCall"}
        if role == "toolResult":
            results.add(m["toolCallId"])
    return count, len(calls & results)


def expected_claude(rows: list[dict[str, Any]]) -> tuple[int, int]:
    lines = [r for r in rows if r.get("type") in ("user", "assistant") and "message" in r]
    subagent_only = all(r.get("isSidechain") for r in lines)
    kept = [
        r
        for r in lines
        if (subagent_only or not r.get("isSidechain")) and not r.get("isCompactSummary")
    ]
    calls, results = set(), set()
    for r in kept:
        content = r["message"]["content"]
        for block in content if isinstance(content, list) else []:
            if block.get("type") == "tool_use":
                calls.add(block["id"])
            if block.get("type") == "tool_result":
                results.add(block["tool_use_id"])
    return len(kept), len(calls & results)


def expected(path: Path) -> tuple[int, int]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    pi = any(r.get("type") in ("session", "message") for r in rows[:5])
    return expected_pi(rows) if pi else expected_claude(rows)


def stored(db: Database, conversation_id: int) -> tuple[int, int]:
    with db.session() as s:
        messages = s.scalar(
            select(func.count())
            .select_from(Message)
            .where(Message.conversation_id == conversation_id)
        )

        def ids(kind: str) -> set[str]:
            return set(
                s.scalars(
                    select(MessagePart.tool_call_id)
                    .join(Message, Message.id == MessagePart.message_id)
                    .where(
                        Message.conversation_id == conversation_id, MessagePart.part_type == kind
                    )
                )
            )

        return int(messages or 0), len(ids("tool_use") & ids("tool_result"))


@pytest.mark.parametrize("path", SESSIONS, ids=[p.name for p in SESSIONS])
def test_real_session_counts(db: Database, tenant: IssuedKey, path: Path) -> None:
    data = path.read_bytes()
    outcome = import_transcript(
        db.transaction, tenant.tenant_id, path.stem, data, BootstrapOptions()
    )
    assert stored(db, outcome.conversation_id) == expected(path)
    assert outcome.imported == expected(path)[0]
    # The whole file again: nothing new.
    again = bootstrap_transcript(
        db.transaction, tenant.tenant_id, path.stem, outcome.session_id, data
    )
    assert again.imported == 0
