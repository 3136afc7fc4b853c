"""A local HTTP server speaking the OpenAI chat-completions API, scriptable per test.

The real ``openai`` SDK is pointed at it (``base_url=server.base_url``, which
ends in ``/v1``), so tests exercise the SDK's retries, error mapping,
parsing and streaming. Scripting is the Messages API fake's
(:class:`tests.fakes.anthropic_server.FakeAnthropicServer`): the same
behaviour strings and :class:`~tests.fakes.anthropic_script.Behaviour`
values, per model or shared, with defaults. What differs is the wire:

- a reply is a ``chat.completion`` (``choices[0].message``, ``usage`` with
  ``prompt_tokens``/``completion_tokens``); ``Behaviour.tool_use`` answers
  with ``tool_calls`` (function name, JSON ``arguments``);
- ``"stream": true`` answers with ``chat.completion.chunk`` SSE events (text
  and tool-call arguments split over several chunks, usage in a last chunk
  when ``stream_options.include_usage``), then ``data: [DONE]``;
- a request carrying ``reasoning_effort`` gets a reasoning model's reply:
  ``reasoning_content`` and an inline ``<think>`` block before the answer,
  both with :data:`THOUGHT`, their tokens in ``completion_tokens`` and
  ``completion_tokens_details.reasoning_tokens``;
- errors carry OpenAI's body (``{"error": {"message", "type", "code"}}``).

Like the real API it refuses (400) a request without ``model`` or
``messages``, one with both ``max_tokens`` and ``max_completion_tokens``,
a tool that is not a function tool, and a ``tool`` message answering no
tool call the conversation made.
"""

from __future__ import annotations

import json
import time
from typing import Any

from lcm.tokens import estimate_tokens
from tests.fakes.anthropic_script import THOUGHT, reply_text, source_of
from tests.fakes.anthropic_server import FakeAnthropicServer

ERROR_TYPES = {400: "invalid_request_error", 401: "invalid_request_error", 429: "requests"}
REASONING_TOKENS = 40


def validate_chat(body: dict[str, Any]) -> str | None:
    """The 400 the real API would give, or ``None``."""
    for required in ("model", "messages"):
        if required not in body:
            return f"Missing required parameter: '{required}'."
    if "max_tokens" in body and "max_completion_tokens" in body:
        return "max_tokens and max_completion_tokens cannot both be set"
    for tool in body.get("tools") or []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if tool.get("type") != "function" or not isinstance(function, dict):
            return "tools: each tool must be {type: function, function: {...}}"
        if not function.get("name") or not isinstance(function.get("parameters"), dict):
            return "tools.function: name and parameters are required"
    asked: set[str] = set()
    for message in body["messages"]:
        for call in message.get("tool_calls") or []:
            asked.add(call.get("id"))
        if message.get("role") == "tool" and message.get("tool_call_id") not in asked:
            return "messages with role 'tool' must be a response to a preceding 'tool_calls'"
    return None


class FakeOpenAiServer(FakeAnthropicServer):
    """The fake chat-completions server; point the SDK at :attr:`base_url` (``…/v1``)."""

    route = "/v1/chat/completions"
    thread_name = "fake-openai"

    @property
    def base_url(self) -> str:
        return super().base_url + "/v1"

    def _reply(
        self, body: dict[str, Any], headers: dict[str, str]
    ) -> tuple[int, dict[str, str], bytes]:
        number = self._record(body, headers)
        problem = validate_chat(body)
        if problem is not None:
            return self.error_reply(400, problem)
        model = str(body["model"])
        behaviour = self._next_behaviour(model)
        if behaviour.delay:
            time.sleep(behaviour.delay)
        if behaviour.kind == "error":
            return self.error_reply(behaviour.status, f"scripted {behaviour.status} for {model}")
        json_headers = {"content-type": "application/json", "x-request-id": f"req_{number}"}
        if behaviour.kind == "garbage":
            return 200, json_headers, b'{"id": "chatcmpl-garbage", "choices": [{'
        if behaviour.kind == "malformed":
            return 200, json_headers, json.dumps({"object": "chat.completion"}).encode()
        if behaviour.kind == "html":
            return 200, {"content-type": "text/html"}, b"<html><body>502 Bad Gateway</body></html>"
        completion = self._completion(body, behaviour, number, model)
        if body.get("stream") is True:
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return 200, {"content-type": "text/event-stream"}, chunks(completion, include_usage)
        return 200, json_headers, json.dumps(completion).encode()

    def _completion(
        self, body: dict[str, Any], behaviour: Any, number: int, model: str
    ) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": None}
        finish = "stop"
        if behaviour.kind == "tool_use":
            message["tool_calls"] = [
                {
                    "id": f"call_fake_{number}",
                    "type": "function",
                    "function": {
                        "name": behaviour.tool_name,
                        "arguments": json.dumps(behaviour.tool_input),
                    },
                }
            ]
            finish = "tool_calls"
        else:
            message["content"] = reply_text(behaviour, source_of(body))
        reasoning = 0
        if "reasoning_effort" in body:
            reasoning = REASONING_TOKENS
            message["reasoning_content"] = THOUGHT
            message["content"] = f"<think>{THOUGHT}</think>\n{message['content'] or ''}"
        output = estimate_tokens(json.dumps(message)) + reasoning
        return {
            "id": f"chatcmpl-fake-{number}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": estimate_tokens(json.dumps(body.get("messages"))),
                "completion_tokens": output,
                "total_tokens": 0,
                "completion_tokens_details": {"reasoning_tokens": reasoning},
            },
        }

    def error_reply(self, status: int, message: str) -> tuple[int, dict[str, str], bytes]:
        kind = ERROR_TYPES.get(status, "server_error")
        body = {"error": {"message": message, "type": kind, "param": None, "code": None}}
        headers = {"content-type": "application/json"}
        if status == 429 or status >= 500:
            headers["retry-after"] = str(self.retry_after)
        return status, headers, json.dumps(body).encode()


def chunks(completion: dict[str, Any], include_usage: bool) -> bytes:
    """The completion as the API streams it: ``chat.completion.chunk`` events, then [DONE]."""
    base = {k: completion[k] for k in ("id", "created", "model")}
    choice = completion["choices"][0]
    message = choice["message"]

    def event(delta: dict[str, Any], finish: str | None = None) -> str:
        data = {
            **base,
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return f"data: {json.dumps(data)}\n\n"

    out = [event({"role": "assistant", "content": ""})]
    if message.get("reasoning_content"):
        out.append(event({"reasoning_content": message["reasoning_content"]}))
    text = message.get("content") or ""
    half = len(text) // 2
    out += [event({"content": part}) for part in (text[:half], text[half:]) if part]
    for index, call in enumerate(message.get("tool_calls") or []):
        arguments = call["function"]["arguments"]
        half = len(arguments) // 2
        head = {"index": index, "id": call["id"], "type": "function"}
        out.append(
            event({"tool_calls": [{**head, "function": {"name": call["function"]["name"]}}]})
        )
        for part in (arguments[:half], arguments[half:]):
            out.append(event({"tool_calls": [{"index": index, "function": {"arguments": part}}]}))
    out.append(event({}, choice["finish_reason"]))
    if include_usage:
        data = {
            **base,
            "object": "chat.completion.chunk",
            "choices": [],
            "usage": completion["usage"],
        }
        out.append(f"data: {json.dumps(data)}\n\n")
    out.append("data: [DONE]\n\n")
    return "".join(out).encode()
