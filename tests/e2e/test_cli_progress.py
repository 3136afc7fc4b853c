"""Progress bars of long-running commands: on a terminal only, never for scripts.

Each command runs as an operator runs it, in its own process: once with
stderr on a pseudo-terminal (the bar must show there), once with stderr a
pipe (the output must be exactly the command's results, no bar bytes).
"""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import select

from lcm.content import IncomingMessage
from lcm.db.engine import Database
from lcm.db.models import Tenant
from lcm.ingest.service import ingest_messages, prepare_batch
from lcm.tenants.service import IssuedKey
from tests.conftest import settings_for
from tests.e2e.test_doctor_http import configure, summaries, turn
from tests.fakes import FakeAnthropicServer
from tests.servers import embedded_home
from tests.servers import run_lcm as lcm

FIXTURES = Path(__file__).parents[1] / "fixtures" / "transcripts"
BAR = "\u2501"  # the heavy line rich draws bars with


def on_terminal(*args: str, env: dict[str, str]) -> tuple[int, str, str]:
    """Run ``lcm`` with stderr on a pseudo-terminal: (exit code, stdout, what the terminal got)."""
    leader, follower = pty.openpty()
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "cli.main", *args],
            env={**os.environ, **env, "COLUMNS": "120", "TERM": "xterm"},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=follower,
        )
    finally:
        os.close(follower)  # the child holds its own copy: EOF once it exits
    shown = bytearray()
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    stdout = process.stdout.read() if process.stdout else b""
    code = process.wait(timeout=120)
    return code, stdout.decode(), shown.decode(errors="replace")


def home_with_messages(tmp_path: Path, n: int = 12) -> tuple[dict[str, str], Database]:
    url, _key = embedded_home(tmp_path / "home", "acme")
    env = {"LCM_DATABASE_URL": url, "LCM_FILES_DIR": str(tmp_path / "files")}
    database = Database(settings_for(url))
    with database.transaction() as session:
        tenant_id = session.scalars(select(Tenant.id)).one()
        batch = prepare_batch(
            [IncomingMessage("user", f"line {i}") for i in range(n)],
            max_batch=100,
            max_chars=10_000,
        )
        ingest_messages(session, tenant_id, "team/one", "s1", batch)
    return env, database


def test_export_shows_a_bar_on_a_terminal_only(tmp_path: Path) -> None:
    env, database = home_with_messages(tmp_path)
    database.dispose()
    piped = lcm("conversation", "export", "team/one", "--tenant", "acme", env=env)
    assert piped.returncode == 0, piped.stderr
    assert piped.stderr == ""  # no bar, nothing else
    assert len(piped.stdout.splitlines()) == 1 + 12 + 12
    code, stdout, shown = on_terminal(
        "conversation", "export", "team/one", "--tenant", "acme", env=env
    )
    assert code == 0, shown
    assert stdout == piped.stdout  # the export itself is the same, byte for byte
    assert "exporting messages" in shown
    assert BAR in shown
    assert "12/12" in shown


def test_tenant_erase_shows_a_bar_on_a_terminal_only(tmp_path: Path) -> None:
    env, database = home_with_messages(tmp_path)
    database.dispose()
    code, stdout, shown = on_terminal("tenant", "erase", "acme", "--yes", env=env)
    assert code == 0, shown
    assert "erasing tenant acme" in shown
    assert BAR in shown
    assert re.fullmatch(r"erased tenant acme: 1 conversations, \d+ rows, 0 stored files\n", stdout)

    other, database = home_with_messages(tmp_path / "second")
    database.dispose()
    piped = lcm("tenant", "erase", "acme", "--yes", env=other)
    assert piped.returncode == 0, piped.stderr
    assert piped.stderr == ""
    assert piped.stdout == stdout  # the same tenant, the same report, no bar bytes anywhere


def test_import_bars_only_on_a_terminal_and_never_with_json(tmp_path: Path) -> None:
    url, _key = embedded_home(tmp_path / "home", "local")
    env = {"LCM_DATABASE_URL": url, "LCM_FILES_DIR": str(tmp_path / "files")}
    source = str(FIXTURES / "pi_v1.jsonl")
    code, stdout, shown = on_terminal("import", source, "--key", "a", env=env)
    assert code == 0, shown
    assert "msg/s" in shown
    assert BAR in shown
    assert "lcm import" in stdout  # the report table, on stdout as before

    code, stdout, shown = on_terminal("import", source, "--key", "b", "--json", env=env)
    assert code == 0, shown
    assert BAR not in shown
    assert "msg/s" not in shown
    assert json.loads(stdout)["imported"] == 11

    piped = lcm("import", source, "--key", "c", "--json", env=env)
    assert piped.returncode == 0, piped.stderr
    assert BAR not in piped.stderr  # the offline summarizer's warning is all there is
    assert "msg/s" not in piped.stderr
    assert json.loads(piped.stdout)["imported"] == 11


def test_doctor_apply_inline_bars_on_a_terminal_only(
    db: Database, tenant: IssuedKey, llm: FakeAnthropicServer, llm_client: TestClient
) -> None:
    configure(llm_client, tenant)
    env = {
        "LCM_DATABASE_URL": db.settings.database_url,
        "ANTHROPIC_API_KEY": "sk-test",
        "LCM_ANTHROPIC_BASE_URL": llm.base_url,
        "LCM_LLM_MAX_RETRIES": "0",
    }

    def degrade() -> None:
        llm.set_default("500")
        turn(llm_client, tenant, 0, 40)
        assert any(s.degraded is not None for s in summaries(db).values())
        llm.set_default("ok")

    degrade()
    args = ("doctor", "--tenant", "acme", "--apply", "--inline")
    code, stdout, shown = on_terminal(*args, env=env)
    assert code == 0, shown
    assert "repairing conversations" in shown
    assert BAR in shown
    assert "repairs: {" in stdout

    degrade()  # more degraded summaries for a second repair
    piped = lcm(*args, "--json", env=env)
    assert piped.returncode == 0, piped.stderr
    assert "repairing conversations" not in piped.stderr
    assert BAR not in piped.stderr
    _listing, repaired = piped.stdout.strip().splitlines()  # two JSON documents, as before
    assert set(json.loads(repaired)["repaired"].values()) == {"done"}
