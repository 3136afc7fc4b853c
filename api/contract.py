"""The v1 wire contract: every request and response body, as plain pydantic models.

The API declares its routes with these models (``response_model`` and body
parameters) and ``lcm_client`` sends and parses them, so a field exists in
one place for both sides. This module imports pydantic and two small domain
modules (``lcm.storable`` for the storable-text rule, ``lcm.ingest.content``
for the message a ``MessageIn`` becomes) and nothing else: no FastAPI, no
SQLAlchemy, no Celery. Importing it costs about what pydantic costs, where
``api.schemas`` (which adds the request-to-domain steps and the settings
patch model) pulls FastAPI and SQLAlchemy, about a second.

Response bodies that the domain produces as dataclasses (status, grep,
describe, expand, expand-query) are declared here as models of the same
name and fields; the route validates the domain's result against them on
the way out, so a field the domain drops fails the route's tests, and a
field the domain adds reaches clients only once it is declared here.
Responses ignore unknown fields when parsed (DESIGN §5: fields may be
added), requests refuse them.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError

from lcm.ingest.content import IncomingMessage
from lcm.storable import unstorable_text

if TYPE_CHECKING:
    from lcm.ingest.turns import TurnResult

INT64_MAX = 2**63 - 1
MAX_TOKENS = 10**9  # token figures past this are refused (lcm.settings.MAX_TOKENS)
MAX_GREP_LIMIT = 200
MAX_SUMMARY_IDS = 50


def _storable(value: str) -> str:
    problem = unstorable_text(value)
    if problem:
        raise PydanticCustomError("invalid_text", "text {problem}", {"problem": problem})
    return value


def _in_utc(value: datetime) -> datetime:
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise PydanticCustomError(
            "datetime_range", "the time does not exist in UTC (before year 1 or after 9999)"
        ) from None


Text = Annotated[str, AfterValidator(_storable)]
UtcDatetime = Annotated[datetime, AfterValidator(_in_utc)]
RowId = Annotated[int, Field(ge=1, le=INT64_MAX)]
Tokens = Annotated[int, Field(ge=1, le=MAX_TOKENS)]
TokenBudget = Annotated[int, Field(gt=0, le=10_000_000)]
SessionIdText = Annotated[Text, Field(min_length=1, max_length=200)]
SessionKeyText = Annotated[Text, Field(min_length=1, max_length=512)]
NodeIdText = Annotated[Text, Field(min_length=1, max_length=64)]
NodeIds = Annotated[list[NodeIdText], Field(max_length=MAX_SUMMARY_IDS)]
Compaction = Literal["none", "scheduled", "ran"]
GrepMode = Literal["regex", "full_text"]
GrepScope = Literal["messages", "summaries", "both", "files"]
GrepSort = Literal["recency", "relevance", "hybrid"]


class RequestBody(BaseModel):
    """A request body or a part of one: unknown fields are refused, never dropped.

    Its string fields are ``Text``. Free-form JSON (message content blocks,
    tenant settings) is checked by the domain with the same rule
    (``lcm/storable.py``: storable text, bounded depth), once, where it is
    turned into rows.
    """

    model_config = ConfigDict(extra="forbid")


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
    # tool call ids do for tool messages: lcm.ingest.content.event_key).
    response_id: Annotated[Text, Field(min_length=1, max_length=200)] | None = None

    def to_domain(self) -> IncomingMessage:
        return IncomingMessage(self.role, self.content, self.id, self.created_at, self.response_id)


class MessagesIn(RequestBody):
    session_id: SessionIdText | None = None
    messages: list[MessageIn]


class SkippedWrite(BaseModel):
    """Set when the session key matches a tenant pattern and nothing was written.

    ``ignored``: ``ignore_session_patterns``; ``stateless``:
    ``stateless_session_patterns``. ``conversation_id`` is then null.
    """

    ignored: bool = False
    stateless: bool = False

    @staticmethod
    def flags(skipped: str | None) -> dict[str, bool]:
        return {"ignored": skipped == "ignored", "stateless": skipped == "stateless"}


class MessagesOut(SkippedWrite):
    conversation_id: int | None
    ingested: int
    duplicates: int


class ModelIn(RequestBody):
    """The model a call serves: selects a ``model_overrides`` rule of the tenant."""

    model: Annotated[Text, Field(min_length=1, max_length=200)] | None = None
    context_window: TokenBudget | None = None


class TurnIn(MessagesIn, ModelIn):
    token_budget: TokenBudget
    # The host's live prompt tokens (context + system prompt + tool schemas):
    # checked against the threshold instead of the stored estimate.
    current_token_count: Annotated[int, Field(ge=0, le=MAX_TOKENS)] | None = None
    # The provider refused the last prompt as too long: overflow debt, compacted
    # under the budget before the retry (inline), or scheduled.
    overflow: bool = False


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

    @classmethod
    def of(
        cls, turn: TurnResult, compaction: Compaction, tokens_after: int | None = None
    ) -> TurnOut:
        return cls(
            conversation_id=turn.ingest.conversation_id if turn.ingest else None,
            ingested=turn.ingest.ingested if turn.ingest else 0,
            duplicates=turn.ingest.duplicates if turn.ingest else 0,
            context_tokens=turn.context_tokens,
            threshold_tokens=turn.threshold_tokens,
            compaction=compaction,
            **cls.flags(turn.skipped),
            token_budget=turn.token_budget,
            target_tokens=turn.target_tokens,
            context_tokens_after=tokens_after,
        )


class AssembleIn(ModelIn):
    token_budget: TokenBudget
    session_id: SessionIdText | None = None
    # Accepted for forward compatibility (retrieval-aware assembly); not used yet.
    prompt: Text | None = None
    # Ask for a system-prompt addition on recalling summarized history; it names
    # only ``available_tools`` when given.
    system_prompt: bool = False
    available_tools: list[Annotated[Text, Field(max_length=200)]] | None = None


class AssembleOut(BaseModel):
    conversation_id: int
    token_budget: int  # as used (capped by max_assembly_token_budget)
    messages: list[dict[str, Any]]
    estimated_tokens: int
    summary_count: int
    fresh_tail_count: int
    fresh_tail_overflow: bool
    system_prompt_addition: str | None = None


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


# --- tenant -------------------------------------------------------------------------------


class TenantSettingsOut(BaseModel):
    overrides: dict[str, Any]
    effective: dict[str, Any]


# --- agent tools: grep, describe, expand, expand-query --------------------------------------


class UsageLineOut(BaseModel):
    """One UTC day and model."""

    day: date
    model: str
    calls: int = Field(description="LLM calls: summaries, expand-query turns, file summaries")
    passes: int = Field(description="Summaries written (one per successful compaction pass)")
    input_tokens: int
    output_tokens: int
    estimated_cost_usd: float | None = Field(
        description="At the configured list price (LCM_MODEL_PRICES); null when the model has none"
    )


class UsageOut(BaseModel):
    """The tenant's usage since ``since``, by UTC day and model, and its totals."""

    since: datetime
    usage: list[UsageLineOut]
    input_tokens: int
    output_tokens: int
    passes: int
    estimated_cost_usd: float = Field(description="Sum over the lines that have a price")
    unpriced_models: list[str] = Field(description="Models used without a configured price")


