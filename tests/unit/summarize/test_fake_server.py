"""The fake Messages API itself: wire shapes, scripting order, and what the SDK makes of it."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from typing import Any

import anthropic
import pytest

from tests.fakes import Behaviour, FakeAnthropicServer


def post(server: FakeAnthropicServer, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(
        f"{server.base_url}/v1/messages",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json", "anthropic-version": "2026-10-21"},
    )
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, dict(resp.headers.items()), resp.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers.items()), err.read()


BODY = {"model": "m", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize(
    ("status", "error_type"),
    [("429", "rate_limit_error"), ("500", "api_error"), ("529", "overloaded_error")],
)
def test_error_replies_have_the_api_shape_and_retry_after(
    fake_anthropic: FakeAnthropicServer, status: str, error_type: str
) -> None:
    fake_anthropic.script([status])
    code, headers, payload = post(fake_anthropic, BODY)
    assert code == int(status)
    assert float(headers["retry-after"]) < 1
    body = json.loads(payload)
    assert body["type"] == "error"
    assert body["error"]["type"] == error_type


def test_ok_reply_has_the_message_shape(fake_anthropic: FakeAnthropicServer) -> None:
    code, _, payload = post(fake_anthropic, BODY)
    message = json.loads(payload)
    assert code == 200
    assert (message["type"], message["role"], message["model"]) == ("message", "assistant", "m")
    assert message["content"][0]["type"] == "text"
    assert "Expand for details about:" in message["content"][0]["text"]
    assert message["stop_reason"] == "end_turn"
    assert set(message["usage"]) >= {"input_tokens", "output_tokens"}


def test_garbage_is_not_json(fake_anthropic: FakeAnthropicServer) -> None:
    fake_anthropic.script(["garbage"])
    _, _, payload = post(fake_anthropic, BODY)
    with pytest.raises(json.JSONDecodeError):
        json.loads(payload)


def test_model_queue_before_shared_queue_before_defaults(
    fake_anthropic: FakeAnthropicServer,
) -> None:
    fake_anthropic.script(["500"])
    fake_anthropic.script(["429"], model="m")
    fake_anthropic.set_default("529", model="m")
    statuses = [post(fake_anthropic, BODY)[0] for _ in range(3)]
    assert statuses == [429, 500, 529]
    assert post(fake_anthropic, {**BODY, "model": "other"})[0] == 200


def test_sampling_parameters_are_refused_like_the_current_api(
    fake_anthropic: FakeAnthropicServer,
) -> None:
    code, _, payload = post(fake_anthropic, {**BODY, "temperature": 0.2})
    assert code == 400
    assert "temperature" in json.loads(payload)["error"]["message"]
    assert len(fake_anthropic.requests) == 1  # refused requests are still recorded


def test_tool_use_reply_parses_in_the_sdk(fake_anthropic: FakeAnthropicServer) -> None:
    fake_anthropic.script([Behaviour.tool_use("expand", {"summary_ids": ["sum_0123"]})])
    client = anthropic.Anthropic(api_key="k", base_url=fake_anthropic.base_url, max_retries=0)
    message = client.messages.create(
        model="m", max_tokens=100, messages=[{"role": "user", "content": "expand it"}]
    )
    assert message.stop_reason == "tool_use"
    block = message.content[0]
    assert block.type == "tool_use"
    assert (block.name, block.input) == ("expand", {"summary_ids": ["sum_0123"]})


def test_unknown_behaviour_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown fake behaviour"):
        Behaviour.parse("teapot")


def test_gathered_replies_wait_for_each_other_then_go_out_together(
    fake_anthropic: FakeAnthropicServer,
) -> None:
    fake_anthropic.gather(3)
    answered: list[float] = []

    def call() -> None:
        assert post(fake_anthropic, BODY)[0] == 200
        answered.append(time.monotonic())

    first = [threading.Thread(target=call) for _ in range(2)]
    for thread in first:
        thread.start()
    time.sleep(0.5)
    assert answered == []  # two of three arrived: both held
    last = threading.Thread(target=call)
    last.start()
    for thread in [*first, last]:
        thread.join(10)
    assert len(answered) == 3
    assert max(answered) - min(answered) < 0.4  # released together, not 0.5 s apart
    started = time.monotonic()
    assert post(fake_anthropic, BODY)[0] == 200  # once: the next request is not held
    assert time.monotonic() - started < 2
