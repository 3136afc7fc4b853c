"""OpenClaw / pi session files, versions 1 to 3 (``session-format.md`` of pi-mono).

Version 1 is a linear list of entries without ids. Versions 2 and 3 link
entries by ``id``/``parentId`` into a tree: the conversation is the path from
the leaf (the last entry written) back to the root, and entries on abandoned
branches are not part of it. Version 3 only renamed the ``hookMessage`` role to
``custom``; both are read.

Converted to the Anthropic-style shape ``/messages`` accepts:

* ``user`` → user; ``assistant`` → assistant (``toolCall`` → ``tool_use``,
  ``thinking`` → ``thinking``); ``toolResult`` → a ``tool`` message holding one
  ``tool_result`` block; images → base64 ``image`` blocks;
* ``bashExecution`` (a command the user ran with ``!``) → a user message
  showing the command and its output, as pi shows it to the model; one the
  user excluded from the context (``!!``) is skipped;
* ``custom`` / ``hookMessage`` messages, ``custom_message`` entries and
  ``branch_summary`` entries take part in pi's model context → user messages;
* ``compaction`` entries (and ``compactionSummary`` messages) are recognised
  and not stored: LCM keeps the messages they summarized, and compacts them
  itself; ``custom``, ``model_change``, ``thinking_level_change``, ``label``
  and ``session_info`` entries carry no conversation content.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from lcm.content import model_identity
from lcm.transcripts.jsonl import Line, as_text
from lcm.transcripts.model import ParseStats, TranscriptMessage

NON_MESSAGE_ENTRIES = frozenset(
    {
        "compaction",
        "custom",
        "model_change",
        "thinking_level_change",
        "label",
        "session_info",
    }
)


def header_of(lines: Sequence[Line]) -> dict[str, Any] | None:
    for line in lines[:1]:
        if line.value.get("type") == "session":
            return line.value
    return None


def session_version(header: dict[str, Any] | None) -> int:
    version = header.get("version") if header else None
    return version if isinstance(version, int) and 1 <= version <= 3 else 1


def active_branch(entries: Sequence[dict[str, Any]], stats: ParseStats) -> list[dict[str, Any]]:
    """The entries from the root to the leaf (the last entry), for a tree-shaped session.

    In an incremental read only the newly appended entries are given: the walk
    stops where it reaches an entry read before, which is where the new part of
    the branch starts.
    """
    by_id = {e["id"]: e for e in entries if isinstance(e.get("id"), str)}
    if not by_id:
        return list(entries)  # no ids at all: a linear (v1-shaped) list
    leaf = next((e for e in reversed(entries) if isinstance(e.get("id"), str)), None)
    path: list[dict[str, Any]] = []
    seen: set[str] = set()
    current = leaf
    while current is not None and current["id"] not in seen:
        seen.add(current["id"])  # a malformed file could hold a cycle
        path.append(current)
        parent = current.get("parentId")
        current = by_id.get(parent) if isinstance(parent, str) else None
    stats.off_branch += len(by_id) - len(path)
    path.reverse()
    return path


def parse_entries(
    entries: Sequence[dict[str, Any]], version: int, stats: ParseStats
) -> list[TranscriptMessage]:
    branch = list(entries) if version < 2 else active_branch(entries, stats)
    messages: list[TranscriptMessage] = []
    for entry in branch:
        message = convert_entry(entry, stats)
        if message is not None:
            messages.append(message)
    return messages


def convert_entry(entry: dict[str, Any], stats: ParseStats) -> TranscriptMessage | None:
    kind = as_text(entry.get("type"))
    entry_id = entry.get("id") if isinstance(entry.get("id"), str) else None
    stamp = entry.get("timestamp")
    if kind == "message" and isinstance(entry.get("message"), dict):
        return _convert_message(entry, entry["message"], entry_id, stats)
    if kind == "custom_message":
        content = _user_content(entry.get("content"))
        return _message(entry, entry_id, "user", content, stamp)
    if kind == "branch_summary":
        text = f"[Summary of a branch this session returned from]\n{as_text(entry.get('summary'))}"
        return _message(entry, entry_id, "user", text, stamp)
    stats.skipped[kind if kind in NON_MESSAGE_ENTRIES else f"entry:{kind or '?'}"] += 1
    return None


def _convert_message(
    entry: dict[str, Any], message: dict[str, Any], entry_id: str | None, stats: ParseStats
) -> TranscriptMessage | None:
    role = as_text(message.get("role"))
    stamp = message.get("timestamp") or entry.get("timestamp")
    if role == "user":
        return _message(entry, entry_id, "user", _user_content(message.get("content")), stamp)
    if role == "assistant":
        blocks = [_assistant_block(b) for b in _blocks(message.get("content"))]
        written = _message(entry, entry_id, "assistant", blocks, stamp)
        return replace(written, **model_identity(message))
    if role == "toolResult":
        result: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": as_text(message.get("toolCallId")),
            "content": [_user_block(b) for b in _blocks(message.get("content"))],
            "is_error": bool(message.get("isError")),
        }
        return _message(entry, entry_id, "tool", [result], stamp)
    if role == "bashExecution":
        if message.get("excludeFromContext"):
            stats.skipped["bash_excluded"] += 1
            return None
        return _message(entry, entry_id, "user", bash_text(message), stamp)
    if role in ("custom", "hookMessage"):
        return _message(entry, entry_id, "user", _user_content(message.get("content")), stamp)
    if role == "branchSummary":
        text = (
            f"[Summary of a branch this session returned from]\n{as_text(message.get('summary'))}"
        )
        return _message(entry, entry_id, "user", text, stamp)
    stats.skipped["compaction" if role == "compactionSummary" else f"role:{role or '?'}"] += 1
    return None


def _message(
    entry: dict[str, Any],
    entry_id: str | None,
    role: str,
    content: str | list[dict[str, Any]],
    stamp: Any,
) -> TranscriptMessage:
    client_id = entry_id or content_id(entry)
    created_at = stamp if isinstance(stamp, str | int | float) and stamp else None
    return TranscriptMessage(client_id, role, content, created_at, entry_id)


def content_id(entry: dict[str, Any]) -> str:
    """A v1 entry's identity: a hash of the entry itself (its timestamps included)."""
    canonical = json.dumps(entry, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return "pi1:" + hashlib.sha256(canonical.encode("utf-8", "replace")).hexdigest()[:32]


def bash_text(message: dict[str, Any]) -> str:
    """A ``!command`` the user ran, as the model was shown it."""
    lines = [f"Ran `{as_text(message.get('command'))}`"]
    output = as_text(message.get("output"))
    lines.append(f"```\n{output.rstrip()}\n```" if output else "(no output)")
    if message.get("cancelled"):
        lines.append("(command cancelled)")
    elif isinstance(message.get("exitCode"), int) and message["exitCode"] != 0:
        lines.append(f"Command exited with code {message['exitCode']}")
    if message.get("truncated"):
        lines.append("[Output truncated]")
    return "\n".join(lines)


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


def _user_content(content: Any) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    return [_user_block(b) for b in _blocks(content)]


def _user_block(block: dict[str, Any]) -> dict[str, Any]:
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "text": as_text(block.get("text"))}
    if kind == "image":
        return {
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": as_text(block.get("mimeType")) or "image/png",
                "data": as_text(block.get("data")),
            },
        }
    return _opaque(block)


def _assistant_block(block: dict[str, Any]) -> dict[str, Any]:
    kind = block.get("type")
    if kind == "toolCall":
        arguments = block.get("arguments")
        return {
            "type": "tool_use",
            "id": as_text(block.get("id")),
            "name": as_text(block.get("name")),
            # The Messages API requires an object; anything else is wrapped.
            "input": arguments if isinstance(arguments, dict) else {"arguments": arguments},
        }
    if kind == "thinking":
        if block.get("redacted"):
            return {"type": "redacted_thinking", "data": as_text(block.get("thinkingSignature"))}
        thinking: dict[str, Any] = {"type": "thinking", "thinking": as_text(block.get("thinking"))}
        if isinstance(block.get("thinkingSignature"), str):
            thinking["signature"] = block["thinkingSignature"]
        return thinking
    if kind == "text":
        return {"type": "text", "text": as_text(block.get("text"))}
    return _opaque(block)


def _opaque(block: dict[str, Any]) -> dict[str, Any]:
    """A block type this converter does not know: kept, as JSON text, so nothing is lost."""
    return {"type": "text", "text": json.dumps(block, ensure_ascii=False, sort_keys=True)}
