"""Pure rules of sessions and content hygiene: session globs, model rules, tag stripping."""

from __future__ import annotations

import pytest

from lcm.compaction.hygiene import strip_injected_context
from lcm.content import IncomingMessage, prepare_message
from lcm.conversations.patterns import matches_any, write_skip
from lcm.policy.overrides import for_model
from lcm.settings import CompactionSettings, ModelOverride


@pytest.mark.parametrize(
    ("key", "pattern", "expected"),
    [
        ("agent:main:cron:nightly", "agent:*:cron:**", True),
        ("agent:main:cron:a:b/c", "agent:*:cron:**", True),
        ("agent:main:sub:cron:x", "agent:*:cron:**", False),
        ("agent:a/b:cron:x", "agent:*:cron:**", False),
        ("agent:x:y:active-memory:z", "agent:*:**:active-memory:**", True),
        ("agent:main:dreaming-narrative-7", "agent:*:dreaming-narrative-**", True),
        ("agent.main", "agent?main", False),  # only * and ** are special
    ],
)
def test_session_globs(key: str, pattern: str, expected: bool) -> None:
    assert matches_any(key, [pattern]) is expected


def test_ignore_wins_over_stateless() -> None:
    settings = CompactionSettings(
        ignore_session_patterns=["a:**"], stateless_session_patterns=["a:**", "b:*"]
    )
    assert write_skip(settings, "a:1") == "ignored"
    assert write_skip(settings, "b:1") == "stateless"
    assert write_skip(settings, "c:1") is None


def test_model_rules_first_then_window_rules() -> None:
    settings = CompactionSettings(
        model_overrides=[
            ModelOverride(context_window_min=500_000, fresh_tail_count=8),
            ModelOverride(model="claude-*", context_threshold=0.5),
            ModelOverride(model="claude-opus-*", context_threshold=0.2),
            ModelOverride(fresh_tail_count=1),  # no matcher: matches nothing
        ]
    )
    assert for_model(settings, "claude-opus-4", 1_000_000).context_threshold == 0.5
    assert for_model(settings, "claude-opus-4", 1_000_000).fresh_tail_count == 64
    assert for_model(settings, "gpt-5", 1_000_000).fresh_tail_count == 8
    assert for_model(settings, "gpt-5", None) is settings
    assert for_model(settings, None, 100) is settings


def test_strip_injected_context() -> None:
    text = (
        "<relevant-memories kind='x'>\nold fact\n</relevant-memories>\n"
        "real question <b>bold</b>\n<hindsight_memories>x</hindsight_memories> tail"
    )
    tags = ["relevant-memories", "hindsight_memories"]
    assert strip_injected_context(text, tags) == "real question <b>bold</b>\ntail"
    assert strip_injected_context(text, []) == text
    unclosed = "<relevant-memories>never closed"
    assert strip_injected_context(unclosed, tags) == unclosed


def test_event_keys() -> None:
    def key(content: object, response_id: str | None = None) -> str | None:
        message = IncomingMessage("assistant", content, None, None, response_id)  # type: ignore[arg-type]
        return prepare_message(message, "m", 10_000).client_id

    call = [{"type": "tool_use", "id": "toolu_1", "name": "read", "input": {}}]
    assert key("plain text") is None
    assert key(call) == key(call)
    assert key(call, "msg_1") != key(call)
    assert str(key(call)).startswith("evt:")
    other = [{**call[0], "input": {"path": "b"}}]
    assert key(other) != key(call)
