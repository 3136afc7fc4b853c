"""The operator console (``/console``) against a real ``lcm serve``: over HTTP and in Chromium.

The server is embedded (SQLite, in-process worker, offline summarizer); a
conversation with tool calls and a marker is compacted through the API with
low per-tenant thresholds. The browser test runs ``tests/browser/console.mjs``
on Node 26 with playwright-core driving the Chromium of ``@sparticuz/chromium``
(npm, cached by tests/openclaw_env.py); with ``CI`` set a missing Node or
browser fails the run.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests import servers
from tests.openclaw_env import BROWSER_SCRIPTS_DIR, OpenClawEnv, ProvisionError, provision_browser

SESSION_KEY = "agent-console"
MARKER = "ZEBRAMARKER"
MARKER_SEQ = 13
LOW_THRESHOLDS = {
    "fresh_tail_count": 6,
    "leaf_min_fanout": 4,
    "leaf_chunk_tokens": 256,
    "leaf_target_tokens": 64,
    "condensed_target_tokens": 64,
    "condensed_min_fanout": 2,
    "sweep_max_depth": -1,
    "truncation_tokens": 64,
}


@dataclass(frozen=True)
class ConsoleServer:
    base: str
    db_file: Path
    key_a: str
    key_b: str
    read_key: str
    conversation_id: int

    def api(self, key: str) -> httpx.Client:
        return httpx.Client(base_url=self.base, headers={"Authorization": f"Bearer {key}"})


def _messages() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(60):
        if i % 10 == 3:
            call: dict[str, Any] = {"type": "tool_use", "id": f"tu{i}", "name": "read_file"}
            call["input"] = {"path": f"src/file{i}.py"}
            said = {"type": "text", "text": f"reading file {i}"}
            out.append({"role": "assistant", "id": f"m{i}", "content": [said, call]})
        elif i % 10 == 4:
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": f"tu{i - 1}"}
            result["content"] = f"contents of file {i} " * 20
            out.append({"role": "user", "id": f"m{i}", "content": [result]})
        else:
            word = MARKER if i == MARKER_SEQ - 1 else "ordinary"
            text = f"message {i} {word} about retries and backoff " * 8
            out.append(
                {"role": "user" if i % 2 == 0 else "assistant", "id": f"m{i}", "content": text}
            )
    return out


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleServer]:
    home = tmp_path_factory.mktemp("console-home")
    _, key_a = servers.embedded_home(home, "alpha")
    _, key_b = servers.embedded_home(home, "beta")
    handle = servers.start_serve({"LCM_HOME": str(home)}, log=home / "serve.log")
    try:
        with httpx.Client(
            base_url=handle.base_url, headers={"Authorization": f"Bearer {key_a}"}, timeout=60
        ) as api:
            assert api.patch("/v1/tenant/settings", json=LOW_THRESHOLDS).status_code == 200
            sent = api.post(
                f"/v1/conversations/{SESSION_KEY}/messages", json={"messages": _messages()}
            )
            assert sent.status_code == 200, sent.text
            compact = {"wait": True, "token_budget": 2000, "target_tokens": 300}
            done = api.post(f"/v1/conversations/{SESSION_KEY}/compact", json=compact)
            assert done.json()["status"] == "done", done.text
            read = api.post("/v1/tenant/keys", json={"name": "reader", "scopes": ["read"]})
            assert read.status_code in (200, 201), read.text
        yield ConsoleServer(
            handle.base_url,
            home / "lcm.db",
            key_a,
            key_b,
            read.json()["api_key"],
            sent.json()["conversation_id"],
        )
    finally:
        handle.stop()


def _signed_in(server: ConsoleServer, key: str) -> httpx.Client:
    browser = httpx.Client(base_url=server.base, timeout=60)
    token = login_token(browser.get("/console/login").text)
    done = browser.post("/console/login", data={"api_key": key, "login_token": token})
    assert done.status_code == 303
    assert done.headers["location"] == "/console/conversations"
    return browser


def login_token(page: str) -> str:
    """The sign-in form's token in the login page's HTML."""
    found = re.search(r'name="login_token" value="([^"]+)"', page)
    assert found is not None
    return found.group(1)


def csrf_token(page: str) -> str:
    """A signed-in page's form token in its HTML."""
    found = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert found is not None
    return found.group(1)


def test_sign_in_needs_an_admin_key_and_the_form_token(server: ConsoleServer) -> None:
    browser = httpx.Client(base_url=server.base)
    form = {"login_token": login_token(browser.get("/console/login").text)}
    read_only = browser.post("/console/login", data={**form, "api_key": server.read_key})
    assert read_only.status_code == 403
    assert "admin scope" in read_only.text
    # Each answer carries a fresh form (and login token).
    form = {"login_token": login_token(read_only.text)}
    unknown = browser.post("/console/login", data={**form, "api_key": "lcm_nope"})
    assert unknown.status_code == 401
    assert "lcm_console=" not in read_only.headers.get("set-cookie", "")
    # Without the login form's own token (a cross-site sign-in), nothing happens.
    fresh = httpx.Client(base_url=server.base)
    forged = fresh.post("/console/login", data={"api_key": server.key_a, "login_token": "x"})
    assert forged.status_code == 403
    assert "lcm_console=" not in forged.headers.get("set-cookie", "")
    assert fresh.get("/console/conversations").headers["location"] == "/console/login"


