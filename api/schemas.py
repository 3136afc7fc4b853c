"""Request and response bodies of the v1 HTTP contract (DESIGN §5)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from lcm.ingest.content import IncomingMessage


class MessageIn(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: Literal["user", "assistant", "system", "tool"]
    content: str | list[Any]
    id: str | None = Field(None, min_length=1, max_length=200)
    created_at: str | int | float | None = None

    def to_domain(self) -> IncomingMessage:
        return IncomingMessage(self.role, self.content, self.id, self.created_at)


class MessagesIn(BaseModel):
    session_id: str | None = Field(None, min_length=1, max_length=200)
    messages: list[MessageIn]


class MessagesOut(BaseModel):
    conversation_id: int
    ingested: int
    duplicates: int


class TurnIn(MessagesIn):
    token_budget: int = Field(gt=0, le=10_000_000)


class TurnOut(BaseModel):
    conversation_id: int
    ingested: int
    duplicates: int
    context_tokens: int
    threshold_tokens: int
    compaction: Literal["none", "scheduled", "ran"]


class AssembleIn(BaseModel):
    token_budget: int = Field(gt=0, le=10_000_000)
    session_id: str | None = Field(None, min_length=1, max_length=200)
    # Accepted for forward compatibility (retrieval-aware assembly); not used yet.
    prompt: str | None = None
    # Ask for a system-prompt addition on recalling summarized history; it names
    # only ``available_tools`` when given.
    system_prompt: bool = False
    available_tools: list[str] | None = None


class AssembleOut(BaseModel):
    conversation_id: int
    messages: list[dict[str, Any]]
    estimated_tokens: int
    summary_count: int
    fresh_tail_count: int
    fresh_tail_overflow: bool
    system_prompt_addition: str | None = None


class CompactIn(BaseModel):
    target_tokens: int | None = Field(None, gt=0)
    token_budget: int | None = Field(None, gt=0, le=10_000_000)
    wait: bool | float = False


class CompactOut(BaseModel):
    conversation_id: int
    status: str
    context_tokens_before: int
    context_tokens_after: int


class TenantSettingsOut(BaseModel):
    overrides: dict[str, Any]
    effective: dict[str, Any]
