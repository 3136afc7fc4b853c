"""``lcm import``, ``lcm status``, ``lcm dag`` as an operator runs them: real processes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.servers import run_lcm as lcm

FIXTURES = Path(__file__).parents[1] / "fixtures" / "transcripts"


def json_lines(text: str) -> list[dict[str, Any]]:
    """``rich``'s print_json pretty-prints: split the stream into documents."""
    decoder, found, position = json.JSONDecoder(), [], 0
    while position < len(text):
        if text[position].isspace():
            position += 1
            continue
        value, position = decoder.raw_decode(text, position)
        found.append(value)
    return found


def test_import_status_and_dag(tmp_path: Path) -> None:
    env = {
        "LCM_HOME": str(tmp_path / "home"),
        "LCM_DATABASE_URL": f"sqlite:///{tmp_path / 'cli.db'}",
        # Small enough for the fixtures to be compacted.
        "LCM_FRESH_TAIL_COUNT": "2",
        "LCM_LEAF_MIN_FANOUT": "3",
        "COLUMNS": "200",
    }
    assert lcm("db", "upgrade", env=env).returncode == 0
    assert lcm("tenant", "create", "local", env=env).returncode == 0

    imported = lcm("import", str(FIXTURES), "--compact", "--json", env=env)
    assert imported.returncode == 0, imported.stderr
    reports = {Path(r["file"]).name: r for r in json_lines(imported.stdout)}
    assert {n: (r["imported"], r["tool_pairs"]) for n, r in reports.items()} == {
        "claude_code.jsonl": (11, 3),
        "pi_v1.jsonl": (11, 3),
        "pi_v3_branches.jsonl": (9, 2),
    }
    assert reports["pi_v1.jsonl"]["passes"] >= 1
    # The other two hold about 100 tokens in all: no summary could cost less
    # than the messages it would replace, so they stay raw.
    assert [reports[n]["passes"] for n in ("claude_code.jsonl", "pi_v3_branches.jsonl")] == [0, 0]
    assert all(r["context_tokens_before"] > 0 for r in reports.values())
    assert all(r["context_tokens_after"] <= r["context_tokens_before"] for r in reports.values())
    # Not a terminal, and --json: no progress bar (tests/e2e/test_cli_progress.py).
    assert "msg/s" not in imported.stderr

    again = lcm("import", str(FIXTURES / "pi_v1.jsonl"), "--format", "openclaw", "--json", env=env)
    assert again.returncode == 0, again.stderr
    assert json_lines(again.stdout)[0]["imported"] == 0

    status = lcm("status", "pi_v1", "--json", env=env)
    assert status.returncode == 0, status.stderr
    figures = json_lines(status.stdout)[0]
    assert figures["messages"] == 11
    assert figures["summaries"]
    assert figures["session_id"] == "11111111-aaaa-4bbb-8ccc-000000000001"

    dag = lcm("dag", "pi_v1", env=env)
    assert dag.returncode == 0, dag.stderr
    assert "sum_" in dag.stdout
    assert "messages #1.." in dag.stdout

    missing = lcm("status", "nope", env=env)
    assert missing.returncode == 1
    assert "no conversation" in missing.stderr
    wrong = lcm("import", str(FIXTURES), "--tenant", "ghost", env=env)
    assert wrong.returncode == 1
    assert "lcm tenant create ghost" in wrong.stderr
