"""Reading originals' audit and erasing secrets (docs/secrets.md)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, Field

from api.contract.base import RequestBody, RowId, Text

MAX_ERASE_SPAN_IDS = 1000  # lcm.secret_access.MAX_SPAN_IDS


class SecretReadOut(BaseModel):
    """One read that returned originals: who, when, where, which spans."""

    id: int
    key_id: int | None  # None: the local operator (the CLI)
    key_name: str
    conversation_id: int
    surface: str  # describe_summary | describe_file | expand | export
    subject: str | None
    span_count: int
    span_ids: list[int]  # the first 5,000
    read_at: datetime


class SecretReadsOut(BaseModel):
    reads: list[SecretReadOut]
    next_cursor: str | None


class SecretEraseIn(RequestBody):
    """The values of ``span_ids`` (every span of each value in its conversation), or
    ``value`` wherever the tenant holds it."""

    span_ids: Annotated[list[RowId], Field(max_length=MAX_ERASE_SPAN_IDS)] = Field(
        default_factory=list
    )
    value: Annotated[Text | None, Field(min_length=1, max_length=100_000)] = None


class SecretErasedOut(BaseModel):
    conversation_ids: list[int]
    spans: int
    messages: int
    summaries: int
    files: int  # large files stored again without the value
    file_spans: int  # spans in large files left as they are (none over HTTP)
