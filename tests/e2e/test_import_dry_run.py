"""``lcm import --dry-run --since --limit``: what would be imported, of which transcripts."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from tests.e2e.test_import_cli import json_lines
from tests.servers import run_lcm as lcm

ROWS = "\n".join(f"row {i}: sensor-{i % 17} reading {i * 3} ok" for i in range(400))


def pi_transcript(session: int, month: int, messages: int, attach: bool = False) -> str:
    lines = [
        {
            "type": "session",
            "version": 3,
            "id": f"20000000-aaaa-4bbb-8ccc-{session:012d}",
            "timestamp": f"2026-{month:02d}-01T00:00:00.000Z",
        }
    ]
    parent = None
    for n in range(messages):
        text = f"step {n} of session {session}"
        if attach and n == 0:
            text += f' <file name="sensors.csv">{ROWS}</file>'
        lines.append(
            {
                "type": "message",
                "id": f"s{session}e{n}",
                "parentId": parent,
                "timestamp": f"2026-{month:02d}-01T00:{n // 60:02d}:{n % 60:02d}.000Z",
                "message": {
                    "role": "user" if n % 2 == 0 else "assistant",
                    "content": [{"type": "text", "text": text}],
                },
            }
        )
        parent = f"s{session}e{n}"
    return "\n".join(json.dumps(line) for line in lines) + "\n"


def stored_messages(database: Path) -> int:
    with sqlite3.connect(database) as db:
        return int(db.execute("SELECT count(*) FROM messages").fetchone()[0])


def test_dry_run_reports_and_writes_nothing_and_since_limit_choose_transcripts(
    tmp_path: Path,
) -> None:
    database = tmp_path / "cli.db"
    env = {
        "LCM_HOME": str(tmp_path / "home"),
        "LCM_DATABASE_URL": f"sqlite:///{database}",
        "LCM_LARGE_FILE_TOKEN_THRESHOLD": "500",
        "COLUMNS": "200",
    }
    assert lcm("db", "upgrade", env=env).returncode == 0
    assert lcm("tenant", "create", "local", env=env).returncode == 0
    folder = tmp_path / "sessions"
    folder.mkdir()
    (folder / "jan.jsonl").write_text(pi_transcript(1, 1, 6))
    (folder / "feb.jsonl").write_text(pi_transcript(2, 2, 8, attach=True))
    (folder / "mar.jsonl").write_text(pi_transcript(3, 3, 10))

    seen = lcm("import", str(folder), "--dry-run", "--json", env=env)
    assert seen.returncode == 0, seen.stderr
    rows = {r["key"]: r for r in json_lines(seen.stdout)}
    assert {k: (r["messages"], r["would_import"], r["anchor"]) for k, r in rows.items()} == {
        "jan": (6, 6, "new"),
        "feb": (8, 8, "new"),
        "mar": (10, 10, "new"),
    }
    assert {k: r["large_files"] for k, r in rows.items()} == {"jan": 0, "feb": 1, "mar": 0}
    assert rows["mar"]["last_at"].startswith("2026-03-01")
    assert stored_messages(database) == 0
    assert not (tmp_path / "home" / "files").exists()  # no file content written either

    table = lcm("import", str(folder), "--dry-run", env=env)
    assert table.returncode == 0, table.stderr
    assert "nothing written" in table.stdout
    assert "3 transcripts" in table.stdout

    # Imported for real, then previewed again: nothing new, anchored by ids.
    done = lcm("import", str(folder / "feb.jsonl"), "--json", env=env)
    assert done.returncode == 0, done.stderr
    again = json_lines(lcm("import", str(folder), "--dry-run", "--json", env=env).stdout)
    feb = next(r for r in again if r["key"] == "feb")
    assert (feb["would_import"], feb["anchor"]) == (0, "id")

    since = lcm("import", str(folder), "--dry-run", "--json", "--since", "2026-02-01", env=env)
    assert sorted(r["key"] for r in json_lines(since.stdout)) == ["feb", "mar"]
    newest = lcm("import", str(folder), "--dry-run", "--json", "--limit", "1", env=env)
    assert [r["key"] for r in json_lines(newest.stdout)] == ["mar"]

    # The same choice on a real import: only March is written.
    before = stored_messages(database)
    real = lcm("import", str(folder), "--json", "--since", "2026-02-15", env=env)
    assert real.returncode == 0, real.stderr
    assert [Path(r["file"]).name for r in json_lines(real.stdout)] == ["mar.jsonl"]
    assert stored_messages(database) == before + 10
    assert lcm("import", str(folder), "--limit", "0", env=env).returncode == 2
