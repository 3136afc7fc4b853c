"""The contract's building blocks: bounded scalar types, the request base model, errors."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError

from lcm.conversations.session_keys import normalized_session_key
from lcm.storable import unstorable_text

if TYPE_CHECKING:
    pass

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
# NFC, and no control, zero-width, bidi or format character: ``InvalidSessionKey``
# is no ValueError, so pydantic lets it through to api/errors.py (400, its code).
SessionKeyText = Annotated[
    Text, Field(min_length=1, max_length=512), AfterValidator(normalized_session_key)
]
NodeIdText = Annotated[Text, Field(min_length=1, max_length=64)]
NodeIds = Annotated[list[NodeIdText], Field(max_length=MAX_SUMMARY_IDS)]
Compaction = Literal["none", "scheduled", "ran"]
GrepMode = Literal["regex", "full_text", "semantic", "hybrid"]
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
