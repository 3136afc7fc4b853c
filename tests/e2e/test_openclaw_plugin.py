"""The OpenClaw plugin (clients/openclaw) run by Node against a real lcm-server.

Provisions Node 26 and openclaw with npm (tests/openclaw_env.py), starts
``lcm serve`` (embedded: SQLite, in-process worker, offline summarizer) and the
fake Messages API server, then runs ``node --test`` over the plugin's tests:
unit tests, lifecycle tests through OpenClaw's exported host functions, and the
end-to-end test through a real OpenClaw gateway. With ``CI`` set a missing
Node or openclaw fails the run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests import servers
from tests.fakes.anthropic_script import Behaviour
from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.fakes.hanging_proxy import HangingProxy
from tests.openclaw_env import PLUGIN_DIR, OpenClawEnv, ProvisionError, pack_plugin, provision


@pytest.fixture(scope="module")
def openclaw_env() -> OpenClawEnv:
    try:
        return provision()
    except (ProvisionError, OSError, subprocess.SubprocessError) as error:
        if os.environ.get("CI"):
            pytest.fail(f"Node/openclaw unavailable in CI: {error}")
        pytest.skip(f"Node/openclaw unavailable: {error}")


@contextmanager
def _lcm_serve(home: Path, settings: dict[str, str]) -> Iterator[tuple[str, str]]:
    """``lcm serve`` (embedded) on a free loopback port: yields its URL and tenant key."""
    home.mkdir(parents=True, exist_ok=True)
    handle = servers.start_serve({"LCM_HOME": str(home), **settings}, log=home / "serve.log")
    try:
        yield handle.base_url, handle.printed_key()
    finally:
        handle.stop()


@pytest.fixture(scope="module")
def lcm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    # Small numbers so a few dozen turns cross the threshold and compact.
    settings = {
        "LCM_FRESH_TAIL_COUNT": "6",
        "LCM_LEAF_MIN_FANOUT": "4",
        "LCM_LEAF_CHUNK_TOKENS": "1500",
        "LCM_LEAF_TARGET_TOKENS": "150",
        "LCM_CONDENSED_TARGET_TOKENS": "200",
        "LCM_TRUNCATION_TOKENS": "200",
        "LCM_CONDENSED_MIN_FANOUT": "3",
    }
    with _lcm_serve(tmp_path_factory.mktemp("lcm-home"), settings) as server:
        yield server


@pytest.fixture(scope="module")
def fake_llm() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as server:
        yield server


def test_plugin_node_suite(
    openclaw_env: OpenClawEnv,
    lcm_server: tuple[str, str],
    fake_llm: FakeAnthropicServer,
    tmp_path: Path,
) -> None:
    base, key = lcm_server
    env = {
        **os.environ,
        "LCM_URL": base,
        "LCM_KEY": key,
        "FAKE_ANTHROPIC_URL": fake_llm.base_url,
        "OPENCLAW_CLI": str(openclaw_env.openclaw_cli),
        "OPENCLAW_NODE": str(openclaw_env.node),
        "OPENCLAW_TEST_TMP": str(tmp_path),
    }
    done = subprocess.run(
        [str(openclaw_env.node), "--test", "--test-reporter=spec", "--test-concurrency=1", "test/"],
        cwd=PLUGIN_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-20000:]
    assert re.search(r"\bfail 0\b", output), output
    assert not re.search(r"\bpass 0\b", output), output


def test_fake_messages_api_streams_what_the_sdk_reads(fake_llm: FakeAnthropicServer) -> None:
    import anthropic

    client = anthropic.Anthropic(base_url=fake_llm.base_url, api_key="x", max_retries=0)
    ask = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hello"}]}
    with client.messages.stream(**ask) as stream:  # type: ignore[arg-type]
        streamed = stream.get_final_message()
    plain = client.messages.create(**ask)  # type: ignore[call-overload]
    streamed_block, plain_block = streamed.content[0], plain.content[0]
    assert streamed_block.type == plain_block.type == "text"
    assert streamed_block.text == plain_block.text != ""
    assert streamed.stop_reason == "end_turn"


# --- end to end through a real OpenClaw gateway -------------------------------------

_GATEWAY_TOKEN = "lcm-e2e-gateway-token"
_FOREIGN_ENV = ("OPENCLAW_", "ANTHROPIC_")
_SESSION = "lcm-e2e"
_MAX_TURNS = 20
_FILLER = " ".join(f"detail{n} of the migration plan for the billing service" for n in range(20))
# The plugin's timeout and breaker cool-down in the gateway test: small, so the
# hung-server phase is quick, and far apart, so what the breaker saves shows.
_TIMEOUT_MS, _COOLDOWN_MS = 2_000, 8_000


def _marker(turn: int) -> str:
    return f"MARKER-{turn:02d}-QX"


def _openclaw_config(fake_url: str, lcm_url: str, lcm_key: str, tmp: Path) -> dict[str, Any]:
    """OpenClaw's defaults (SQLite sessions, tool search on), the fake model, the HTTP endpoint."""
    fake_model = {
        "id": "fake-model",
        "name": "Fake",
        "reasoning": False,
        "input": ["text"],
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
        "contextWindow": 200000,
        "maxTokens": 4096,
    }
    lcm = {"baseUrl": lcm_url, "apiKey": lcm_key, "timeoutMs": _TIMEOUT_MS}
    return {
        "gateway": {
            "mode": "local",
            "bind": "loopback",
            "auth": {"mode": "token"},
            "http": {"endpoints": {"chatCompletions": {"enabled": True}}},
        },
        "logging": {"file": str(tmp / "openclaw.log")},
        "agents": {
            "defaults": {"model": {"primary": "fake/fake-model"}, "workspace": str(tmp / "ws")}
        },
        "models": {
            "mode": "replace",
            "providers": {
                "fake": {
                    "baseUrl": fake_url,
                    "apiKey": "x",
                    "api": "anthropic-messages",
                    "models": [fake_model],
                }
            },
        },
        "plugins": {"entries": {"lcm": {"config": {**lcm, "breakerCooldownMs": _COOLDOWN_MS}}}},
    }


