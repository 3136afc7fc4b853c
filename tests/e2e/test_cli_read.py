"""The read-only commands (messages, summaries, summary show, database-wide status,
config) as an operator runs them: real processes over an imported transcript."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sqlalchemy import select

from lcm.content import IncomingMessage
from lcm.db.engine import Database
from lcm.db.models import ContextItem, Message, Summary, SummaryMessage, SummaryParent
from lcm.ingest.service import ingest_messages, prepare_batch
from tests.conftest import new_tenant, settings_for
from tests.servers import PostgresHandle
from tests.servers import run_lcm as lcm

FIXTURES = Path(__file__).parents[1] / "fixtures" / "transcripts"


def _env(tmp_path: Path) -> dict[str, str]:
    return {
        "LCM_HOME": str(tmp_path / "home"),
        "LCM_DATABASE_URL": f"sqlite:///{tmp_path / 'cli.db'}",
        "LCM_FRESH_TAIL_COUNT": "2",
        "LCM_LEAF_MIN_FANOUT": "3",
        "COLUMNS": "200",
    }


def _json(*args: str, env: dict[str, str]) -> Any:
    done = lcm(*args, "--json", env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_messages_summaries_and_status_of_an_imported_transcript(tmp_path: Path) -> None:
    env = _env(tmp_path)
    assert lcm("db", "upgrade", env=env).returncode == 0
    assert lcm("tenant", "create", "local", env=env).returncode == 0
    imported = lcm("import", str(FIXTURES / "pi_v1.jsonl"), "--compact", env=env)
    assert imported.returncode == 0, imported.stderr

    database = Database(settings_for(env["LCM_DATABASE_URL"]))
    with database.read_session() as session:
        stored = [
            (m.seq, m.role, m.content)
            for m in session.scalars(select(Message).order_by(Message.seq))
        ]
        summaries = {s.id: s for s in session.scalars(select(Summary))}
        in_context = set(session.scalars(select(ContextItem.summary_id))) - {None}
        leaf = next(s for s in summaries.values() if s.kind == "leaf")
        leaf_seqs = sorted(
            session.scalars(
                select(Message.seq)
                .join(SummaryMessage, SummaryMessage.message_id == Message.id)
                .where(SummaryMessage.summary_id == leaf.id)
            )
        )
        condensed_into = list(
            session.scalars(
                select(SummaryParent.summary_id).where(SummaryParent.parent_id == leaf.id)
            )
        )
    database.dispose()
    assert len(stored) == 11
    assert summaries

    everything = _json("messages", "pi_v1", env=env)
    assert [(m["seq"], m["role"], m["content"]) for m in everything["messages"]] == stored
    assert everything["next_cursor"] is None
    assert everything["session_key"] == "pi_v1"

    # Paging with --cursor returns each message exactly once, in order.
    seen: list[int] = []
    cursor: str | None = None
    pages = 0
    while True:
        args = ["messages", "pi_v1", "--limit", "4"] + (["--cursor", cursor] if cursor else [])
        page = _json(*args, env=env)
        seen += [m["seq"] for m in page["messages"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [seq for seq, _, _ in stored]
    assert pages == 3

    tail = _json("messages", "pi_v1", "--tail", "3", env=env)
    assert [m["seq"] for m in tail["messages"]] == [seq for seq, _, _ in stored[-3:]]
    users = _json("messages", "pi_v1", "--role", "user", env=env)
    assert [m["seq"] for m in users["messages"]] == [s for s, r, _ in stored if r == "user"]
    later = _json("messages", "pi_v1", "--since", "2100-01-01T00:00:00", env=env)
    assert later["messages"] == []

    terminal = lcm("messages", "pi_v1", "--limit", "4", env=env)
    assert terminal.returncode == 0, terminal.stderr
    assert "more: lcm messages pi_v1 --cursor " in terminal.stderr
    # Stored text is shown as it is, never read as rich markup.
    assert "[image]" in stored[-2][2]
    shown_tail = lcm("messages", "pi_v1", "--tail", "2", env=env)
    assert " ".join(stored[-2][2].split()) in shown_tail.stdout

    listed = _json("summaries", "pi_v1", env=env)
    assert {
        s["id"]: (s["kind"], s["depth"], s["token_count"], s["in_context"])
        for s in listed["summaries"]
    } == {s.id: (s.kind, s.depth, s.token_count, s.id in in_context) for s in summaries.values()}

    shown = _json("summary", "show", leaf.id, env=env)
    assert (shown["id"], shown["kind"], shown["content"]) == (leaf.id, "leaf", leaf.content)
    assert shown["source_messages"] == {
        "message_count": len(leaf_seqs),
        "first_seq": leaf_seqs[0],
        "last_seq": leaf_seqs[-1],
    }
    assert shown["children"] == condensed_into
    assert shown["session_key"] == "pi_v1"

    overall = _json("status", env=env)
    assert [(t["name"], t["conversations"], t["messages"]) for t in overall["tenants"]] == [
        ("local", 1, 11)
    ]
    assert overall["messages"] == 11
    by_depth: dict[str, int] = {}
    for s in summaries.values():
        by_depth[str(s.depth)] = by_depth.get(str(s.depth), 0) + 1
    assert overall["summaries"] == by_depth
    assert lcm("status", env=env).returncode == 0
    assert _json("status", "pi_v1", env=env)["messages"] == 11  # one conversation still works

    for missing in (
        ("messages", "nope"),
        ("summaries", "nope"),
        ("summary", "show", "sum_0000000000000000"),
        ("messages", "pi_v1", "--tenant", "ghost"),
        ("messages", "pi_v1", "--cursor", "garbage"),
    ):
        done = lcm(*missing, env=env)
        assert done.returncode == 1, (missing, done.stderr)
    assert lcm("messages", "pi_v1", "--role", "robot", env=env).returncode == 2


def test_config_show_get_set_validated_like_the_patch(tmp_path: Path) -> None:
    env = _env(tmp_path)
    assert lcm("db", "upgrade", env=env).returncode == 0
    assert lcm("tenant", "create", "local", env=env).returncode == 0

    shown = _json("config", "show", env=env)
    assert shown["overrides"] == {}
    default = shown["effective"]["max_expand_tokens"]
    assert _json("config", "get", "max_expand_tokens", env=env) == {
        "name": "max_expand_tokens",
        "value": default,
        "overridden": False,
    }

    lowered = _json("config", "set", f"max_expand_tokens={default // 2}", env=env)
    assert lowered["effective"]["max_expand_tokens"] == default // 2
    assert lowered["overrides"] == {"max_expand_tokens": default // 2}

    above = lcm("config", "set", f"max_expand_tokens={default * 2}", env=env)
    assert above.returncode == 1
    assert "lcm tenant settings" in above.stderr
    invalid = lcm("config", "set", "fresh_tail_count=0", env=env)
    assert invalid.returncode == 1
    assert "fresh_tail_count" in invalid.stderr
    unknown = lcm("config", "get", "no_such_setting", env=env)
    assert unknown.returncode == 1
    assert lcm("config", "set", "no_equals_sign", env=env).returncode == 2
    # Nothing the refused changes asked for was stored.
    assert _json("config", "show", env=env)["overrides"] == {"max_expand_tokens": default // 2}

    # The operator's path raises the ceiling; the tenant may then use it.
    assert (
        lcm("tenant", "settings", "local", f"max_expand_tokens={default * 2}", env=env).returncode
        == 0
    )
    assert _json("config", "get", "max_expand_tokens", env=env)["value"] == default * 2
    cleared = _json("config", "set", "fresh_tail_count=null", env=env)
    assert "fresh_tail_count" not in cleared["overrides"]


def test_messages_and_status_on_postgres(pg_db: Database, pg_server: PostgresHandle) -> None:
    tenant_id = new_tenant(pg_db, "pgread").tenant_id
    with pg_db.session() as session:
        batch = prepare_batch(
            [IncomingMessage("user", f"line {i}") for i in range(5)],
            max_batch=100,
            max_chars=10_000,
        )
        ingest_messages(session, tenant_id, "team/pg", None, batch)
        session.commit()
    env = {"LCM_DATABASE_URL": pg_server.url}
    first = _json("messages", "team/pg", "--tenant", "pgread", "--limit", "3", env=env)
    rest = _json(
        "messages", "team/pg", "--tenant", "pgread", "--cursor", first["next_cursor"], env=env
    )
    assert [m["content"] for m in first["messages"] + rest["messages"]] == [
        f"line {i}" for i in range(5)
    ]
    assert rest["next_cursor"] is None
    overall = _json("status", env=env)
    assert ("pgread", 1, 5) in [
        (t["name"], t["conversations"], t["messages"]) for t in overall["tenants"]
    ]


def test_a_first_command_on_a_fresh_home_upgrades_the_embedded_database(tmp_path: Path) -> None:
    env = _env(tmp_path)
    done = lcm("messages", "team/none", env=env)
    # The schema is there (no "no such table"): the only complaint is the missing tenant.
    assert done.returncode == 1
    assert "no tenant named 'local'" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_postgres_schema_behind_the_code_is_refused_with_the_upgrade_command(
    pg_server: PostgresHandle,
) -> None:
    import psycopg

    from tests.servers import with_database

    with psycopg.connect(pg_server.admin_url, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS lcm_cli_unmigrated")
        conn.execute("CREATE DATABASE lcm_cli_unmigrated")
    env = {"LCM_DATABASE_URL": with_database(pg_server.url, "lcm_cli_unmigrated")}
    done = lcm("status", env=env)
    assert done.returncode == 2
    assert "run `lcm db upgrade`" in " ".join(done.stderr.split())  # rich wraps lines
    assert "Traceback" not in done.stderr
