"""Operator commands run as processes: tenants and keys, failed compaction debt."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from sqlalchemy import func, select, update

from cli.common import tenant_id_for
from lcm.address import SessionAddress
from lcm.content import IncomingMessage
from lcm.db.engine import Database
from lcm.db.models import ApiKey, CompactionDebt, Summary
from lcm.errors import Unauthenticated
from lcm.files.storage import build_storage
from lcm.ingest.service import prepare_batch
from lcm.ingest.turns import after_turn
from lcm.tenants.keys import authenticate
from tests import servers
from tests.conftest import new_tenant, settings_for
from tests.servers import embedded_home
from tests.servers import run_lcm as lcm


def test_key_create_list_revoke_and_tenant_list(tmp_path: Path) -> None:
    url, first_key = embedded_home(tmp_path / "home", "acme")
    env = {"LCM_DATABASE_URL": url}
    made = lcm(
        "key", "create", "acme", "--name", "agent-tools", "--scope", "read", "--json", env=env
    )
    assert made.returncode == 0, made.stderr
    printed = json.loads(made.stdout)
    raw, key_id = printed["api_key"], printed["key"]["id"]
    assert printed["key"]["scopes"] == ["read"]
    assert printed["key"]["name"] == "agent-tools"

    listed = lcm("key", "list", "acme", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    keys = json.loads(listed.stdout)
    assert [(k["name"], k["scopes"], k["revoked_at"]) for k in keys] == [
        ("default", ["ingest", "read", "admin"], None),
        ("agent-tools", ["read"], None),
    ]
    database = Database(settings_for(url))
    try:
        with database.read_session() as s:
            hashes = list(s.scalars(select(ApiKey.key_hash)))
            assert authenticate(s, raw).scopes == {"read"}
        table = lcm("key", "list", "acme", env=env)
        for secret in [raw, first_key, *hashes]:
            assert secret not in listed.stdout
            assert secret not in table.stdout
        assert raw[:12] in table.stdout  # the prefix is how an operator tells keys apart

        tenants = lcm("tenant", "list", "--json", env=env)
        assert tenants.returncode == 0, tenants.stderr
        assert [(t["name"], t["active_keys"]) for t in json.loads(tenants.stdout)] == [("acme", 2)]

        revoked = lcm("key", "revoke", "acme", str(key_id), env=env)
        assert revoked.returncode == 0, revoked.stderr
        with database.read_session() as s, pytest.raises(Unauthenticated):
            authenticate(s, raw)
        after = json.loads(lcm("key", "list", "acme", "--json", env=env).stdout)
        assert after[1]["revoked_at"] is not None
        assert after[0]["revoked_at"] is None
        tenants = json.loads(lcm("tenant", "list", "--json", env=env).stdout)
        assert tenants[0]["active_keys"] == 1
    finally:
        database.dispose()
    # Refusals: an unknown scope, a key of no such tenant.
    bad = lcm("key", "create", "acme", "--scope", "write", env=env)
    assert bad.returncode == 1
    assert "unknown scopes: write" in bad.stderr
    assert lcm("key", "revoke", "nobody", str(key_id), env=env).returncode == 1


def _failed_debt(database: Database, tenant_id: str, key: str) -> int:
    """A conversation over its threshold whose debt ran out of attempts."""
    messages = [
        IncomingMessage("user" if i % 2 == 0 else "assistant", f"step {i} " * 40, f"m{i}", None)
        for i in range(100)
    ]
    batch = prepare_batch(messages, max_batch=1000, max_chars=100_000)
    with database.transaction() as session:  # no sender: nobody is woken
        turn = after_turn(
            session,
            SessionAddress(tenant_id, key),
            batch,
            2_000,
            database.settings,
            build_storage(database.settings),
        )
    assert turn.ingest is not None
    conversation_id = turn.ingest.conversation_id
    with database.transaction() as session:
        session.execute(
            update(CompactionDebt)
            .where(CompactionDebt.conversation_id == conversation_id)
            .values(status="failed", attempts=5, last_error="summarizer down")
        )
    return conversation_id


@pytest.mark.celery
def test_debt_list_and_retry_gets_failed_debt_compacted(
    pg_db: Database, celery_worker: object, worker_env: dict[str, str]
) -> None:
    tenant = new_tenant(pg_db)
    failed = _failed_debt(pg_db, tenant.tenant_id, "stuck")
    also_failed = _failed_debt(pg_db, tenant.tenant_id, "stuck-too")

    listed = lcm("debt", "list", "--status", "failed", "--json", env=worker_env)
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert sorted(r["conversation_id"] for r in rows) == [failed, also_failed]
    assert {(r["tenant_name"], r["attempts"], r["last_error"]) for r in rows} == {
        ("acme", 5, "summarizer down")
    }
    pending = lcm("debt", "list", "--status", "pending", "--json", env=worker_env)
    assert json.loads(pending.stdout) == []

    retried = lcm("debt", "retry", str(failed), env=worker_env)
    assert retried.returncode == 0, retried.stderr
    _wait_for(pg_db, failed, "done")
    with pg_db.read_session() as s:
        summaries = s.scalar(
            select(func.count()).select_from(Summary).where(Summary.conversation_id == failed)
        )
        untouched = s.get(CompactionDebt, also_failed)
        assert untouched is not None
        assert untouched.status == "failed"
    assert summaries
    assert summaries >= 1

    everything = lcm("debt", "retry", "--all-failed", env=worker_env)
    assert everything.returncode == 0, everything.stderr
    assert f"re-armed 1 debt row(s): {also_failed}" in everything.stdout
    _wait_for(pg_db, also_failed, "done")
    # Nothing failed is left: a retry of a settled conversation says so and exits 1.
    again = lcm("debt", "retry", str(failed), env=worker_env)
    assert again.returncode == 1
    assert "not failed" in again.stderr


def _wait_for(database: Database, conversation_id: int, status: str) -> None:
    deadline = time.monotonic() + 60
    while True:
        with database.read_session() as s:
            debt = s.get(CompactionDebt, conversation_id)
            assert debt is not None
            if debt.status == status:
                return
        assert time.monotonic() < deadline, f"debt still {debt.status}: {debt.last_error}"
        time.sleep(0.2)


def test_debt_retry_against_embedded_serve_is_woken_by_its_reconciler(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {"LCM_HOME": str(home), "LCM_RECONCILE_INTERVAL_SECONDS": "1"}
    handle = servers.start_serve(env, log=tmp_path / "serve.log")
    url = f"sqlite:///{home / 'lcm.db'}"
    database = Database(settings_for(url))
    try:
        handle.printed_key()  # the first start created tenant "local"
        with database.read_session() as s:
            tenant_id = tenant_id_for(s, "local")
        failed = _failed_debt(database, tenant_id, "stuck")
        time.sleep(2)  # reconciler runs pass: failed debt is nobody's work
        with database.read_session() as s:
            debt = s.get(CompactionDebt, failed)
            assert debt is not None
            assert debt.status == "failed"
        retried = lcm("debt", "retry", "--all-failed", env={**env, "LCM_DATABASE_URL": url})
        assert retried.returncode == 0, retried.stderr
        assert "reconciler" in retried.stdout
        _wait_for(database, failed, "done")
    finally:
        database.dispose()
        handle.stop()
