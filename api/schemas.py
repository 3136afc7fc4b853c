"""Request and response bodies of the v1 HTTP contract (DESIGN §5)."""

from __future__ import annotations

from datetime import date, datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, Field, create_model

from api.validation import RequestBody, SessionIdText, Text, Tokens
from lcm.ingest.content import IncomingMessage, PreparedMessage
from lcm.ingest.service import prepare_batch
from lcm.ingest.turns import TurnResult
from lcm.settings import Settings, TenantSettings


class MessageIn(RequestBody):
    """One message; fields other than these four are refused (400), never dropped."""

    role: Literal["user", "assistant", "system", "tool"]
    content: str | list[Any]
    id: Annotated[Text, Field(min_length=1, max_length=200)] | None = None
    # ISO-8601 (naive means UTC) or Unix seconds / milliseconds.
    created_at: str | int | float | None = None

    def to_domain(self) -> IncomingMessage:
        return IncomingMessage(self.role, self.content, self.id, self.created_at)


class MessagesIn(RequestBody):
    session_id: SessionIdText | None = None
    messages: list[MessageIn]

    def prepared(self, settings: Settings) -> list[PreparedMessage]:
        """The validated batch (before any query: on SQLite a write query takes the lock)."""
        return prepare_batch(
            [m.to_domain() for m in self.messages],
            max_batch=settings.max_batch_messages,
            max_chars=settings.max_message_chars,
        )


class MessagesOut(BaseModel):
    conversation_id: int
    ingested: int
    duplicates: int


class TurnIn(MessagesIn):
    token_budget: int = Field(gt=0, le=10_000_000)


Compaction = Literal["none", "scheduled", "ran"]


class TurnOut(BaseModel):
    conversation_id: int
    ingested: int
    duplicates: int
    context_tokens: int
    threshold_tokens: int
    compaction: Compaction

    @classmethod
    def of(cls, turn: TurnResult, compaction: Compaction) -> TurnOut:
        return cls(
            conversation_id=turn.ingest.conversation_id,
            ingested=turn.ingest.ingested,
            duplicates=turn.ingest.duplicates,
            context_tokens=turn.context_tokens,
            threshold_tokens=turn.threshold_tokens,
            compaction=compaction,
        )


class AssembleIn(RequestBody):
    token_budget: int = Field(gt=0, le=10_000_000)
    session_id: SessionIdText | None = None
    # Accepted for forward compatibility (retrieval-aware assembly); not used yet.
    prompt: Text | None = None
    # Ask for a system-prompt addition on recalling summarized history; it names
    # only ``available_tools`` when given.
    system_prompt: bool = False
    available_tools: list[Annotated[Text, Field(max_length=200)]] | None = None


class AssembleOut(BaseModel):
    conversation_id: int
    messages: list[dict[str, Any]]
    estimated_tokens: int
    summary_count: int
    fresh_tail_count: int
    fresh_tail_overflow: bool
    system_prompt_addition: str | None = None


class CompactIn(RequestBody):
    target_tokens: Tokens | None = None
    token_budget: int | None = Field(None, gt=0, le=10_000_000)
    # true waits LCM_COMPACT_WAIT_SECONDS; a number waits that long (capped by the server).
    wait: bool | Annotated[float, Field(ge=0, le=86_400)] = False


class CompactOut(BaseModel):
    conversation_id: int
    status: str
    context_tokens_before: int
    context_tokens_after: int


def _patch_model() -> type[BaseModel]:
    """Every overridable setting, optional and nullable (``null`` removes the override).

    Built from ``TenantSettings`` so the documented body cannot drift from
    what the domain validates (``validate_overrides`` checks it again).
    """
    fields: dict[str, Any] = {}
    for name, info in TenantSettings.model_fields.items():
        annotation: Any = info.annotation
        if info.metadata:
            annotation = Annotated[annotation, *info.metadata]  # the same bounds
        fields[name] = (annotation | None, None)
    return create_model("TenantSettingsPatch", __base__=RequestBody, **fields)


if TYPE_CHECKING:  # a model built at import time; to the type checker, any request body
    TenantSettingsPatch = RequestBody
else:
    TenantSettingsPatch = _patch_model()


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


class UsageOut(BaseModel):
    """The tenant's usage since ``since``, by UTC day and model, and its totals."""

    since: datetime
    usage: list[UsageLineOut]
    input_tokens: int
    output_tokens: int
    passes: int
    estimated_cost_usd: float = Field(description="Sum over the lines that have a price")
    unpriced_models: list[str] = Field(description="Models used without a configured price")
