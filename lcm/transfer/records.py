"""The JSONL export format: one record per line, each with a ``type``.

In file order: one ``conversation`` header, the ``message`` records (by
``seq``, each with its parts), the ``file`` records (contents inline), the
``summary`` records (deepest last, so a summary's parents come before it) and
the ``context_item`` records (by ordinal). Messages are named by ``seq``
everywhere (their database ids are not kept); summaries and files by their
ids.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

FORMAT = "lcm.conversation.v1"


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ConversationRecord(_Record):
    type: Literal["conversation"] = "conversation"
    format: Literal["lcm.conversation.v1"] = "lcm.conversation.v1"
    session_key: str
    session_id: str | None
    archived_at: datetime | None
    created_at: datetime


class PartRecord(_Record):
    ordinal: int
    part_type: str = Field(max_length=32)
    text: str
    tool_call_id: str | None = Field(None, max_length=200)
    payload: dict[str, Any]


class MessageRecord(_Record):
    type: Literal["message"] = "message"
    seq: int = Field(ge=0)
    role: Literal["user", "assistant", "system", "tool"]
    content: str
    content_shape: Literal["text", "blocks"]
    token_count: int = Field(ge=0)
    created_at: datetime
    client_id: str | None = Field(None, max_length=200)
    parts: list[PartRecord]


class FileRecord(_Record):
    type: Literal["file"] = "file"
    id: str = Field(pattern=r"^file_[0-9a-f]{1,35}$")
    message_seq: int | None
    name: str | None = Field(None, max_length=500)
    mime: str | None = Field(None, max_length=200)
    ext: str | None = Field(None, max_length=32)
    token_count: int = Field(ge=0)
    exploration_summary: str | None
    created_at: datetime
    encoding: Literal["utf-8", "base64"]
    content: str


class SummaryRecord(_Record):
    type: Literal["summary"] = "summary"
    id: str = Field(pattern=r"^sum_[0-9a-f]{16}$")
    kind: Literal["leaf", "condensed"]
    depth: int = Field(ge=0)
    content: str
    token_count: int = Field(ge=0)
    source_token_count: int = Field(ge=0)
    earliest_at: datetime
    latest_at: datetime
    descendant_count: int = Field(ge=0)
    file_ids: list[str]
    created_at: datetime
    escalation: str = Field(max_length=16)
    model: str = Field(max_length=100)
    # Why no LLM wrote it (``lcm doctor``); absent in exports made before it existed.
    degraded: str | None = Field(None, max_length=16)
    message_seqs: list[int] = Field(default_factory=list)  # a leaf's sources, in order
    parent_ids: list[str] = Field(default_factory=list)  # a condensed summary's, in order


class ContextItemRecord(_Record):
    type: Literal["context_item"] = "context_item"
    ordinal: int = Field(ge=0)
    item_type: Literal["message", "summary"]
    message_seq: int | None = None
    summary_id: str | None = None
    token_count: int = Field(ge=0)


Record = Annotated[
    ConversationRecord | MessageRecord | FileRecord | SummaryRecord | ContextItemRecord,
    Field(discriminator="type"),
]
RECORD: TypeAdapter[Record] = TypeAdapter(Record)
