"""``lcm reindex`` as an operator runs it: a real process over a SQLite file."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import func, select

from lcm.content import IncomingMessage
from lcm.db.engine import Database
from lcm.db.models import Embedding
from lcm.ingest.service import ingest_messages, prepare_batch
from tests.conftest import new_tenant, settings_for
from tests.servers import run_lcm as lcm


def test_reindex_embeds_what_is_waiting_and_refuses_where_semantic_is_off(
    tmp_path: Path,
) -> None:
    env = {"LCM_HOME": str(tmp_path / "home"), "LCM_DATABASE_URL": f"sqlite:///{tmp_path / 'x.db'}"}
    assert lcm("db", "upgrade", env=env).returncode == 0
    database = Database(settings_for(env["LCM_DATABASE_URL"]))
    try:
        tenant = new_tenant(database)
        batch = prepare_batch(
            [IncomingMessage("user", f"note {i} about the deploy", None) for i in range(5)],
            max_batch=10,
            max_chars=10**6,
        )
        with database.transaction() as session:
            ingest_messages(session, tenant.tenant_id, "agent:main", None, batch)
        off = lcm("reindex", env=env)
        assert off.returncode == 1
        assert "LCM_SEMANTIC=on" in off.stdout + off.stderr
        done = lcm("reindex", env={**env, "LCM_SEMANTIC": "on"})
        assert done.returncode == 0, done.stderr
        assert "embedded 5 texts" in done.stdout
        with database.read_session() as session:
            assert session.scalar(select(func.count()).select_from(Embedding)) == 5
        again = lcm("reindex", env={**env, "LCM_SEMANTIC": "on"})
        assert "embedded 0 texts" in again.stdout
    finally:
        database.dispose()
