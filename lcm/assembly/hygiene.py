"""What assembly leaves out or shortens: heartbeat acknowledgements and old tool payloads.

Both act on the entries assembly reads, never on what is stored: the
messages stay in ``messages`` and ``context_items``, compaction still
summarizes them (so the conversation stays lossless), and grep, describe
and expand still return them whole.

**Heartbeat turns** (``prune_heartbeat_ok``). A gateway polls idle agents
with a heartbeat prompt; an agent with nothing to report answers
``HEARTBEAT_OK``. Such a cycle is left out of the assembled context when:

* an ``assistant`` message's whole text is ``HEARTBEAT_OK`` (any case), with
  nothing after it but punctuation or whitespace (``HEARTBEAT_OK.``);
* walking back from it, the nearest message that starts a user turn mentions
  ``heartbeat`` (any case: ``[OpenClaw heartbeat poll]``, ``read HEARTBEAT.md``);
* no summary lies between the two.

The whole cycle (the prompt, any tool calls and results in between, the
acknowledgement) is dropped. An acknowledgement that says anything more is
kept: it carried news.

**Old tool payloads** (``stub_large_tool_payloads``). A ``tool_result``
outside the fresh tail whose text exceeds ``stub_tool_payload_tokens`` is
sent as a stub naming the message's seq and size; the agent reads it whole
with ``grep``/``expand`` (or ``describe`` for a stored file). The fresh tail
is always sent verbatim.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from lcm.context import ContextEntry, MessageView, PartView
from lcm.tokens import estimate_tokens

_HEARTBEAT_OK = re.compile(r"\s*heartbeat_ok[\s.!,;:\-]*", re.IGNORECASE)


def is_heartbeat_ok(message: MessageView) -> bool:
    return message.role == "assistant" and bool(_HEARTBEAT_OK.fullmatch(message.content))


def without_heartbeat_turns(entries: Sequence[ContextEntry]) -> list[ContextEntry]:
    """``entries`` without the heartbeat cycles that only answered OK."""
    dropped: set[int] = set()
    for index, entry in enumerate(entries):
        if entry.message is None or not is_heartbeat_ok(entry.message):
            continue
        start = _heartbeat_prompt(entries, index)
        if start is not None:
            dropped.update(range(start, index + 1))
    return [e for i, e in enumerate(entries) if i not in dropped]


def _heartbeat_prompt(entries: Sequence[ContextEntry], ack: int) -> int | None:
    for index in range(ack - 1, -1, -1):
        message = entries[index].message
        if message is None:
            return None  # a summary in between: not one cycle
        if message.starts_user_turn:
            return index if "heartbeat" in message.content.lower() else None
    return None


def stub_tool_payloads(entry: ContextEntry, max_tokens: int) -> ContextEntry:
    """``entry`` with each tool result over ``max_tokens`` replaced by a stub."""
    message = entry.message
    if message is None or not any(p.part_type == "tool_result" for p in message.parts):
        return entry
    parts: list[PartView] = []
    saved = 0
    for part in message.parts:
        tokens = estimate_tokens(part.text) if part.part_type == "tool_result" else 0
        if tokens <= max_tokens:
            parts.append(part)
            continue
        stub = (
            f"[LCM Tool Output: message #{message.seq} | ~{tokens:,} tokens | stubbed in "
            f"assembly; grep or expand message #{message.seq} for the full output]"
        )
        payload: dict[str, Any] = {**part.payload, "content": [{"type": "text", "text": stub}]}
        parts.append(replace(part, payload=payload, text=stub))
        saved += tokens - estimate_tokens(stub)
    if not saved:
        return entry
    stubbed = replace(message, parts=tuple(parts), content_shape="blocks")
    return replace(entry, message=stubbed, token_count=max(1, entry.token_count - saved))
