"""``lcm secrets reads`` and ``lcm secrets erase`` on an embedded SQLite home.

The local operator's ``--with-secrets`` export is recorded as a read by
``cli``; an erasure takes its value from stdin (never the command line).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from sqlalchemy import select

from bench.secrets_corpus import build_corpus
from lcm.content import IncomingMessage
from lcm.db.engine import Database
from lcm.db.models import SecretSpan, Tenant
from lcm.ingest.service import ingest_messages, prepare_batch
from tests.conftest import settings_for
from tests.servers import embedded_home
from tests.servers import run_lcm as lcm

KEY = "agent:cli-vault"
SAMPLES = [s for s in build_corpus(copies=1) if s.secrets]


def lcm_with_input(text: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *args],
        env={**os.environ, **env},
        input=text,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_cli_exports_are_recorded_and_a_value_is_erased_from_stdin(tmp_path: Path) -> None:
    url, _key = embedded_home(tmp_path / "home", "acme")
    env = {"LCM_DATABASE_URL": url, "LCM_FILES_DIR": str(tmp_path / "files")}
    database = Database(settings_for(url))
    try:
        with database.transaction() as session:
            tenant_id = session.scalars(select(Tenant.id)).one()
            batch = prepare_batch(
                [IncomingMessage("user", sample.text) for sample in SAMPLES],
                max_batch=100,
                max_chars=10_000,
            )
            ingest_messages(session, tenant_id, KEY, "s1", batch)
        with database.read_session() as session:
            spans = len(session.scalars(select(SecretSpan.id)).all())
    finally:
        database.dispose()
    whole = tmp_path / "whole.jsonl"
    export = ("conversation", "export", KEY, "--tenant", "acme", "--with-secrets", "-o")
    done = lcm(*export, str(whole), env=env)
    assert done.returncode == 0, done.stderr
    listed = lcm("secrets", "reads", "--tenant", "acme", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)["reads"]
    assert [(r["key_name"], r["key_id"], r["surface"]) for r in rows] == [("cli", None, "export")]
    assert rows[0]["span_count"] == spans > 0
    masked = lcm(
        "conversation", "export", KEY, "--tenant", "acme", "-o", str(tmp_path / "m"), env=env
    )
    assert masked.returncode == 0, masked.stderr
    assert (
        len(
            json.loads(lcm("secrets", "reads", "--json", "--tenant", "acme", env=env).stdout)[
                "reads"
            ]
        )
        == 1
    )

    value = SAMPLES[0].secrets[0]
    assert value in whole.read_text()
    refused = lcm_with_input(
        value, "secrets", "erase", "--tenant", "acme", "--value-stdin", env=env
    )
    assert refused.returncode == 2  # without --yes nothing happens
    erase = ("secrets", "erase", "--tenant", "acme", "--value-stdin", "--yes", "--json")
    done = lcm_with_input(value + "\n", *erase, env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["spans"] >= 1
    assert value not in done.stdout + done.stderr
    again = lcm(*export, str(whole), env=env)
    assert again.returncode == 0, again.stderr
    text = whole.read_text()
    assert value not in text
    assert "[secret:aws_key#" in text
    assert SAMPLES[1].secrets[0] in text  # the others stay
    repeat = lcm_with_input(value, *erase, env=env)
    assert json.loads(repeat.stdout)["spans"] == 0