def _grep_matches(tool_result: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``matches`` of an lcm_grep result, as OpenClaw handed it back to the model.

    Through tool search's ``tool_call`` the result is nested in OpenClaw's
    envelope (the called tool's id, then its result): the list is found
    wherever it sits.
    """
    content = tool_result.get("content")
    if isinstance(content, list):
        content = "".join(b.get("text", "") for b in content if isinstance(b, dict))
    try:
        parsed: Any = json.loads(str(content))
    except ValueError:
        return []
    found: list[dict[str, Any]] = []
    pending = [parsed]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            matches = node.get("matches")
            if isinstance(matches, list):
                found += [m for m in matches if isinstance(m, dict)]
            pending += [v for k, v in node.items() if k != "matches"]
        elif isinstance(node, list):
            pending += node
        elif isinstance(node, str) and node.lstrip().startswith("{"):
            with suppress(ValueError):
                pending.append(json.loads(node))
    return found


def _tool_results(bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        block
        for body in bodies
        for message in body["messages"]
        if isinstance(message.get("content"), list)
        for block in message["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]


def _wait_for_gateway(proc: subprocess.Popen[bytes], log: Path, deadline: float) -> None:
    while "[gateway] ready" not in re.sub(r"\x1b\[[0-9;]*m", "", log.read_text(errors="replace")):
        assert proc.poll() is None, f"openclaw gateway exited:\n{log.read_text()[-4000:]}"
        assert time.monotonic() < deadline, f"gateway not ready:\n{log.read_text()[-4000:]}"
        time.sleep(0.3)


def _install_packed_plugin(
    openclaw_env: OpenClawEnv, env: dict[str, str], tmp: Path
) -> dict[str, Any]:
    """``npm pack`` the plugin and ``openclaw plugins install`` the tarball; the config after."""
    tarball = pack_plugin(openclaw_env, tmp / "pack")
    done = subprocess.run(
        [
            str(openclaw_env.node),
            str(openclaw_env.openclaw_cli),
            "plugins",
            "install",
            str(tarball),
            "--force",
            "--accept-capabilities",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"install failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert "Installed plugin: lcm" in done.stdout, done.stdout
    installed = Path(env["HOME"]) / ".openclaw" / "extensions" / "lcm"
    assert (installed / "dist" / "index.js").is_file(), sorted(p.name for p in installed.iterdir())
    return dict(json.loads((Path(env["HOME"]) / ".openclaw" / "openclaw.json").read_text()))


def test_turns_through_openclaw_gateway(
    openclaw_env: OpenClawEnv, fake_llm: FakeAnthropicServer, tmp_path: Path
) -> None:
    """A packed plugin, installed from its tarball, runs under OpenClaw's defaults.

    Turns go to the gateway's HTTP endpoint (``agent exec`` would load the
    plugin for discovery only); tool search is on, so the model reaches
    ``lcm_grep`` through ``tool_call``. Then lcm-server hangs behind a proxy:
    a turn costs at most one plugin timeout, the next none, and once it is
    back every turn's messages are stored exactly once.
    """
    started = time.monotonic()
    settings = {
        # A threshold of 1% of OpenClaw's budget (its 200k context window) is
        # crossed after a few turns; inline compaction makes the next assemble see it.
        "LCM_CONTEXT_THRESHOLD": "0.01",
        "LCM_COMPACTION_MODE": "inline",
        "LCM_FRESH_TAIL_COUNT": "4",
        "LCM_LEAF_MIN_FANOUT": "4",
        "LCM_LEAF_CHUNK_TOKENS": "600",
        "LCM_LEAF_TARGET_TOKENS": "150",
        "LCM_CONDENSED_TARGET_TOKENS": "200",
        "LCM_CONDENSED_MIN_FANOUT": "3",
    }
    with _lcm_serve(tmp_path / "lcm-home", settings) as (lcm_url, lcm_key):
        upstream = httpx.URL(lcm_url)
        proxy = HangingProxy(upstream.host, int(upstream.port or 80))
        home = tmp_path / "home"
        (home / ".openclaw").mkdir(parents=True)
        (tmp_path / "ws").mkdir()
        config = _openclaw_config(fake_llm.base_url, proxy.url, lcm_key, tmp_path)
        (home / ".openclaw" / "openclaw.json").write_text(json.dumps(config, indent=2))
        port = servers.free_port()
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(_FOREIGN_ENV)},
            "HOME": str(home),
            "OPENCLAW_GATEWAY_TOKEN": _GATEWAY_TOKEN,
            "OPENCLAW_GATEWAY_PORT": str(port),
        }
        installed = _install_packed_plugin(openclaw_env, env, tmp_path)
        assert installed["plugins"]["slots"]["contextEngine"] == "lcm"
        assert installed["plugins"]["entries"]["lcm"]["config"]["baseUrl"] == proxy.url
        assert "toolSearch" not in installed.get("tools", {}), "OpenClaw's default: tool search on"
        node, cli = str(openclaw_env.node), str(openclaw_env.openclaw_cli)
        gateway_log = tmp_path / "gateway.log"
        with gateway_log.open("wb") as sink:
            gateway = subprocess.Popen(
                [node, cli, "gateway", "--port", str(port), "--bind", "loopback", "--verbose"],
                env=env,
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        http = httpx.Client(
            base_url=f"http://127.0.0.1:{port}",
            headers={
                "authorization": f"Bearer {_GATEWAY_TOKEN}",
                "x-openclaw-session-key": _SESSION,
            },
            timeout=120,
        )
        try:
            _wait_for_gateway(gateway, gateway_log, time.monotonic() + 90)

            def turn(message: str) -> tuple[str, float]:
                began = time.monotonic()
                reply = http.post(
                    "/v1/chat/completions",
                    json={"model": "openclaw", "messages": [{"role": "user", "content": message}]},
                )
                assert reply.status_code == 200, (
                    f"turn failed: {reply.status_code} {reply.text[-3000:]}\n"
                    f"gateway log:\n{gateway_log.read_text(errors='replace')[-4000:]}"
                )
                text = str(reply.json()["choices"][0]["message"]["content"])
                return text, time.monotonic() - began

            def with_summary() -> list[dict[str, Any]]:
                bodies = [r.body for r in fake_llm.requests]
                return [b for b in bodies if '<summary id=\\"sum_' in json.dumps(b["messages"])]

            fake_llm.set_default(Behaviour.reply("Noted."))
            turns = 0
            while not with_summary():
                assert turns < _MAX_TURNS, "no request to the model carried an lcm <summary>"
                turn(f"Turn {turns}: remember {_marker(turns)}. {_FILLER}")
                turns += 1
            compacted_after = turns
            first_with_summary = with_summary()[0]
            assembled = json.dumps(first_with_summary["messages"])
            # Tool search is on: the recall prompt names the route the model can take.
            system = json.dumps(first_with_summary.get("system"))
            assert "These tools are deferred" in system, system
            assert 'tool_call {\\"id\\": \\"lcm_grep\\"' in system, system

            # The model asks lcm_grep, through tool search's tool_call, for turn 0's marker.
            before = len(fake_llm.requests)
            fake_llm.script(
                [
                    Behaviour.tool_use(
                        "tool_call", {"id": "lcm_grep", "args": {"pattern": _marker(0)}}
                    )
                ]
            )
            turn("Which marker did I ask you to remember first? Search the history.")
            turns += 1
            later = [r.body for r in fake_llm.requests[before:]]
            results = _tool_results(later)
            assert results, f"no tool_result reached the model: {later[-1]}"
            # lcm_grep found turn 0's own user message (the fake never echoes it).
            found = [m for block in results for m in _grep_matches(block)]
            first = [m for m in found if m["type"] == "message" and _marker(0) in m["snippet"]]
            assert first, json.dumps(results)
            # The nested-call record OpenClaw writes for tool_call is not a message.
            family = _family(lcm_url, lcm_key)
            status = httpx.get(
                f"{lcm_url}/v1/conversations/{family}/status",
                headers={"authorization": f"Bearer {lcm_key}"},
            ).json()
            user_texts = _stored_user_texts(lcm_url, lcm_key, family)
            assert "" not in user_texts, user_texts
            assert "-" not in user_texts, user_texts

            # lcm-server hangs. Before the breaker, each call of a turn waited
            # the plugin's timeout (bootstrap, assemble twice, commit).
            proxy.set_mode("hang")
            hung = [turn(f"Turn {turns + i}: remember {_marker(turns + i)}.")[1] for i in range(2)]
            hung_markers = [_marker(turns + i) for i in range(2)]
            turns += 2
            assert hung[0] < _TIMEOUT_MS / 1000 + 6, f"first hung turn took {hung[0]:.1f}s"
            assert hung[1] < 6, f"a turn with the breaker open took {hung[1]:.1f}s"
            proxy.set_mode("forward")
            time.sleep(_COOLDOWN_MS / 1000 + 0.5)
            back = turn(f"Turn {turns}: remember {_marker(turns)}.")[1]
            turns += 1
            stored = _wait_stored(lcm_url, lcm_key, family, [*hung_markers, _marker(turns - 1)])
            # The operator command, answered by the plugin without the model.
            # OpenClaw dispatches commands from chat surfaces (the gateway's
            # chat.send, as its Control UI sends them), not from the
            # OpenAI-compatible endpoint or ``openclaw agent``.
            asked = len(fake_llm.requests)
            command = _chat_command(node, cli, env, "/lcm status")
            assert "messages stored:" in command, command
            assert len(fake_llm.requests) == asked, "a command never reaches the model"
        finally:
            fake_llm.set_default("ok")
            http.close()
            proxy.close()
            gateway.terminate()
            try:
                gateway.wait(timeout=30)
            except subprocess.TimeoutExpired:
                gateway.kill()
                gateway.wait(timeout=10)
    excerpt = assembled[assembled.index("<summary") :][:400]
    elapsed = time.monotonic() - started
    print(f"\n{turns} turns through the gateway in {elapsed:.1f}s; the model saw an lcm")
    print(f"summary from turn {compacted_after} on (a later turn called lcm_grep via tool_call)")
    print(f"first assembled request to the model: ...{excerpt}...")
    print(f"lcm_grep match in the tool_result: {json.dumps(first[0])[:400]}")
    print(f"messages stored before the hang: {status['messages']}")
    print(f"hung server: turns took {hung[0]:.1f}s, {hung[1]:.1f}s (timeout {_TIMEOUT_MS} ms);")
    print(f"back: {back:.1f}s; each marker stored once: {stored}")
    print(f"/lcm status through the gateway:\n{command}")


def _chat_command(node: str, cli: str, env: dict[str, str], text: str) -> str:
    """Send ``text`` with the gateway's ``chat.send``; the reply that follows it in the session."""

    def call(method: str, params: dict[str, Any]) -> Any:
        done = subprocess.run(
            [node, cli, "gateway", "call", method, "--params", json.dumps(params), "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, f"{method}: {done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        return json.loads(done.stdout)

    call(
        "chat.send",
        {"sessionKey": _SESSION, "message": text, "idempotencyKey": f"cmd-{time.time()}"},
    )
    deadline = time.monotonic() + 60
    while True:
        messages = call("chat.history", {"sessionKey": _SESSION, "limit": 4}).get("messages", [])
        asked = [
            i
            for i, m in enumerate(messages)
            if m.get("role") == "user" and m.get("content") == text
        ]
        replies = (
            [m for m in messages[asked[-1] + 1 :] if m.get("role") == "assistant"] if asked else []
        )
        if replies:
            content = replies[0].get("content")
            if isinstance(content, list):
                content = "".join(b.get("text", "") for b in content if isinstance(b, dict))
            return str(content)
        assert time.monotonic() < deadline, messages
        time.sleep(0.5)


def _family(lcm_url: str, lcm_key: str) -> str:
    """The lcm session key the gateway's turns went to (OpenClaw scopes the key it was given)."""
    listed = httpx.get(
        f"{lcm_url}/v1/conversations", headers={"authorization": f"Bearer {lcm_key}"}
    ).json()
    keys = {c["session_key"] for c in listed["conversations"]}
    ours = [k for k in keys if k.startswith("openclaw:") and k.endswith(_SESSION)]
    assert len(ours) == 1, keys
    return ours[0]


def _stored_user_texts(lcm_url: str, lcm_key: str, family: str) -> list[str]:
    """Every stored user message's text, through the export endpoint."""
    exported = httpx.get(
        f"{lcm_url}/v1/conversations/{family}/export",
        headers={"authorization": f"Bearer {lcm_key}"},
    )
    assert exported.status_code == 200, exported.text
    texts = []
    for line in exported.text.splitlines():
        record = json.loads(line)
        if record.get("type") == "message" and record.get("role") == "user":
            content = record.get("content")
            if isinstance(content, list):
                content = "".join(b.get("text", "") for b in content if isinstance(b, dict))
            texts.append(str(content).strip())
    return texts


def _wait_stored(lcm_url: str, lcm_key: str, family: str, markers: list[str]) -> dict[str, int]:
    """How many stored user messages hold each marker, once each holds at least one."""
    deadline = time.monotonic() + 60
    while True:
        texts = _stored_user_texts(lcm_url, lcm_key, family)
        counts = {m: sum(m in t for t in texts) for m in markers}
        if all(counts.values()) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert all(c == 1 for c in counts.values()), counts
    return counts
