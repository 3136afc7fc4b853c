"""The replay filter on plain entries: signed reasoning kept only for the model that wrote it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from lcm.assembly.replay import ReplayTarget, without_foreign_reasoning
from lcm.context import ContextEntry
from tests.unit.compaction.builders import Conversation


def by(entry: ContextEntry, provider: str | None, model: str | None) -> ContextEntry:
    assert entry.message is not None
    return replace(entry, message=replace(entry.message, provider=provider, model=model))


def blocks(name: str) -> list[dict[str, Any]]:
    return [
        {"type": "thinking", "thinking": "long reasoning " * 50, "signature": f"S{name}"},
        {"type": "thinking", "thinking": "unsigned"},
        {"type": "redacted_thinking", "data": f"R{name}"},
        {"type": "tool_use", "id": f"t{name}", "name": "read", "input": {}},
    ]


def kinds(entry: ContextEntry) -> list[str]:
    assert entry.message is not None
    return [p.part_type for p in entry.message.parts]


def test_only_the_target_models_signed_blocks_stay() -> None:
    conv = Conversation()
    a = by(conv.add("assistant", blocks("a")), "anthropic", "model-a")
    b = by(conv.add("assistant", blocks("b")), "anthropic", "model-b")
    unknown = conv.add("assistant", blocks("u"))
    entries = [a, b, unknown]
    kept = without_foreign_reasoning(entries, ReplayTarget("anthropic", "model-a"))
    assert kept[0] is a
    assert kinds(kept[1]) == ["thinking", "tool_use"]  # the unsigned one is left alone
    assert kept[1].message is not None
    assert kept[1].message.tool_use_ids == ("tb",)
    assert kept[1].token_count < b.token_count  # what was dropped is not paid for
    assert kept[2] is unknown  # no stored model: its origin is unknown, kept
    again = without_foreign_reasoning(entries, ReplayTarget(model="model-a"))
    assert again[1].message is kept[1].message  # built once, kept on the stored view
    plain = by(conv.assistant("just text"), "anthropic", "model-b")
    assert without_foreign_reasoning([plain], ReplayTarget(model="model-a"))[0] is plain
    assert without_foreign_reasoning(entries, ReplayTarget()) is entries
    prefixed = without_foreign_reasoning([a, b], ReplayTarget("anthropic", "anthropic/model-a"))
    assert prefixed[0] is a
    assert kinds(prefixed[1]) == ["thinking", "tool_use"]
    other_provider = without_foreign_reasoning([a], ReplayTarget("bedrock", "model-a"))
    assert kinds(other_provider[0]) == ["thinking", "tool_use"]
    assert b.message is not None
    assert kinds(b) == ["thinking", "thinking", "redacted_thinking", "tool_use"]  # view intact
