"""``lcm doctor-clean`` end to end on an embedded database: list, --json, --apply, exit codes."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from sqlalchemy import func, select, update

from lcm.content import IncomingMessage
from lcm.db.engine import Database
from lcm.db.models import Conversation, Message, Tenant, utcnow
from lcm.ingest.service import ingest_messages, prepare_batch
from tests.conftest import settings_for
from tests.servers import embedded_home
from tests.servers import run_lcm as lcm

JUNK = ["agent:main:cron:nightly", "agent:main:subagent:x\u200b", "agent:ops:heartbeat"]
KEPT = ["agent:main:main", "team/one"]


def census(database: Database) -> dict[str, int]:
    """Messages per session key."""
    with database.read_session() as session:
        rows = session.execute(
            select(Conversation.session_key, func.count(Message.id))
            .join(Message, Message.conversation_id == Conversation.id)
            .group_by(Conversation.session_key)
        )
        return {key: count for key, count in rows}


def test_lists_read_only_then_apply_erases_the_listed(tmp_path: Path) -> None:
    url, _key = embedded_home(tmp_path / "home", "acme")
    env = {"LCM_DATABASE_URL": url, "LCM_FILES_DIR": str(tmp_path / "files")}
    database = Database(settings_for(url))
    with database.transaction() as session:
        tenant_id = session.scalars(select(Tenant.id)).one()
        for n, key in enumerate(JUNK + KEPT, start=1):
            batch = prepare_batch(
                [IncomingMessage("user", f"{key} {i}") for i in range(n)],
                max_batch=100,
                max_chars=10_000,
            )
            ingest_messages(session, tenant_id, key, "s1", batch)
        # Everything but the cron conversation idle for ten days.
        session.execute(
            update(Conversation)
            .where(Conversation.session_key != JUNK[0])
            .values(updated_at=utcnow() - timedelta(days=10))
        )
    before = census(database)

    listed = lcm("doctor-clean", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert sorted(r["session_key"] for r in rows) == sorted(
        ["agent:main:cron:nightly", "agent:main:subagent:x\\u200b", "agent:ops:heartbeat"]
    )
    subagent = next(r for r in rows if r["session_key"].startswith("agent:main:subagent"))
    assert subagent["tenant"] == "acme"
    assert subagent["messages"] == 2
    assert subagent["reasons"] == ["key matches agent:*:subagent:**"]
    assert "status" not in subagent
    table = lcm("doctor-clean", "--tenant", "acme", env={**env, "COLUMNS": "200"})
    assert table.returncode == 0, table.stderr
    assert "agent:ops:heartbeat" in table.stdout
    assert "team/one" not in table.stdout
    assert "3 junk conversation(s) found (read-only" in table.stderr
    assert census(database) == before  # listing twice changed nothing

    assert lcm("doctor-clean", "--apply", "--archive", env=env).returncode == 2
    assert lcm("doctor-clean", "--inactive-days", "x", env=env).returncode == 2
    assert lcm("doctor-clean", "--tenant", "nobody", env=env).returncode == 1
    assert census(database) == before

    applied = lcm("doctor-clean", "--inactive-days", "5", "--apply", "--json", env=env)
    assert applied.returncode == 0, applied.stderr
    done = json.loads(applied.stdout)
    assert {r["status"] for r in done} == {"erased"}
    assert len(done) == 2  # the cron conversation is not idle
    assert census(database) == {k: v for k, v in before.items() if k not in JUNK[1:]}

    everything = lcm("doctor-clean", "--pattern", "**", "--inactive-days", "5", "--json", env=env)
    assert {r["session_key"] for r in json.loads(everything.stdout)} == set(KEPT)
    database.dispose()
