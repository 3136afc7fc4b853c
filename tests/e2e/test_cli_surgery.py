"""``lcm summary rewrite|dissolve|operation`` as an operator runs them: real processes,
the embedded SQLite database, the fake Messages API as the LLM."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lcm.db.engine import Database
from lcm.tenants.service import IssuedKey
from tests.fakes import FakeAnthropicServer
from tests.fakes.anthropic_script import Behaviour
from tests.helpers import compact
from tests.integration.test_compaction_engine import assert_lossless, fill
from tests.integration.test_summary_surgery import (
    SETTINGS,
    any_leaf,
    assert_tokens_consistent,
    get,
    get_sources,
    in_context,
    items,
)
from tests.servers import run_lcm as lcm


@pytest.fixture
def llm() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as server:
        yield server


def env_for(db: Database, llm: FakeAnthropicServer, tmp_path: Path) -> dict[str, str]:
    return {
        "LCM_HOME": str(tmp_path / "home"),
        "LCM_DATABASE_URL": db.settings.database_url,
        "ANTHROPIC_API_KEY": "sk-test",
        "LCM_ANTHROPIC_BASE_URL": llm.base_url,
        "LCM_LLM_MAX_RETRIES": "0",
        "LCM_SUMMARY_MODEL": "claude-test",
    }


def run(*args: str, env: dict[str, str], code: int = 0) -> Any:
    tenant = () if args[0] == "operation" else ("--tenant", "acme")  # operation ids are unique
    done = lcm("summary", *args, *tenant, "--json", env=env)
    assert done.returncode == code, done.stdout + done.stderr
    return json.loads(done.stdout) if done.stdout.strip() else None


def test_rewrite_and_dissolve_from_the_command_line(
    sqlite_db: Database, llm: FakeAnthropicServer, tmp_path: Path
) -> None:
    from tests.conftest import new_tenant

    tenant: IssuedKey = new_tenant(sqlite_db)
    cid = fill(sqlite_db, tenant.tenant_id, 160)
    compact(sqlite_db, tenant.tenant_id, cid, SETTINGS, 3_000)
    env = env_for(sqlite_db, llm, tmp_path)
    target = in_context(sqlite_db, cid, "condensed")[0]

    llm.set_default(Behaviour.reply("Rewritten from the CLI: the zanzibar cutover.\n"))
    op = run("rewrite", target.id, "--inline", "--instructions", "Say zanzibar.", env=env)
    assert (op["status"], op["action"], op["targets"], op["done"]) == (
        "done",
        "rewrite",
        [target.id],
        1,
    )
    assert "zanzibar" in get(sqlite_db, target.id).content
    assert any("Say zanzibar." in str(r.system) for r in llm.requests)
    shown = run("operation", op["operation_id"], env=env)
    assert shown["status"] == "done"

    # Without --inline nothing runs here: embedded, lcm serve's reconciler would.
    queued = run("dissolve", target.id, env=env)
    assert queued["status"] == "pending"
    sources = get_sources(sqlite_db, target.id)
    # --inline runs the conversation's chain: the queued dissolve, then this one (refused
    # when it runs: the first took the summary out of the context).
    failed = run("dissolve", target.id, "--inline", env=env, code=1)
    assert failed["status"] == "failed"
    assert "not in the current context" in failed["error"]
    assert run("operation", queued["operation_id"], env=env)["status"] == "done"
    shown_ids = [i.summary_id for i in items(sqlite_db, cid) if i.summary_id]
    assert target.id not in shown_ids
    assert all(s in shown_ids for s in sources)
    assert_lossless(sqlite_db, cid)
    assert_tokens_consistent(sqlite_db, cid)

    # Refusals exit 1 with the reason; usage errors exit 2.
    leaf = lcm("summary", "dissolve", any_leaf(sqlite_db, cid).id, "--tenant", "acme", env=env)
    assert leaf.returncode == 1
    assert "is a leaf" in leaf.stderr
    missing = lcm("summary", "rewrite", "sum_0000000000000000", "--tenant", "acme", env=env)
    assert missing.returncode == 1
    assert "not found" in missing.stderr
    too_long = lcm("summary", "rewrite", target.id, "--instructions", "x" * 4001, env=env)
    assert too_long.returncode == 2
    pending = lcm("summary", "operation", queued["operation_id"], "--wait", "0.1", env=env)
    assert pending.returncode == 0  # done: nothing to wait for
