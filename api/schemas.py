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
