"""A text waiting for its vector, and how far a walk over the waiting texts has got."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, slots=True)
class Pending:
    """A text without a vector of the current model."""

    target: str  # message | summary | file
    source: str  # msg_<id> | sum_… | file_…
    tenant_id: str
    conversation_id: int
    message_id: int | None
    at: datetime
    text: str
    role: str | None = None


@dataclass(frozen=True, slots=True)
class Cursor:
    """How far a walk over waiting texts has got: the last id of each kind it was given.

    A job or a backfill asks for the texts past its cursor, so each batch
    starts where the last one ended instead of re-checking every text before
    it (with a million embedded messages, one anti-join from the first id
    per batch made a backfill quadratic).
    """

    message_id: int = 0
    summary_id: str = ""
    file_id: str = ""

    def past(self, found: Sequence[Pending]) -> Cursor:
        """The cursor after ``found`` (one :meth:`EmbeddingRepository.pending` answer)."""
        messages = [p.message_id for p in found if p.message_id is not None]
        summaries = [p.source for p in found if p.target == "summary"]
        files = [p.source for p in found if p.target == "file"]
        return Cursor(
            max(messages, default=self.message_id),
            max(summaries, default=self.summary_id),
            max(files, default=self.file_id),
        )
