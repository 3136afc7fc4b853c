"""The OpenClaw plugin (clients/openclaw) run by Node against a real lcm-server.

Provisions Node 26 and openclaw with npm (tests/openclaw_env.py), starts
``lcm serve`` (embedded: SQLite, in-process worker, offline summarizer) and the
fake Messages API server, then runs ``node --test`` over the plugin's tests:
unit tests, lifecycle tests through OpenClaw's exported host functions, and the
end-to-end test through a real OpenClaw gateway. With ``CI`` set a missing
Node or openclaw fails the run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests import servers
from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.openclaw_env import PLUGIN_DIR, OpenClawEnv, ProvisionError, provision


@pytest.fixture(scope="module")
def openclaw_env() -> OpenClawEnv:
    try:
        return provision()
    except (ProvisionError, OSError, subprocess.SubprocessError) as error:
        if os.environ.get("CI"):
            pytest.fail(f"Node/openclaw unavailable in CI: {error}")
        pytest.skip(f"Node/openclaw unavailable: {error}")


@pytest.fixture(scope="module")
def lcm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    port = servers.free_port()
    env = {
        **os.environ,
        "LCM_HOME": str(tmp_path_factory.mktemp("lcm-home")),
        # Small numbers so a few dozen turns cross the threshold and compact.
        "LCM_FRESH_TAIL_COUNT": "6",
        "LCM_LEAF_MIN_FANOUT": "4",
        "LCM_LEAF_CHUNK_TOKENS": "1500",
        "LCM_LEAF_TARGET_TOKENS": "150",
        "LCM_CONDENSED_TARGET_TOKENS": "200",
        "LCM_TRUNCATION_TOKENS": "200",
        "LCM_CONDENSED_MIN_FANOUT": "3",
    }
    for name in ("LCM_DATABASE_URL", "ANTHROPIC_API_KEY", "LCM_BROKER_URL"):
        env.pop(name, None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "serve", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        key = proc.stdout.readline().strip()
        assert key.startswith("lcm_"), "lcm serve printed no key"
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "lcm serve did not become ready"
            time.sleep(0.2)
        yield base, key
    finally:
        proc.terminate()
        proc.wait(timeout=30)


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
    assert re.search(r"\bfail 0\b", output) and not re.search(r"\bpass 0\b", output), output


def test_fake_messages_api_streams_what_the_sdk_reads(fake_llm: FakeAnthropicServer) -> None:
    import anthropic

    client = anthropic.Anthropic(base_url=fake_llm.base_url, api_key="x", max_retries=0)
    ask = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hello"}]}
    with client.messages.stream(**ask) as stream:  # type: ignore[arg-type]
        streamed = stream.get_final_message()
    plain = client.messages.create(**ask)  # type: ignore[call-overload]
    assert streamed.content[0].text == plain.content[0].text != ""
    assert streamed.stop_reason == "end_turn"
