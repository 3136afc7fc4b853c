"""Claude Code transcripts (``~/.claude/projects/…/<session>.jsonl``).

Each ``user`` / ``assistant`` line holds one Messages API message (an
assistant reply is often split over several lines, one content block each,
sharing ``message.id``); each line is stored as one message, keyed by its
``uuid``, so appending a block later never collides with what was imported.

Lines are read in file order. ``parentUuid`` does not describe the
conversation's order: parallel tool results hang off their own ``tool_use``
lines, progress lines sit in the chain, and a resumed session points into
another file. Recognised and not stored:

* sidechain lines (``isSidechain``: a subagent's own conversation), unless the
  whole file is one (a subagent transcript), which is then imported as is;
* compact summaries (``isCompactSummary`` user messages) and their
  ``compact_boundary`` system lines: Claude Code keeps the summarized lines in
  the file, and LCM keeps and compacts them itself;
* ``system``, ``progress``, ``summary`` (titles), ``file-history-snapshot`` and
  ``queue-operation`` lines.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from lcm.content import model_identity
from lcm.transcripts.jsonl import Line, as_text
from lcm.transcripts.model import ParseStats, TranscriptMessage
from lcm.transcripts.openclaw import content_id

MESSAGE_TYPES = frozenset({"user", "assistant"})
_PASSTHROUGH = frozenset({"text", "image", "document", "tool_use", "redacted_thinking"})


def is_sidechain_only(lines: Sequence[Line]) -> bool:
    """True for a subagent transcript: every message line is a sidechain line."""
    messages = [ln.value for ln in lines if ln.value.get("type") in MESSAGE_TYPES]
    return bool(messages) and all(m.get("isSidechain") for m in messages)


def session_id_of(lines: Sequence[Line]) -> str | None:
    for line in lines:
        value = line.value.get("sessionId")
        if isinstance(value, str) and value:
            return value
    return None


def parse_lines(
    lines: Sequence[Line], stats: ParseStats, *, sidechain_only: bool
) -> list[TranscriptMessage]:
    messages: list[TranscriptMessage] = []
    for line in lines:
        value = line.value
        kind = as_text(value.get("type"))
        if kind not in MESSAGE_TYPES or not isinstance(value.get("message"), dict):
            subtype = as_text(value.get("subtype"))
            stats.skipped["compaction" if subtype == "compact_boundary" else kind or "?"] += 1
            continue
        if value.get("isSidechain") and not sidechain_only:
            stats.skipped["sidechain"] += 1
            continue
        if value.get("isCompactSummary"):
            stats.skipped["compact_summary"] += 1
            continue
        messages.append(_convert(value, kind))
    return messages


def _convert(value: dict[str, Any], kind: str) -> TranscriptMessage:
    message = value["message"]
    role = as_text(message.get("role")) or kind
    if role not in MESSAGE_TYPES:
        role = kind
    content = message.get("content")
    converted: str | list[dict[str, Any]]
    if isinstance(content, str):
        converted = content
    else:
        converted = [_block(b) for b in content if isinstance(b, dict)] if content else []
    uuid = value.get("uuid") if isinstance(value.get("uuid"), str) else None
    stamp = value.get("timestamp")
    return TranscriptMessage(
        client_id=uuid or content_id(value),
        role=role,
        content=converted,
        created_at=stamp if isinstance(stamp, str) and stamp else None,
        entry_id=uuid,
        **_identity(role, message),
    )


def _identity(role: str, message: dict[str, Any]) -> dict[str, str]:
    """What wrote an assistant message: Claude Code talks to Anthropic's models only."""
    named = model_identity(message) if role == "assistant" else {}
    return {"provider": "anthropic", **named} if "model" in named else {}


def _block(block: dict[str, Any]) -> dict[str, Any]:
    kind = block.get("type")
    if kind == "thinking":
        thinking: dict[str, Any] = {"type": "thinking", "thinking": as_text(block.get("thinking"))}
        if isinstance(block.get("signature"), str):
            thinking["signature"] = block["signature"]
        return thinking
    if kind == "tool_result":
        result = {
            "type": "tool_result",
            "tool_use_id": as_text(block.get("tool_use_id")),
            "content": _result_content(block.get("content")),
        }
        if isinstance(block.get("is_error"), bool):
            result["is_error"] = block["is_error"]
        return result
    if kind in _PASSTHROUGH:
        return block
    return {"type": "text", "text": json.dumps(block, ensure_ascii=False, sort_keys=True)}


def _result_content(content: Any) -> str | list[dict[str, Any]]:
    if isinstance(content, str) or content is None:
        return content or ""
    if not isinstance(content, list):
        return json.dumps(content, ensure_ascii=False)
    blocks = []
    for inner in content:
        if isinstance(inner, dict) and inner.get("type") in ("text", "image"):
            blocks.append(inner)
        else:
            blocks.append({"type": "text", "text": json.dumps(inner, ensure_ascii=False)})
    return blocks
