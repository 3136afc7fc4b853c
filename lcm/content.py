"""Turn what a gateway sends into rows: validated blocks, ordered parts, plain text.

A message's content is either a string or a list of Anthropic-style blocks.
Blocks are stored as sent (one ``message_parts`` row each, in order) so the
provider-format message can be rebuilt exactly; the plain-text extraction and
the token estimate are derived from them for search and budgeting.

Text that no database can store faithfully is refused with a clear error naming
the field: NUL characters (Postgres ``text`` and ``jsonb`` reject them) and lone
UTF-16 surrogates (not encodable as UTF-8). Refusing keeps the promise that what
we stored is exactly what was sent.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from lcm.errors import InvalidInput, TooLarge
from lcm.storable import check_storable
from lcm.tokens import estimate_tokens

ROLES = ("user", "assistant", "system", "tool")
BLOCK_TYPES = (
    "text",
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
    "image",
    "document",
    "file",
)
# Images are billed by pixels, not characters; this is a conservative flat
# estimate so budgets stay honest without decoding the image.
IMAGE_TOKEN_ESTIMATE = 1_500


@dataclass(frozen=True)
class IncomingMessage:
    """One message as the gateway sent it, before validation."""

    role: str
    content: str | list[Any]
    client_id: str | None = None
    created_at: str | int | float | None = None
    # The provider's id of the response this message is (assistant messages).
    response_id: str | None = None
    # The provider and model that wrote it (assistant messages): signed
    # thinking is replayed only to that model (lcm.assembly.replay).
    provider: str | None = None
    model: str | None = None


# Prefix of a client id derived from a message's event ids (never a gateway's own).
EVENT_KEY_PREFIX = "evt:"


@dataclass(frozen=True)
class PartRow:
    part_type: str
    text: str
    tool_call_id: str | None
    payload: dict[str, Any]


@dataclass(frozen=True)
class PreparedMessage:
    """A validated message, ready to be written."""

    role: str
    content: str
    content_shape: str
    token_count: int
    client_id: str | None
    created_at: datetime | None
    parts: list[PartRow] = field(default_factory=list)
    provider: str | None = None
    model: str | None = None


def event_key(role: str, content: str, parts: list[PartRow], response_id: str | None) -> str | None:
    """A stable idempotency key for a message sent without ``id``, or ``None``.

    Built from the ids the provider minted for the event: the response id,
    else the tool call ids the message makes or answers. The role and the
    plain text are part of the key, so a model that reuses a tool call id in
    a later turn with a different result is a different message, while a
    replay of the same event (same ids, same content) is a duplicate.
    """
    ids = [response_id] if response_id else [p.tool_call_id for p in parts if p.tool_call_id]
    if not ids:
        return None
    material = json.dumps([role, ids, content], ensure_ascii=False)
    return EVENT_KEY_PREFIX + hashlib.sha256(material.encode("utf-8")).hexdigest()[:40]


def parse_timestamp(value: str | int | float | None, where: str) -> datetime | None:
    """ISO-8601 (naive means UTC) or Unix epoch seconds / milliseconds."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise InvalidInput(f"{where} must be an ISO-8601 string or a Unix timestamp")
    if isinstance(value, int | float):
        seconds = value / 1000 if abs(value) >= 1e11 else value
        try:
            return datetime.fromtimestamp(seconds, UTC)
        except (OverflowError, OSError, ValueError) as exc:
            raise InvalidInput(f"{where} is out of range: {value!r}") from exc
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00", 1))
    except ValueError as exc:
        raise InvalidInput(f"{where} is not an ISO-8601 timestamp: {value[:64]!r}") from exc
    return to_utc(parsed, where)


