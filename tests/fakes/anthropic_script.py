"""What the fake Messages API server can be told to do, and what it records.

Kept apart from the HTTP plumbing in :mod:`tests.fakes.anthropic_server`:
this is the part a test reads to know which behaviours exist.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    503: "api_error",
    529: "overloaded_error",
}
_SAMPLING_PARAMS = ("temperature", "top_p", "top_k")
_SAMPLING_API_VERSION = "2023-06-01"
_SOURCE_RE = re.compile(r"<source[^>]*>\n?(.*?)\n?</source>", re.DOTALL)
_TOPIC_RE = re.compile(r"\b[A-Z][A-Za-z]{2,}\b|[\w.-]+/[\w./-]+")


@dataclass(frozen=True)
class Behaviour:
    """One scripted reply: ``kind`` with its parameters."""

    kind: str  # ok | text | empty | oversized | garbage | malformed | html | error | tool_use
    delay: float = 0.0
    status: int = 200
    text: str = ""
    tool_name: str = ""
    tool_input: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def ok(cls, delay: float = 0.0) -> Behaviour:
        return cls("ok", delay=delay)

    @classmethod
    def reply(cls, text: str) -> Behaviour:
        return cls("text", text=text)

    @classmethod
    def error(cls, status: int) -> Behaviour:
        return cls("error", status=status)

    @classmethod
    def tool_use(cls, name: str, tool_input: dict[str, Any]) -> Behaviour:
        """A reply asking the client to call tool ``name`` (for the expand-query loop)."""
        return cls("tool_use", tool_name=name, tool_input=tool_input)

    @classmethod
    def parse(cls, spec: str | Behaviour) -> Behaviour:
        if isinstance(spec, Behaviour):
            return spec
        if spec.isdigit():
            return cls.error(int(spec))
        if spec.startswith("latency:"):
            return cls.ok(delay=float(spec.split(":", 1)[1]))
        if spec.startswith("text:"):
            return cls.reply(spec.split(":", 1)[1])
        if spec in ("ok", "empty", "oversized", "garbage", "malformed", "html"):
            return cls(spec)
        raise ValueError(f"unknown fake behaviour {spec!r}")


@dataclass(frozen=True)
class RecordedRequest:
    """What the server received for one ``POST /v1/messages``."""

    model: str | None
    temperature: float | None
    system: Any
    messages: list[Any]
    max_tokens: int | None
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def user_text(self) -> str:
        """All text of all messages, joined (string or block content)."""
        return "\n".join(message_text(message) for message in self.messages)


def message_text(message: Any) -> str:
    # A chat-completions assistant turn that only calls tools has "content": null.
    content = (message.get("content") or "") if isinstance(message, dict) else ""
    if isinstance(content, str):
        return content
    return "\n".join(block.get("text", "") for block in content if isinstance(block, dict))


def validate(body: dict[str, Any], headers: dict[str, str]) -> str | None:
    """The 400 the real API would give, or ``None``."""
    for required in ("model", "max_tokens", "messages"):
        if required not in body:
            return f"{required}: Field required"
    version = headers.get("anthropic-version")
    for param in _SAMPLING_PARAMS:
        if param in body and version != _SAMPLING_API_VERSION:
            return f"{param}: Extra inputs are not permitted"
    thinking = body.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") == "enabled":
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int) or budget < 1024:
            return "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
        if budget >= int(body["max_tokens"]):
            return "`max_tokens` must be greater than `thinking.budget_tokens`"
        if body.get("temperature", 1) != 1:
            return "`temperature` may only be set to 1 when thinking is enabled"
    return None


# What the fake "thinks" when asked to: a summary must never contain it.
THOUGHT = "THOUGHT-7f3a: let me reason privately about the source before writing"


def thinking_enabled(body: dict[str, Any]) -> bool:
    thinking = body.get("thinking")
    return isinstance(thinking, dict) and thinking.get("type") == "enabled"


def source_of(body: dict[str, Any]) -> str:
    """The text inside the prompt's ``<source>`` block (or all message text)."""
    messages = body.get("messages") or []
    text = "\n".join(message_text(m) for m in messages if isinstance(m, dict))
    match = _SOURCE_RE.search(text)
    return match.group(1) if match else text


def reply_text(behaviour: Behaviour, source: str) -> str:
    """The reply for text behaviours; ``ok`` is a short gist of the source plus a footer."""
    if behaviour.kind == "text":
        return behaviour.text
    if behaviour.kind == "empty":
        return ""
    if behaviour.kind == "oversized":
        return "\n".join([source] * 3)
    words = source.split()
    topics = list(dict.fromkeys(_TOPIC_RE.findall(source)))[:4] or ["the span"]
    gist = " ".join(words[:30]) if len(words) > 1 else source[:60]
    return (
        f"Summary of {len(source.splitlines())} lines: {gist} ...\n"
        f"Expand for details about: {', '.join(topics)}"
    )
