"""The JSONL export format: one record per line, each with a ``type``.

In file order: one ``conversation`` header, the ``message`` records (by
``seq``, each with its parts), the ``file`` records (contents inline), the
``summary`` records (deepest last, so a summary's parents come before it) and
the ``context_item`` records (by ordinal). Messages are named by ``seq``
everywhere (their database ids are not kept); summaries and files by their
ids.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, TypeAdapter

FORMAT = "lcm.conversation.v1"

# The bounds of the columns the records land in: token counts, depths and
# part ordinals are 32-bit; seqs and context ordinals are 64-bit, but kept
# within what a JSON client reads exactly (2**53) and far from where the next
# ingest's counter would overflow.
INT32_MAX = 2**31 - 1
POSITION_MAX = 2**53 - 1


def _utc(value: datetime) -> datetime:
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError as exc:  # e.g. 0001-01-01T00:00:00+14:00 is before year 1 in UTC
        raise ValueError("out of range in UTC") from exc


UtcTime = Annotated[datetime, AfterValidator(_utc)]
Count = Annotated[int, Field(ge=0, le=INT32_MAX)]
Position = Annotated[int, Field(ge=0, le=POSITION_MAX)]
SummaryId = Annotated[str, Field(pattern=r"^sum_[0-9a-f]{16}$")]
FileId = Annotated[str, Field(pattern=r"^file_[0-9a-f]{1,35}$")]


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ConversationRecord(_Record):
    type: Literal["conversation"] = "conversation"
    format: Literal["lcm.conversation.v1"] = "lcm.conversation.v1"
    session_key: str = Field(max_length=512)
    session_id: str | None = Field(min_length=1, max_length=200)
    archived_at: UtcTime | None
    created_at: UtcTime


class PartRecord(_Record):
    ordinal: Count
    part_type: str = Field(max_length=32)
    text: str
    tool_call_id: str | None = Field(None, max_length=200)
    payload: dict[str, Any]


class MessageRecord(_Record):
    type: Literal["message"] = "message"
    seq: Position
    role: Literal["user", "assistant", "system", "tool"]
    content: str
    content_shape: Literal["text", "blocks"]
    token_count: Count
    created_at: UtcTime
    client_id: str | None = Field(None, max_length=200)
    parts: list[PartRecord]
    # What wrote an assistant message (absent from exports made before).
    provider: str | None = Field(None, min_length=1, max_length=100)
    model: str | None = Field(None, min_length=1, max_length=200)


class FileRecord(_Record):
    type: Literal["file"] = "file"
    id: FileId
    message_seq: Position | None
    name: str | None = Field(None, max_length=500)
    mime: str | None = Field(None, max_length=200)
    ext: str | None = Field(None, max_length=32)
    token_count: Count
    exploration_summary: str | None
    created_at: UtcTime
    encoding: Literal["utf-8", "base64"]
    content: str


class SummaryRecord(_Record):
    type: Literal["summary"] = "summary"
    id: SummaryId
    kind: Literal["leaf", "condensed"]
    depth: Count
    content: str
    token_count: Count
    source_token_count: Count
    earliest_at: UtcTime
    latest_at: UtcTime
    descendant_count: Count
    file_ids: list[FileId]
    created_at: UtcTime
    escalation: Literal["normal", "aggressive", "fallback"]
    model: str = Field(max_length=100)
    # Why no LLM wrote it (``lcm doctor``); absent in exports made before it existed.
    degraded: str | None = Field(None, max_length=16)
    message_seqs: list[Position] = Field(default_factory=list)  # a leaf's sources, in order
    parent_ids: list[SummaryId] = Field(default_factory=list)  # a condensed summary's, in order


class ContextItemRecord(_Record):
    type: Literal["context_item"] = "context_item"
    ordinal: Position
    item_type: Literal["message", "summary"]
    message_seq: Position | None = None
    summary_id: SummaryId | None = None
    token_count: Count


Record = Annotated[
    ConversationRecord | MessageRecord | FileRecord | SummaryRecord | ContextItemRecord,
    Field(discriminator="type"),
]
RECORD: TypeAdapter[Record] = TypeAdapter(Record)
