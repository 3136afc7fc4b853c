"""Conversation bodies: ingest, turns, assemble, compact, sessions, bootstrap, lifecycle."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from lcm_client.models.base import (
    MAX_TOKENS,
    Compaction,
    RequestBody,
    SessionIdText,
    SessionKeyText,
    Text,
    TokenBudget,
    Tokens,
)

# --- conversations: ingest, turns, assemble, compact, bootstrap ---------------------------


class MessageIn(RequestBody):
    """One message; fields other than these are refused (400), never dropped."""

    role: Literal["user", "assistant", "system", "tool"]
    content: str | list[Any]
    # The client's id: re-sending it never stores a second row (a retried batch is safe).
    id: Annotated[Text, Field(min_length=1, max_length=200)] | None = None
    # ISO-8601 (naive means UTC) or Unix seconds / milliseconds.
    created_at: str | int | float | None = None
    # Without ``id``: the provider's response id makes re-sending it safe (as
    # tool call ids do for tool messages).
    response_id: Annotated[Text, Field(min_length=1, max_length=200)] | None = None
    # Assistant messages only: the provider and model that wrote it. Signed
    # thinking is replayed only to an assemble call naming the same model.
    provider: Annotated[Text, Field(min_length=1, max_length=100)] | None = None
    model: Annotated[Text, Field(min_length=1, max_length=200)] | None = None


HOST_CURSOR_MAX = 8192  # characters (the server's column length)


class BatchIn(RequestBody):
    """A batch of messages for one conversation of the session family."""

    session_id: SessionIdText | None = None
    messages: list[MessageIn]


class MessagesIn(BatchIn):
    # The host's opaque transcript cursor after the batch's last entry: stored
    # on the conversation with the batch (not if it is refused), read back by
    # ``GET …/host-cursor``. With no messages it only moves the cursor.
    host_cursor: Annotated[Text, Field(min_length=1, max_length=HOST_CURSOR_MAX)] | None = None


class SkippedWrite(BaseModel):
    """Set when the session key matches a tenant pattern and nothing was written.

    ``ignored``: ``ignore_session_patterns``; ``stateless``:
    ``stateless_session_patterns``. ``conversation_id`` is then null.
    """

    ignored: bool = False
    stateless: bool = False


class MessagesOut(SkippedWrite):
    conversation_id: int | None
    ingested: int
    duplicates: int


class ModelIn(RequestBody):
    """The model a call serves: selects a ``model_overrides`` rule of the tenant."""

    model: Annotated[Text, Field(min_length=1, max_length=200)] | None = None
    context_window: TokenBudget | None = None


UsageTokens = Annotated[int, Field(ge=0, le=MAX_TOKENS)]


class TurnUsageIn(RequestBody):
    """What the host's model call of the turn used, as its provider reported it.

    ``input_tokens``: prompt tokens billed at the full rate; ``cache_read_tokens``
    and ``cache_write_tokens``: prompt tokens the provider's cache served and stored.
    """

    input_tokens: UsageTokens = 0
    output_tokens: UsageTokens = 0
    cache_read_tokens: UsageTokens = 0
    cache_write_tokens: UsageTokens = 0


class TurnIn(BatchIn, ModelIn):
    token_budget: TokenBudget
    # The host's live prompt tokens (context + system prompt + tool schemas):
    # checked against the threshold instead of the stored estimate.
    current_token_count: Annotated[int, Field(ge=0, le=MAX_TOKENS)] | None = None
    # The provider refused the last prompt as too long: overflow debt, compacted
    # under the budget before the retry (inline), or scheduled.
    overflow: bool = False
    # The host's model usage of the turn: stored with it for /v1/tenant/usage
    # (counted once: not again when every message is a duplicate).
    usage: TurnUsageIn | None = None


class TurnOut(SkippedWrite):
    conversation_id: int | None
    ingested: int
    duplicates: int
    context_tokens: int
    threshold_tokens: int
    compaction: Compaction
    token_budget: int  # as used (capped by max_assembly_token_budget)
    target_tokens: int | None = None  # overflow: the stored context's target
    context_tokens_after: int | None = None  # when compaction ran inline


class AssembleIn(ModelIn):
    token_budget: TokenBudget
    # With ``model``: the provider serving it. Signed thinking blocks are sent
    # only from assistant messages that model wrote.
    provider: Annotated[Text, Field(min_length=1, max_length=100)] | None = None
    session_id: SessionIdText | None = None
    # The user's current message. With ``prompt_aware_eviction`` on it chooses
    # which older items a tight budget keeps; identifiers it names that the
    # window does not show are recalled from history (``recalled``).
    prompt: Text | None = None
    # Ask for a system-prompt addition on recalling summarized history; it names
    # only ``available_tools`` when given.
    system_prompt: bool = False
    available_tools: list[Annotated[Text, Field(max_length=200)]] | None = None
    # The tool the host calls deferred tools through (OpenClaw's tool search:
    # ``tool_call``): the addition then says to reach the recall tools by it.
    tool_caller: Annotated[Text, Field(min_length=1, max_length=200)] | None = None
    # Ask for ``message_times``, the time range each assembled message covers.
    include_times: bool = False


class MessageTimes(BaseModel):
    """The times one assembled message covers (UTC; ``created_at`` is ``latest_at``).

    A message: its own ``created_at`` for all three. A summary: its
    ``earliest_at`` and ``latest_at``. Turns merged into one message (the
    API wants roles to alternate): the earliest and the latest of theirs.
    The placeholder that may open the context: the times of the message
    after it.
    """

    created_at: datetime
    earliest_at: datetime
    latest_at: datetime


class RecalledSnippet(BaseModel):
    """A sentence of an older message the prompt named, shown in ``messages[message_index]``.

    The snippets share one text block, ``<recalled_history>``, just before the
    fresh tail; each cites its message as ``ref`` (``msg_<message_id>``).
    Recalled by meaning (where the server has semantic recall on), a snippet
    has an empty ``identifier`` and its message's cosine ``similarity`` to
    the prompt; recalled for an identifier, ``similarity`` is null.
    """

    message_id: int
    ref: str
    seq: int
    role: str
    identifier: str
    text: str
    message_index: int
    similarity: float | None = None


class AssembleOut(BaseModel):
    conversation_id: int
    token_budget: int  # as used (capped by max_assembly_token_budget)
    messages: list[dict[str, Any]]
    estimated_tokens: int
    summary_count: int
    fresh_tail_count: int
    fresh_tail_overflow: bool
    system_prompt_addition: str | None = None
    # With ``include_times``: one entry per message of ``messages``, in order
    # (apart: the messages carry only what the provider's API accepts).
    message_times: list[MessageTimes] | None = None
    # Snippets recalled for identifiers the prompt named, or by meaning (empty: none).
    recalled: list[RecalledSnippet] = Field(default_factory=list)


class CompactIn(RequestBody):
    target_tokens: Tokens | None = None
    token_budget: TokenBudget | None = None
    # true waits LCM_COMPACT_WAIT_SECONDS; a number waits that long (capped by the server).
    wait: bool | Annotated[float, Field(ge=0, le=86_400)] = False


class CompactOut(BaseModel):
    conversation_id: int | None
    status: str  # … or "ignored" / "stateless": the session's writes are skipped
    context_tokens_before: int
    context_tokens_after: int


class SessionResetIn(RequestBody):
    """``/new`` (``mode: "new"``) or ``/reset`` (``mode: "reset"``) of a session family.

    ``new`` keeps the live conversation and prunes its context to
    ``retain_depth`` (default: the tenant's ``new_session_retain_depth``):
    ``-1`` keeps everything, ``0`` keeps every summary, ``N`` keeps summaries
    of depth ``N`` or more; raw messages leave the context (they stay stored
    and searchable). ``reset`` archives the live conversation and starts a
    fresh, empty one under ``session_id``.
    """

    mode: Literal["new", "reset"]
    session_id: SessionIdText | None = None
    retain_depth: Annotated[int, Field(ge=-1, le=1_000)] | None = None


class SessionResetOut(BaseModel):
    mode: str
    conversation_id: int
    archived_conversation_id: int | None  # reset: the conversation it archived
    context_items_removed: int


class HostCursorOut(BaseModel):
    """The live conversation's host transcript cursor (null until a host sent one)."""

    conversation_id: int
    session_id: str | None
    host_cursor: str | None


class ConversationStatus(BaseModel):
    conversation_id: int
    session_key: str
    session_id: str | None
    archived: bool
    messages: int
    summaries: dict[int, int]  # depth -> summaries of that depth in the context
    context_tokens: int
    threshold_tokens: int
    token_budget: int
    debt: dict[str, Any] | None
    last_run: dict[str, Any] | None


class BootstrapIn(RequestBody):
    transcript_jsonl: Text
    session_id: SessionIdText | None = None
    format: Literal["auto", "openclaw", "claude-code"] = "auto"


class BootstrapOut(SkippedWrite):
    conversation_id: int | None
    imported: int
    anchor_seq: int | None
    anchor: str  # checkpoint | id | content | none (bounded import) | empty (first import)
    duplicates: int
    format: str
    file_ids: list[str]


# --- lifecycle: exactly-once commits, subagent forks ----------------------------------------


class CommitIn(TurnIn):
    advancement_key: Annotated[Text, Field(min_length=1, max_length=512)]


class CommitOut(SkippedWrite):
    conversation_id: int | None
    status: Literal["committed", "duplicate", "skipped"]  # skipped: ignored or stateless
    ingested: int
    duplicates: int
    context_tokens: int | None
    threshold_tokens: int | None
    compaction: Compaction


class ForkIn(RequestBody):
    parent_session_key: SessionKeyText
    parent_session_id: SessionIdText | None = None
    session_id: SessionIdText | None = None
    mode: Literal["fork", "isolated"] = "fork"
    ttl_seconds: float | None = Field(None, gt=0, le=10 * 365 * 86_400)


class ForkOut(BaseModel):
    conversation_id: int
    parent_conversation_id: int
    mode: str
    status: str
    created: bool
    summaries_shared: int
    messages_copied: int


class ForkEndIn(RequestBody):
    reason: Annotated[Text, Field(min_length=1, max_length=40)] = "completed"


class ForkEndOut(BaseModel):
    conversation_id: int
    status: str
    end_reason: str | None
