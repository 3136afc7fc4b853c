"""The client's building blocks: bounded scalar types, the request base model, errors.

The same bounds as the server's (``tests/unit/test_client_models.py`` checks
every model against the server's OpenAPI document). Strings are checked for
what the databases cannot store (a NUL, a lone surrogate) before a body is
sent; the server's other text rules (a session key's refused characters, its
NFC form) are the server's to apply: it answers 400 with the code.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError

INT64_MAX = 2**63 - 1
MAX_TOKENS = 10**9  # token figures past this are refused (the server's MAX_TOKENS)
MAX_GREP_LIMIT = 200
MAX_SUMMARY_IDS = 50


# What Postgres ``text`` refuses (NUL) or UTF-8 cannot encode (a lone surrogate):
# the server's storable-text rule, which refuses them with code ``invalid_text``.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def _storable(value: str) -> str:
    bad = _UNSTORABLE.search(value)
    if bad is not None:
        what = "a NUL character" if bad.group() == "\x00" else "a lone UTF-16 surrogate"
        problem = f"contains {what} at offset {bad.start()}"
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
# The server also refuses control, zero-width, bidi and format characters and
# stores the key in NFC; it answers 400 ``invalid_session_key`` for those.
SessionKeyText = Annotated[Text, Field(min_length=1, max_length=512)]
NodeIdText = Annotated[Text, Field(min_length=1, max_length=64)]
NodeIds = Annotated[list[NodeIdText], Field(max_length=MAX_SUMMARY_IDS)]
Compaction = Literal["none", "scheduled", "ran"]
GrepMode = Literal["regex", "full_text", "semantic", "hybrid"]
GrepScope = Literal["messages", "summaries", "both", "files"]
GrepSort = Literal["recency", "relevance", "hybrid"]


class RequestBody(BaseModel):
    """A request body or a part of one: unknown fields are refused, never dropped.

    Its string fields are ``Text``. Free-form JSON (message content blocks,
    tenant settings) is checked by the server with the same rule.
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
