"""Session keys stored before the session-key rule show escaped; the CLI applies the rule.

A key holding a control and a zero-width character is written straight into
the database (as an older server would have stored it); the console's pages
and ``lcm conversation list`` show it as ``\\u0007`` and ``\\u200b``.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select, update

from lcm.content import IncomingMessage
from lcm.db.engine import Database
from lcm.db.models import Conversation, Tenant
from lcm.ingest.service import ingest_messages, prepare_batch
from tests import servers
from tests.conftest import settings_for
from tests.e2e.test_console import login_token

STORED = "agent:\x07bell\u200bzw"
SHOWN = "agent:\\u0007bell\\u200bzw"
ACCENTED = unicodedata.normalize("NFC", "agent:café")


@dataclass(frozen=True)
class Home:
    env: dict[str, str]
    key: str
    conversation_id: int


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Home:
    path = tmp_path_factory.mktemp("key-display-home")
    url, key = servers.embedded_home(path, "acme")
    database = Database(settings_for(url))
    try:
        with database.transaction() as session:
            tenant_id = session.scalars(select(Tenant.id)).one()
            batch = prepare_batch([IncomingMessage("user", "hello")], max_batch=10, max_chars=100)
            stored = ingest_messages(session, tenant_id, "placeholder", None, batch)
            ingest_messages(session, tenant_id, ACCENTED, None, batch)
        with database.transaction() as session:
            session.execute(
                update(Conversation)
                .where(Conversation.session_key == "placeholder")
                .values(session_key=STORED)
            )
    finally:
        database.dispose()
    env = {"LCM_DATABASE_URL": url, "LCM_FILES_DIR": str(path / "files"), "COLUMNS": "200"}
    return Home(env | {"LCM_HOME": str(path)}, key, stored.conversation_id)


def test_console_shows_the_stored_key_escaped(home: Home, tmp_path: Path) -> None:
    handle = servers.start_serve({"LCM_HOME": home.env["LCM_HOME"]}, log=tmp_path / "serve.log")
    try:
        browser = httpx.Client(base_url=handle.base_url, timeout=60)
        token = login_token(browser.get("/console/login").text)
        signed = browser.post("/console/login", data={"api_key": home.key, "login_token": token})
        assert signed.status_code == 303
        for path in ("/console/conversations", f"/console/conversations/{home.conversation_id}"):
            page = browser.get(path)
            assert page.status_code == 200, page.text
            assert SHOWN in page.text, path
            assert "\x07" not in page.text
            assert "\u200b" not in page.text
    finally:
        handle.stop()


def test_cli_shows_the_stored_key_escaped(home: Home) -> None:
    listed = servers.run_lcm("conversation", "list", "--tenant", "acme", env=home.env)
    assert listed.returncode == 0, listed.stderr
    assert SHOWN in listed.stdout
    assert "\x07" not in listed.stdout
    assert "\u200b" not in listed.stdout


def test_cli_reads_keys_in_nfc_and_refuses_invisible_characters(home: Home) -> None:
    nfd = unicodedata.normalize("NFD", ACCENTED)
    found = servers.run_lcm("status", nfd, "--tenant", "acme", env=home.env)
    assert found.returncode == 0, found.stderr
    refused = servers.run_lcm("status", "agent:\u200bmain", "--tenant", "acme", env=home.env)
    assert refused.returncode == 2
    assert "zero-width" in refused.stderr
