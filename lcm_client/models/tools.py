"""Agent tool bodies: grep, describe, expand, expand-query."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from lcm_client.models.base import (
    MAX_GREP_LIMIT,
    GrepMode,
    GrepScope,
    GrepSort,
    NodeIds,
    RequestBody,
    RowId,
    SessionKeyText,
    Text,
    Tokens,
    UtcDatetime,
)

# --- agent tools: grep, describe, expand, expand-query --------------------------------------


class ScopeIn(RequestBody):
    """Exactly one of: a session family, one conversation, every conversation of the tenant."""

    session_key: SessionKeyText | None = None
    conversation_id: RowId | None = None
    all_conversations: bool = False


FileIdText = Annotated[Text, Field(pattern=r"^file_[0-9a-f]{1,35}$")]


class GrepIn(ScopeIn):
    pattern: Annotated[Text, Field(min_length=1)]
    mode: GrepMode = "regex"
    scope: GrepScope = "both"
    sort: GrepSort = "recency"
    limit: int = Field(50, ge=1, le=MAX_GREP_LIMIT)
    since: UtcDatetime | None = None
    before: UtcDatetime | None = None
    # Only these stored files (a files search: leave ``scope`` out or send "files").
    file_ids: Annotated[list[FileIdText], Field(min_length=1, max_length=100)] | None = None
    # With a token cap: the summary hits' source messages, expanded in the same call.
    expand_sources: int | None = Field(None, ge=1, le=1_000_000)


class GrepMatch(BaseModel):
    type: Literal["message", "summary", "file"]
    id: int | str
    ref: str  # "msg_<id>" or the summary id: what expand-query answers cite
    conversation_id: int
    seq: int | None
    created_at: datetime
    snippet: str
    score: float | None
    role: str | None = None
    kind: str | None = None
    depth: int | None = None
    latest_at: datetime | None = None
    line: int | None = None  # file matches: the 1-based line number


class GrepResult(BaseModel):
    matches: list[GrepMatch]
    mode: GrepMode
    sort: GrepSort
    # False when the regex scan hit its time budget before reading every candidate.
    complete: bool = True
    scanned: int | None = None
    notes: list[str] = Field(default_factory=list)
    # The source messages of the summary hits (``expand_sources``), as /v1/expand.
    sources: Expansion | None = None


class SourceRange(BaseModel):
    """The raw messages a summary covers (through every level below it)."""

    message_count: int
    first_seq: int | None
    last_seq: int | None


class SummaryDescription(BaseModel):
    id: str
    conversation_id: int
    session_key: str | None
    kind: str
    depth: int
    content: str
    token_count: int
    source_token_count: int
    descendant_count: int
    earliest_at: datetime
    latest_at: datetime
    created_at: datetime
    escalation: str
    model: str
    file_ids: list[str]
    parents: list[str]
    children: list[str]
    source_messages: SourceRange
    in_context: bool
    # An operator's rewrite: when the last one was, how many (added fields).
    rewritten_at: datetime | None = None
    rewrites: int = 0


class FileContent(BaseModel):
    """One page of a large file's text: characters ``[offset, offset + len(text))``."""

    text: str
    offset: int
    total_chars: int
    next_offset: int | None  # None once the page reaches the end
    # "base64" for an image (the text is its bytes, encoded), else "utf-8".
    encoding: str = "utf-8"


class FileDescription(BaseModel):
    id: str
    conversation_id: int
    name: str | None
    mime: str | None
    ext: str | None
    byte_size: int
    token_count: int
    exploration_summary: str | None
    created_at: datetime
    message_seq: int | None
    cited_by: list[str]
    content: FileContent | None = None


class ExpandIn(RequestBody):
    summary_ids: Annotated[NodeIds, Field(min_length=1)]
    token_cap: Tokens | None = None


class ExpandedNode(BaseModel):
    id: str
    kind: str
    depth: int
    conversation_id: int
    earliest_at: datetime
    latest_at: datetime
    descendant_count: int
    token_count: int
    parents: list[str]


class ExpandedMessage(BaseModel):
    id: int
    ref: str
    conversation_id: int
    seq: int
    role: str
    created_at: datetime
    token_count: int
    summary_id: str  # the leaf summary it was summarized into
    message: dict[str, Any]  # exactly as sent: {"role", "content": str | blocks}


class Omitted(BaseModel):
    messages: int = 0
    tokens: int = 0
    first_seq: int | None = None
    last_seq: int | None = None
    leaf_ids: list[str] = Field(default_factory=list)
    leaf_count: int = 0


class Expansion(BaseModel):
    nodes: list[ExpandedNode]
    messages: list[ExpandedMessage]
    token_cap: int
    tokens: int
    truncated: bool
    omitted: Omitted


class ExpandQueryIn(ScopeIn):
    """One question. ``session_key`` beside ``all_conversations`` names the caller's session.

    ``timeout_ms`` bounds the whole call (every conversation it expands); a
    value above the server's ``expand_query_timeout_seconds`` is capped to it.
    """

    prompt: Annotated[Text, Field(min_length=1, max_length=20_000)]
    query: Annotated[Text, Field(min_length=1, max_length=2_000)] | None = None
    summary_ids: NodeIds = Field(default_factory=list)
    max_tokens: int = Field(2_000, ge=1, le=16_000)
    timeout_ms: int | None = Field(None, ge=1, le=3_600_000)


class Usage(BaseModel):
    model: str
    input_tokens: int
    output_tokens: int
    provider: str = ""


class OutcomeError(BaseModel):
    code: str
    message: str


class ConversationOutcome(BaseModel):
    """How one conversation of an expand-query went."""

    conversation_id: int
    session_key: str | None
    status: Literal["answered", "no_match", "timed_out", "skipped_budget", "error"]
    score: float | None = None  # its best match's relevance (null: not ranked)
    elapsed_ms: int = 0
    tokens: int = 0  # read from its history, debited from the shared budget
    error: OutcomeError | None = None


class ExpandQueryAnswer(BaseModel):
    answer: str
    cited_ids: list[str]
    offline: bool
    model: str
    turns: int
    tokens_read: int
    usage: list[Usage] = Field(default_factory=list)
    source_conversation_ids: list[int] = Field(default_factory=list)
    conversations: list[ConversationOutcome] = Field(default_factory=list)
    truncated: bool = False
    timeout_ms: int | None = None  # the deadline the call ran under
