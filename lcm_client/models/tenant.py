"""Tenant bodies: settings, usage, keys, the data endpoints, the doctor."""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from lcm_client.models.base import (
    INT64_MAX,
    RequestBody,
    Text,
)

# --- tenant -------------------------------------------------------------------------------


class TenantSettingsOut(BaseModel):
    overrides: dict[str, Any]
    effective: dict[str, Any]


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


class UsagePurposeOut(BaseModel):
    """One purpose on one provider's model, over the whole window."""

    purpose: str = Field(description="summary, file (large-file summaries) or expansion")
    provider: str = Field(description="anthropic, openai or offline")
    model: str
    calls: int
    input_tokens: int
    output_tokens: int = Field(description="Thinking/reasoning tokens included")
    estimated_cost_usd: float | None


class HostUsageLineOut(BaseModel):
    """The host's own model calls of one UTC day and model, as its turns reported them."""

    day: date
    model: str = Field(description="The model the turns named; empty when they named none")
    turns: int = Field(description="Turns that reported usage")
    input_tokens: int = Field(description="Prompt tokens billed at the full rate")
    output_tokens: int
    cache_read_tokens: int = Field(description="Prompt tokens the provider's cache served")
    cache_write_tokens: int = Field(description="Prompt tokens written to the provider's cache")


class HostUsageOut(BaseModel):
    """The window's host usage summed."""

    turns: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cache_read_share: float | None = Field(
        description="Cache reads over all prompt tokens (input + cache read + cache write); "
        "null when none were reported"
    )


class UsageOut(BaseModel):
    """The tenant's usage since ``since``, by UTC day and model, and its totals."""

    since: datetime
    usage: list[UsageLineOut]
    by_purpose: list[UsagePurposeOut] = Field(
        default_factory=list, description="The same calls by purpose and provider/model"
    )
    input_tokens: int
    output_tokens: int
    passes: int
    estimated_cost_usd: float = Field(description="Sum over the lines that have a price")
    unpriced_models: list[str] = Field(description="Models used without a configured price")
    host_usage: list[HostUsageLineOut] = Field(
        default_factory=list,
        description="The host's own model tokens its turns reported (usage on …/turns), "
        "by UTC day and model; not lcm's LLM use, not in the totals above",
    )
    host: HostUsageOut | None = Field(default=None, description="host_usage summed over the window")


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


Scope = Literal["ingest", "read", "admin", "secrets"]
SCOPES: tuple[Scope, ...] = ("ingest", "read", "admin", "secrets")  # the server's key scopes


# What a key gets when none are named: ``secrets`` only when asked for.
DEFAULT_SCOPES: tuple[Scope, ...] = ("ingest", "read", "admin")


class KeyIn(RequestBody):
    name: Annotated[Text, Field(min_length=1, max_length=200)]
    scopes: Annotated[list[Scope], Field(min_length=1, max_length=len(SCOPES))] = Field(
        default_factory=lambda: list(DEFAULT_SCOPES)
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


# --- the doctor: unhealthy summaries and their repair ---------------------------------------


class DoctorConversation(BaseModel):
    conversation_id: int
    session_key: str
    broken: list[str]  # summaries with no link to their sources
    truncated: list[str]  # escalation "fallback": deterministic truncation
    degraded: list[str]  # written without the LLM although one is configured
    # Structural problems (added fields: older servers leave them out).
    dangling_items: list[int] = []  # ordinals of context items pointing nowhere
    counters_behind: list[str] = []  # "last_seq" / "last_ordinal" below a stored row's
    miscounted: list[str] = []  # "message:<seq>", "summary:<id>", "context_item:<ordinal>"


class DoctorOut(BaseModel):
    conversations: list[DoctorConversation]
    broken: int
    truncated: int
    degraded: int
    dangling_items: int = 0
    counters_behind: int = 0
    miscounted: int = 0


class DoctorApplyIn(RequestBody):
    conversation_id: Annotated[int, Field(ge=1, le=INT64_MAX)] | None = None  # default: all


class DoctorRepairOut(BaseModel):
    """One conversation's structural repair, done in the apply request's transaction."""

    conversation_id: int
    dropped_items: list[int]  # ordinals of the dangling context items removed
    counters_raised: list[str]  # "last_seq" / "last_ordinal" raised to the stored maximum
    recounted: int  # rows whose token count was recomputed
    unrepairable: list[str]  # what the doctor cannot repair (a summary without sources)


class DoctorApplyOut(BaseModel):
    status: Literal["none", "scheduled", "ran"]  # the LLM repairs of degraded summaries
    conversations: list[int]  # those owed a repair
    repaired: list[DoctorRepairOut] = []


# --- summary surgery ---------------------------------------------------------------------


class SummaryRewriteIn(RequestBody):
    """Rewrite a summary with the LLM: its id, sources and references stay, its text changes."""

    subtree: bool = False  # also every summary below it, bottom-up
    instructions: Annotated[Text, Field(max_length=4000)] | None = None  # added to the prompt
    # true waits LCM_COMPACT_WAIT_SECONDS; a number waits that long (capped by the server).
    wait: bool | Annotated[float, Field(ge=0, le=86_400)] = False


class SummaryDissolveIn(RequestBody):
    """Put a condensed summary's sources back in the context in its place."""

    wait: bool | Annotated[float, Field(ge=0, le=86_400)] = False


class SummaryOperationOut(BaseModel):
    """A surgery operation: ``pending`` until its leased pass ran, then ``done`` or ``failed``."""

    operation_id: str
    conversation_id: int
    summary_id: str
    action: Literal["rewrite", "dissolve"]
    subtree: bool
    status: Literal["pending", "done", "failed"]
    targets: list[str]  # the summaries a rewrite rewrites, bottom-up
    done: int  # how many of them are rewritten
    error: str | None
    created_at: datetime
    finished_at: datetime | None