class ConversationItemOut(BaseModel):
    conversation_id: int
    session_key: str
    session_id: str | None
    archived: bool
    messages: int
    context_tokens: int
    created_at: datetime
    updated_at: datetime


class ConversationListOut(BaseModel):
    conversations: list[ConversationItemOut]
    next_cursor: str | None


class ImportOut(BaseModel):
    conversation_id: int
    messages: int
    summaries: int
    files: int
    context_items: int
    # Summary ids already used elsewhere, given new ids: old -> new.
    renamed_summaries: dict[str, str]


Scope = Literal["ingest", "read", "admin"]
SCOPES: tuple[Scope, ...] = ("ingest", "read", "admin")  # lcm.tenants.keys.SCOPES


class KeyIn(RequestBody):
    name: Annotated[Text, Field(min_length=1, max_length=200)]
    scopes: Annotated[list[Scope], Field(min_length=1, max_length=len(SCOPES))] = Field(
        default_factory=lambda: list(SCOPES)
    )


class KeyOut(BaseModel):
    """A key as it may be shown: no hash, no key."""

    id: int
    name: str
    prefix: str
    scopes: list[Scope]
    created_at: datetime
    revoked_at: datetime | None


class KeyList(BaseModel):
    keys: list[KeyOut]


class IssuedKeyOut(KeyOut):
    """A new key: ``api_key`` is shown this once and stored only as a hash."""

    api_key: str


class NoContent(BaseModel):
    """What the client returns for a 204 (an erase)."""


class ExportOut(BaseModel):
    """What the client returns for an export: the JSONL text, one record per line."""

    jsonl: str


class ScopeIn(RequestBody):
    """Exactly one of: a session family, one conversation, every conversation of the tenant."""

    session_key: SessionKeyText | None = None
    conversation_id: RowId | None = None
    all_conversations: bool = False


class GrepIn(ScopeIn):
    pattern: Annotated[Text, Field(min_length=1)]
    mode: GrepMode = "regex"
    scope: GrepScope = "both"
    sort: GrepSort = "recency"
    limit: int = Field(50, ge=1, le=MAX_GREP_LIMIT)
    since: UtcDatetime | None = None
    before: UtcDatetime | None = None


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
    prompt: Annotated[Text, Field(min_length=1, max_length=20_000)]
    query: Annotated[Text, Field(min_length=1, max_length=2_000)] | None = None
    summary_ids: NodeIds = Field(default_factory=list)
    max_tokens: int = Field(2_000, ge=1, le=16_000)


class Usage(BaseModel):
    model: str
    input_tokens: int
    output_tokens: int


class ExpandQueryAnswer(BaseModel):
    answer: str
    cited_ids: list[str]
    offline: bool
    model: str
    turns: int
    tokens_read: int
    usage: list[Usage] = Field(default_factory=list)


# --- health and errors ---------------------------------------------------------------------


class Health(BaseModel):
    status: Literal["ok"]


class Readiness(BaseModel):
    status: Literal["ready", "not_ready"]
    checks: dict[str, Literal["ok", "unreachable"]]


class ErrorBody(BaseModel):
    code: str
    message: str


class ErrorOut(BaseModel):
    """Every error the API answers: ``{"error": {"code", "message"}}``."""

    error: ErrorBody


# --- the doctor: unhealthy summaries and their repair ---------------------------------------


class DoctorConversation(BaseModel):
    conversation_id: int
    session_key: str
    broken: list[str]  # summaries with no link to their sources
    truncated: list[str]  # escalation "fallback": deterministic truncation
    degraded: list[str]  # written without the LLM although one is configured


class DoctorOut(BaseModel):
    conversations: list[DoctorConversation]
    broken: int
    truncated: int
    degraded: int


class DoctorApplyIn(RequestBody):
    conversation_id: Annotated[int, Field(ge=1, le=INT64_MAX)] | None = None  # default: all


class DoctorApplyOut(BaseModel):
    status: Literal["none", "scheduled", "ran"]
    conversations: list[int]  # those owed a repair