def to_utc(value: datetime, where: str) -> datetime:
    """``value`` in UTC (naive means UTC); 400 when UTC falls outside years 1-9999."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError as exc:  # e.g. 0001-01-01T00:00:00+14:00 is before year 1 in UTC
        raise InvalidInput(f"{where} is out of range in UTC: {value.isoformat()}") from exc


def _require_str(block: dict[str, Any], key: str, where: str) -> str:
    value = block.get(key)
    if not isinstance(value, str):
        raise InvalidInput(f"{where}.{key} must be a string")
    return value


def _tool_result_text(content: Any, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise InvalidInput(f"{where}.content must be a string or a list of blocks")
    texts = []
    for i, inner in enumerate(content):
        inner_where = f"{where}.content[{i}]"
        if not isinstance(inner, dict) or not isinstance(inner.get("type"), str):
            raise InvalidInput(f"{inner_where} must be an object with a string 'type'")
        if inner["type"] == "text":
            texts.append(_require_str(inner, "text", inner_where))
        elif inner["type"] == "image":
            texts.append("[image]")
    return "\n".join(texts)


def _document_text(block: dict[str, Any]) -> str:
    source = block.get("source")
    title = block.get("title") or block.get("name") or ""
    if isinstance(source, dict) and source.get("type") == "text":
        data = source.get("data")
        if isinstance(data, str):
            return data
    if isinstance(block.get("text"), str):
        return str(block["text"])
    return f"[{block['type']} {title}]".replace(" ]", "]")


def parse_block(block: Any, where: str) -> PartRow:
    """Validate one block and derive its part row."""
    if not isinstance(block, dict):
        raise InvalidInput(f"{where} must be an object")
    kind = block.get("type")
    if kind not in BLOCK_TYPES:
        raise InvalidInput(
            f"{where}.type must be one of {', '.join(BLOCK_TYPES)}; got {str(kind)[:40]!r}"
        )
    tool_call_id: str | None = None
    if kind == "text":
        text = _require_str(block, "text", where)
    elif kind == "tool_use":
        tool_call_id = _require_str(block, "id", where)
        name = _require_str(block, "name", where)
        tool_input = block.get("input", {})
        if not isinstance(tool_input, dict):
            raise InvalidInput(f"{where}.input must be an object")
        text = f"[tool_use {name}] {json.dumps(tool_input, ensure_ascii=False, sort_keys=True)}"
    elif kind == "tool_result":
        tool_call_id = _require_str(block, "tool_use_id", where)
        if "is_error" in block and not isinstance(block["is_error"], bool):
            raise InvalidInput(f"{where}.is_error must be a boolean")
        text = _tool_result_text(block.get("content"), where)
    elif kind == "thinking":
        text = _require_str(block, "thinking", where)
    elif kind == "redacted_thinking":
        _require_str(block, "data", where)
        text = ""
    elif kind == "image":
        if not isinstance(block.get("source"), dict):
            raise InvalidInput(f"{where}.source must be an object")
        text = "[image]"
    else:
        text = _document_text(block)
    return PartRow(part_type=kind, text=text, tool_call_id=tool_call_id, payload=block)


def prepare_message(message: IncomingMessage, where: str, max_chars: int) -> PreparedMessage:
    """Validate one incoming message; raise ``InvalidInput`` naming the bad field."""
    if message.role not in ROLES:
        raise InvalidInput(f"{where}.role must be one of {', '.join(ROLES)}")
    if message.client_id is not None:
        check_storable(message.client_id, f"{where}.id")
    if message.response_id is not None:
        check_storable(message.response_id, f"{where}.response_id")
    _check_model_identity(message, where)
    created_at = parse_timestamp(message.created_at, f"{where}.created_at")
    check_storable(message.content, f"{where}.content")
    if isinstance(message.content, str):
        parts = [PartRow("text", message.content, None, {"type": "text", "text": message.content})]
        shape = "text"
    elif isinstance(message.content, list):
        parts = [parse_block(b, f"{where}.content[{i}]") for i, b in enumerate(message.content)]
        shape = "blocks"
    else:
        raise InvalidInput(f"{where}.content must be a string or a list of blocks")
    content = "\n".join(p.text for p in parts if p.text)
    if len(content) > max_chars:
        raise TooLarge(f"{where} has {len(content)} characters of text; the limit is {max_chars}")
    images = sum(1 for p in parts if p.part_type == "image")
    return PreparedMessage(
        role=message.role,
        content=content,
        content_shape=shape,
        token_count=estimate_tokens(content) + images * IMAGE_TOKEN_ESTIMATE,
        client_id=message.client_id or event_key(message.role, content, parts, message.response_id),
        created_at=created_at,
        parts=parts,
        provider=message.provider,
        model=message.model,
    )


# The longest provider and model names stored (messages.provider / .model).
MODEL_IDENTITY_LIMITS = {"provider": 100, "model": 200}


def _check_model_identity(message: IncomingMessage, where: str) -> None:
    """``provider``/``model`` name what wrote an assistant message; nothing else has one."""
    for name, limit in MODEL_IDENTITY_LIMITS.items():
        value = getattr(message, name)
        if value is None:
            continue
        if message.role != "assistant":
            raise InvalidInput(f"{where}.{name} is for assistant messages only")
        if not isinstance(value, str) or not 1 <= len(value) <= limit:
            raise InvalidInput(f"{where}.{name} must be a string of 1 to {limit} characters")
        check_storable(value, f"{where}.{name}")


def model_identity(source: Any) -> dict[str, str]:
    """The ``provider``/``model`` strings a transcript's assistant message names, if usable."""
    found: dict[str, str] = {}
    if isinstance(source, dict):
        for name, limit in MODEL_IDENTITY_LIMITS.items():
            value = source.get(name)
            if isinstance(value, str) and 1 <= len(value) <= limit:
                found[name] = value
    return found
