"""The console's surgery forms on a summary's page, against a real ``lcm serve``.

Embedded server (SQLite, in-process worker, offline summarizer): the forms
store the operation and the worker runs it under the conversation's lease.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from tests.e2e.test_console import ConsoleServer, _signed_in, csrf_token, server

__all__ = ["server"]  # the module's server fixture, shared with this module


def _rows(db_file: Path, sql: str, *args: object) -> list[tuple[object, ...]]:
    with sqlite3.connect(db_file) as conn:
        return list(conn.execute(sql, args))


def _settled(db_file: Path, operation_id: str) -> str:
    deadline = time.monotonic() + 60
    while True:
        ((status,),) = _rows(
            db_file, "SELECT status FROM summary_operations WHERE id = ?", operation_id
        )
        if status != "pending" or time.monotonic() > deadline:
            return str(status)
        time.sleep(0.1)


def _in_context(server: ConsoleServer, kind: str) -> list[str]:
    return [
        str(r[0])
        for r in _rows(
            server.db_file,
            "SELECT s.id FROM context_items c JOIN summaries s ON s.id = c.summary_id"
            " WHERE c.conversation_id = ? AND s.kind = ? ORDER BY c.ordinal",
            server.conversation_id,
            kind,
        )
    ]


def test_rewrite_and_dissolve_forms(server: ConsoleServer) -> None:
    browser = _signed_in(server, server.key_a)
    target = _in_context(server, "condensed")[0]
    page = browser.get(f"/console/summaries/{target}")
    assert page.status_code == 200
    assert 'id="rewrite-form"' in page.text
    assert 'id="dissolve-form"' in page.text
    csrf = csrf_token(page.text)

    # No CSRF token, or another session's: refused before anything runs.
    assert browser.post(f"/console/summaries/{target}/rewrite", data={}).status_code == 403
    other = _signed_in(server, server.key_b)
    stale = {"csrf_token": csrf_token(other.get("/console/live").text)}
    assert browser.post(f"/console/summaries/{target}/dissolve", data=stale).status_code == 403
    # Another tenant's summary is not found.
    foreign = {"csrf_token": csrf_token(other.get("/console/live").text)}
    assert other.post(f"/console/summaries/{target}/rewrite", data=foreign).status_code == 404
    assert _rows(server.db_file, "SELECT count(*) FROM summary_operations") == [(0,)]

    form = {"csrf_token": csrf, "instructions": "Keep the file names.", "subtree": "on"}
    done = browser.post(f"/console/summaries/{target}/rewrite", data=form)
    assert done.status_code == 303
    assert done.headers["location"].startswith(f"/console/summaries/{target}?done=rewrite-op_")
    ((op_id, subtree, instructions, targets),) = _rows(
        server.db_file, "SELECT id, subtree, instructions, targets FROM summary_operations"
    )
    assert (subtree, instructions) == (1, "Keep the file names.")
    assert target in str(targets)
    assert _settled(server.db_file, str(op_id)) == "done"
    assert _rows(server.db_file, "SELECT rewrites FROM summaries WHERE id = ?", target) == [(1,)]
    shown = browser.get(done.headers["location"])
    assert 'id="done"' in shown.text
    assert 'id="rewritten"' in shown.text  # the page says it was rewritten

    dissolved = browser.post(f"/console/summaries/{target}/dissolve", data={"csrf_token": csrf})
    assert dissolved.status_code == 303
    (op,) = _rows(server.db_file, "SELECT id FROM summary_operations WHERE action = 'dissolve'")
    assert _settled(server.db_file, str(op[0])) == "done"
    assert target not in _in_context(server, "condensed")
    # Out of the context: the page no longer offers to dissolve it, and a retry is refused.
    assert 'id="dissolve-form"' not in browser.get(f"/console/summaries/{target}").text
    again = browser.post(f"/console/summaries/{target}/dissolve", data={"csrf_token": csrf})
    assert again.status_code == 409
