"""The data commands (conversation list, export, erase, import; tenant erase) end to end."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import func, select

from lcm.content import IncomingMessage
from lcm.db.engine import Database
from lcm.db.models import ApiKey, Message, Tenant
from lcm.ingest.service import ingest_messages, prepare_batch
from tests.conftest import settings_for
from tests.servers import embedded_home
from tests.servers import run_lcm as lcm


def test_export_erase_import_and_tenant_erase(tmp_path: Path) -> None:
    url, _key = embedded_home(tmp_path / "home", "acme")
    env = {"LCM_DATABASE_URL": url, "LCM_FILES_DIR": str(tmp_path / "files")}
    database = Database(settings_for(url))
    with database.transaction() as session:
        tenant_id = session.scalars(select(Tenant.id)).one()
        batch = prepare_batch(
            [IncomingMessage("user", f"line {i}") for i in range(12)],
            max_batch=100,
            max_chars=10_000,
        )
        ingest_messages(session, tenant_id, "team/one", "s1", batch)

    listed = lcm("conversation", "list", "--tenant", "acme", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    assert [c["session_key"] for c in json.loads(listed.stdout)] == ["team/one"]

    dump = tmp_path / "one.jsonl"
    exported = lcm(
        "conversation", "export", "team/one", "--tenant", "acme", "-o", str(dump), env=env
    )
    assert exported.returncode == 0, exported.stderr
    assert len(dump.read_text().splitlines()) == 1 + 12 + 12  # header, messages, context items

    refused = lcm("conversation", "erase", "team/one", "--tenant", "acme", env=env)
    assert refused.returncode == 2  # no --yes
    erased = lcm("conversation", "erase", "team/one", "--tenant", "acme", "--yes", env=env)
    assert erased.returncode == 0, erased.stderr
    with database.read_session() as session:
        assert session.scalar(select(func.count()).select_from(Message)) == 0

    imported = lcm("conversation", "import", "team/one", str(dump), "--tenant", "acme", env=env)
    assert imported.returncode == 0, imported.stderr
    assert json.loads(imported.stdout)["messages"] == 12
    with database.read_session() as session:
        contents = session.scalars(select(Message.content).order_by(Message.seq)).all()
    assert contents == [f"line {i}" for i in range(12)]

    assert lcm("tenant", "erase", "acme", env=env).returncode == 2  # no --yes
    gone = lcm("tenant", "erase", "acme", "--yes", env=env)
    assert gone.returncode == 0, gone.stderr
    with database.read_session() as session:
        assert session.scalar(select(func.count()).select_from(Tenant)) == 0
        assert session.scalar(select(func.count()).select_from(ApiKey)) == 0
        assert session.scalar(select(func.count()).select_from(Message)) == 0
    database.dispose()
    assert lcm("tenant", "erase", "acme", "--yes", env=env).returncode == 1
