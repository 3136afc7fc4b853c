"""``lcm backup`` while ``lcm serve`` writes, ``lcm restore`` into a new home, and what refuses.

The backup runs while a writer thread keeps ingesting one message per
request. Every message acknowledged before the backup started must be in
it, and what it holds of the loop conversation must be a whole prefix (one
moment's state, no gap). Restored into a new home and served there, the
history answers as before: full-text search (the FTS index came along),
a summary's description, and a large file's content (the files came along).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path

import httpx

from lcm.backup import postgres_commands
from tests import servers
from tests.servers import run_lcm as lcm

ROWS = "\n".join(f"row {i}: sensor-{i % 17} reading {i * 3} ok" for i in range(400))
BIG_FILE = f'here is the export <file name="sensors.csv">{ROWS}</file>'
SETTINGS = {
    "fresh_tail_count": 6,
    "leaf_min_fanout": 4,
    "leaf_chunk_tokens": 256,
    "leaf_target_tokens": 64,
    "condensed_target_tokens": 64,
    "condensed_min_fanout": 2,
}


class Writer:
    """One message per request into ``loop``; the ids acknowledged, with when."""

    def __init__(self, http: httpx.Client) -> None:
        self.http = http
        self.acked: list[tuple[float, str]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run)

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            n += 1
            body = {"messages": [{"role": "user", "content": f"loop {n}", "id": f"w{n}"}]}
            r = self.http.post("/v1/conversations/loop/messages", json=body)
            if r.status_code == 200:
                self.acked.append((time.monotonic(), f"w{n}"))


def served(home: Path, log: Path) -> servers.ServeHandle:
    env = {
        "LCM_HOME": str(home),
        "ANTHROPIC_API_KEY": "",
        "LCM_LARGE_FILE_TOKEN_THRESHOLD": "500",
        "LCM_LOG_LEVEL": "WARNING",
    }
    return servers.start_serve(env, log=log)


def test_backup_while_serving_then_restore_into_a_new_home(tmp_path: Path) -> None:
    home, restored_home, backup = tmp_path / "home", tmp_path / "restored", tmp_path / "bk"
    _, key = servers.embedded_home(home, "acme")
    headers = {"Authorization": f"Bearer {key}"}
    serve = served(home, tmp_path / "serve.log")
    try:
        with httpx.Client(base_url=serve.base_url, headers=headers, timeout=60) as http:
            assert http.patch("/v1/tenant/settings", json=SETTINGS).status_code == 200
            texts = [
                f"the quarterly ledger entry {i} balanced at {i * 11} credits" for i in range(40)
            ]
            texts.append(BIG_FILE)
            history = {"messages": [{"role": "user", "content": t} for t in texts]}
            assert http.post("/v1/conversations/h/messages", json=history).status_code == 200
            compact = {"wait": True, "token_budget": 2000, "target_tokens": 300}
            done = http.post("/v1/conversations/h/compact", json=compact)
            assert done.json()["status"] == "done", done.text

            writer = Writer(http)
            writer.thread.start()
            time.sleep(1.0)
            started = time.monotonic()
            made = lcm("backup", str(backup), "--json", env={"LCM_HOME": str(home)})
            writer.stop.set()
            writer.thread.join()
            assert made.returncode == 0, made.stderr
            report = json.loads(made.stdout)
            assert report["files_copied"] >= 1
            assert report["files_missing"] == []
            assert report["summaries"] >= 1

            summary_id, file_id = _a_summary_and_a_file(home / "lcm.db")
            described = http.get(f"/v1/summaries/{summary_id}").json()
            content = http.get(f"/v1/files/{file_id}").json()
    finally:
        serve.stop()

    before = {ident for at, ident in writer.acked if at < started}
    assert len(before) >= 5  # the loop was really writing when the backup began
    in_backup = _client_ids(backup / "lcm.db", "loop")
    assert before <= set(in_backup)
    # One moment's state: the loop's messages are w1..wN with nothing missing.
    assert in_backup == [f"w{n}" for n in range(1, len(in_backup) + 1)]

    restored = lcm("restore", str(backup), env={"LCM_HOME": str(restored_home)})
    assert restored.returncode == 0, restored.stderr
    serve = served(restored_home, tmp_path / "restored.log")
    try:
        with httpx.Client(base_url=serve.base_url, headers=headers, timeout=60) as http:
            found = http.post(
                "/v1/grep",
                json={"pattern": "quarterly ledger", "mode": "full_text", "session_key": "h"},
            )
            assert found.status_code == 200, found.text
            assert found.json()["matches"]
            assert http.get(f"/v1/summaries/{summary_id}").json() == described
            assert http.get(f"/v1/files/{file_id}").json() == content
            status = http.get("/v1/conversations/loop/status").json()
            assert status["messages"] == len(in_backup)
    finally:
        serve.stop()

    # A database holding tenants is not replaced without --force.
    refused = lcm("restore", str(backup), env={"LCM_HOME": str(restored_home)})
    assert refused.returncode == 1
    assert "--force" in refused.stderr
    forced = lcm("restore", str(backup), "--force", env={"LCM_HOME": str(restored_home)})
    assert forced.returncode == 0, forced.stderr
    assert "replaced" in forced.stdout
    # Nor is an existing backup overwritten, nor a directory that is no backup restored.
    assert lcm("backup", str(backup), env={"LCM_HOME": str(home)}).returncode == 1
    stray = tmp_path / "stray"
    stray.mkdir()
    assert lcm("restore", str(stray), env={"LCM_HOME": str(tmp_path / "x")}).returncode == 1


def test_postgres_gets_its_tools_commands_without_the_password() -> None:
    dump, load = postgres_commands(
        "postgresql+psycopg://lcm:s3cret@db.internal:5433/lcm", "/backups/lcm.dump"
    )
    assert dump.startswith("pg_dump --format=custom")
    assert '"postgresql://lcm@db.internal:5433/lcm"' in dump
    assert load.startswith("pg_restore --clean --if-exists")
    assert "s3cret" not in dump + load
    printed = lcm(
        "backup",
        "/backups/lcm.dump",
        env={"LCM_DATABASE_URL": "postgresql+psycopg://lcm:s3cret@db.internal:5433/lcm"},
    )
    assert printed.returncode == 0, printed.stderr
    assert "pg_dump" in printed.stdout
    assert "s3cret" not in printed.stdout + printed.stderr


def _client_ids(database: Path, session_key: str) -> list[str]:
    with sqlite3.connect(database) as db:
        rows = db.execute(
            "SELECT m.client_id FROM messages m JOIN conversations c ON c.id = m.conversation_id"
            " WHERE c.session_key = ? ORDER BY m.seq",
            (session_key,),
        ).fetchall()
    return [r[0] for r in rows]


def _a_summary_and_a_file(database: Path) -> tuple[str, str]:
    with sqlite3.connect(database) as db:
        summary = db.execute("SELECT id FROM summaries LIMIT 1").fetchone()[0]
        file_id = db.execute("SELECT id FROM large_files LIMIT 1").fetchone()[0]
    return str(summary), str(file_id)
