"""Secret scan and findings report bodies (``/v1/tenant/secrets/…``)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from api.contract.base import RequestBody, RowId, SessionKeyText


class SecretScanIn(RequestBody):
    """What to re-scan: one conversation (by id, or a session key's latest), else the tenant."""

    conversation_id: RowId | None = None
    session_key: SessionKeyText | None = None
    rescan_all: bool = Field(
        False, description="every conversation in scope, not only those scanned by another version"
    )


class SecretScanOut(BaseModel):
    id: int
    status: str = Field(description="pending | running | done | failed")
    conversation_id: int | None
    detector_version: str
    rescan_all: bool
    messages_done: int
    messages_total: int
    conversations_done: int
    spans_written: int
    created_at: datetime
    finished_at: datetime | None
    last_error: str | None


class SecretKindOut(BaseModel):
    spans: int = Field(description="findings of this kind")
    values: int = Field(description="distinct values among them (placeholder numbers)")


class SecretFindingsOut(BaseModel):
    conversation_id: int
    session_key: str | None
    spans: int
    kinds: dict[str, SecretKindOut]


class SecretsReportOut(BaseModel):
    conversations: list[SecretFindingsOut]