def test_session_cookie_is_strict_and_ends_with_its_key(server: ConsoleServer) -> None:
    with server.api(server.key_a) as api:
        extra = api.post("/v1/tenant/keys", json={"name": "console", "scopes": ["admin"]}).json()
    browser = _signed_in(server, extra["api_key"])
    cookie = next(c for c in browser.cookies.jar if c.name == "lcm_console")
    assert extra["api_key"] not in (cookie.value or "")
    assert browser.get("/console/conversations").status_code == 200
    # A tampered signature is not a session.
    browser.cookies.set("lcm_console", (cookie.value or "")[:-4] + "0000", path="/console")
    assert browser.get("/console/conversations").status_code == 303
    browser.cookies.set("lcm_console", cookie.value or "", path="/console")
    with server.api(server.key_a) as api:
        assert api.post(f"/v1/tenant/keys/{extra['id']}/revoke").status_code == 200
    refused = browser.get("/console/conversations")
    assert refused.status_code == 303
    assert refused.headers["location"] == "/console/login"


def test_post_forms_need_the_session_csrf_token(server: ConsoleServer) -> None:
    browser = _signed_in(server, server.key_a)
    other = _signed_in(server, server.key_a)  # another session of the same key
    target = {"conversation_id": str(server.conversation_id)}
    assert browser.post("/console/live/compact", data=target).status_code == 403
    stale = {**target, "csrf_token": csrf_token(other.get("/console/live").text)}
    assert browser.post("/console/live/compact", data=stale).status_code == 403
    good = {**target, "csrf_token": csrf_token(browser.get("/console/live").text)}
    done = browser.post("/console/live/compact", data=good)
    assert done.status_code == 303
    assert "done=compact-" in done.headers["location"]


def test_every_page_is_tenant_scoped(server: ConsoleServer) -> None:
    a, b = _signed_in(server, server.key_a), _signed_in(server, server.key_b)
    with sqlite3.connect(server.db_file) as db:
        summary_id = db.execute("SELECT id FROM summaries LIMIT 1").fetchone()[0]
    cid = server.conversation_id
    pages = [
        f"/console/conversations/{cid}",
        f"/console/conversations/{cid}/messages?seq=1",
        f"/console/summaries/{summary_id}",
    ]
    for path in pages:
        assert a.get(path).status_code == 200, path
        assert b.get(path).status_code == 404, path
    assert SESSION_KEY in a.get("/console/conversations").text
    assert SESSION_KEY not in b.get("/console/conversations").text
    assert '<li class="result message">' in a.get(f"/console/search?q={MARKER}").text
    assert '<li class="result' not in b.get(f"/console/search?q={MARKER}").text
    csrf = csrf_token(b.get("/console/live").text)
    foreign = b.post("/console/live/compact", data={"conversation_id": cid, "csrf_token": csrf})
    assert foreign.status_code == 404


# --- in a real browser ----------------------------------------------------------------


@pytest.fixture(scope="module")
def browser_env() -> OpenClawEnv:
    try:
        return provision_browser()
    except (ProvisionError, OSError, subprocess.SubprocessError) as error:
        if os.environ.get("CI"):
            pytest.fail(f"Node/Chromium unavailable in CI: {error}")
        pytest.skip(f"Node/Chromium unavailable: {error}")


def _expected(server: ConsoleServer) -> dict[str, Any]:
    """What the pages must show, read straight from the database and the API."""
    cid = server.conversation_id
    with sqlite3.connect(server.db_file) as db:
        summaries = db.execute(
            "SELECT id, kind, depth FROM summaries WHERE conversation_id = ? ORDER BY depth DESC",
            (cid,),
        ).fetchall()
        tool_leaf = db.execute(
            "SELECT sm.summary_id FROM summary_messages sm JOIN messages m ON m.id = sm.message_id"
            " WHERE m.conversation_id = ? AND m.seq = 4",
            (cid,),
        ).fetchone()[0]
        seqs = [
            seq
            for (seq,) in db.execute(
                "SELECT m.seq FROM summary_messages sm JOIN messages m ON m.id = sm.message_id"
                " WHERE sm.summary_id = ? ORDER BY sm.ordinal",
                (tool_leaf,),
            )
        ]
    with server.api(server.key_a) as api:
        assembled = api.post(
            f"/v1/conversations/{SESSION_KEY}/assemble", json={"token_budget": 200_000}
        ).json()
    assert {kind for _, kind, _ in summaries} == {"leaf", "condensed"}
    return {
        "base": server.base,
        "key_a": server.key_a,
        "key_b": server.key_b,
        "read_key": server.read_key,
        "session_key": SESSION_KEY,
        "conversation_id": cid,
        "summary_ids": [sid for sid, _, _ in summaries],
        "top_id": summaries[0][0],
        "tool_leaf": {"id": tool_leaf, "seqs": seqs},
        "fresh_tail_count": assembled["fresh_tail_count"],
        "marker": MARKER,
        "marker_seq": MARKER_SEQ,
    }


def test_console_in_chromium(browser_env: OpenClawEnv, server: ConsoleServer) -> None:
    case = _expected(server)
    env = {**os.environ, "CONSOLE_CASE": json.dumps(case)}
    # Set LCM_CONSOLE_SCREENSHOTS=docs to refresh the README's screenshots.
    env["CONSOLE_SCREENSHOTS"] = os.environ.get("LCM_CONSOLE_SCREENSHOTS", "")
    done = subprocess.run(
        [str(browser_env.node), "console.mjs"],
        cwd=BROWSER_SCRIPTS_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-10000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(report["checks"]) == 12, report
