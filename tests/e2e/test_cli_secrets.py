"""``lcm secrets scan`` and ``lcm secrets report`` as an operator runs them (embedded SQLite).

The scan runs in the command's own process (no worker can be reached) under
the job's lease, and ends done; the report prints the findings by kind.
"""

from __future__ import annotations

import json
from pathlib import Path

from lcm.content import IncomingMessage
from lcm.db.engine import Database
from lcm.ingest.service import ingest_messages, prepare_batch
from lcm.secrets import SecretScan
from lcm.tenants.service import update_overrides
from tests.conftest import settings_for
from tests.servers import run_lcm as lcm

KEY_A = "AKIA" + "QWER" * 4
ACME = "acme_live_" + "Q7w2" * 6


def test_scan_then_report_from_the_command_line(tmp_path: Path) -> None:
    env = {
        "LCM_HOME": str(tmp_path / "home"),
        "LCM_DATABASE_URL": f"sqlite:///{tmp_path / 'cli.db'}",
        "COLUMNS": "200",
    }
    assert lcm("db", "upgrade", env=env).returncode == 0
    assert lcm("tenant", "create", "local", env=env).returncode == 0
    database = Database(settings_for(env["LCM_DATABASE_URL"]))
    try:
        with database.transaction() as session:
            from lcm.tenants.service import tenant_by_name

            tenant_id = tenant_by_name(session, "local").id
            texts = [f"key {KEY_A}", f"token {ACME}", "plain words only"]
            batch = prepare_batch(
                [IncomingMessage("user", t) for t in texts], max_batch=10, max_chars=10_000
            )
            ingest_messages(session, tenant_id, "ops", None, batch, secrets=SecretScan())
            rule = {"kind": "acme_key", "pattern": r"acme_live_\w{24}"}
            update_overrides(session, tenant_id, {"secrets_custom_patterns": [rule]})
    finally:
        database.dispose()

    before = lcm("secrets", "report", "--json", env=env)
    assert before.returncode == 0, before.stderr
    kinds = json.loads(before.stdout)["conversations"][0]["kinds"]
    assert [k["kind"] for k in kinds] == ["aws_key"]

    scanned = lcm("secrets", "scan", "--json", env=env)
    assert scanned.returncode == 0, scanned.stderr
    progress = json.loads(scanned.stdout)
    assert (progress["status"], progress["messages_done"], progress["spans_written"]) == (
        "done",
        3,
        2,
    )
    table = lcm("secrets", "report", env=env)
    assert table.returncode == 0, table.stderr
    assert "acme_key" in table.stdout
    assert "aws_key" in table.stdout
    # Nothing stale is left: a second scan does no message.
    again = json.loads(lcm("secrets", "scan", "--json", env=env).stdout)
    assert again["messages_done"] == 0
    missing = lcm("secrets", "scan", "--conversation", "999", env=env)
    assert missing.returncode == 1
    assert "no conversation 999" in missing.stderr
