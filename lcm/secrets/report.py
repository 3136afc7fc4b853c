"""``lcm secrets report``: findings by kind per conversation, one tenant's only."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy.orm import Session

from lcm.secrets.scan_repository import SecretScanRepository


@dataclass(frozen=True, slots=True)
class KindCount:
    """Spans of one kind, and how many distinct values (ordinals) they hold."""

    kind: str
    spans: int
    values: int


@dataclass(frozen=True, slots=True)
class ConversationFindings:
    conversation_id: int
    session_key: str | None
    kinds: list[KindCount] = field(default_factory=list)

    @property
    def spans(self) -> int:
        return sum(k.spans for k in self.kinds)


def secrets_report(
    session: Session, tenant_id: str, conversation_id: int | None = None
) -> list[ConversationFindings]:
    """Each conversation of the tenant with findings (by id), its counts by kind."""
    found: dict[int, ConversationFindings] = {}
    rows = SecretScanRepository(session).findings_by_kind(tenant_id, conversation_id)
    for cid, session_key, kind, spans, values in rows:
        entry = found.setdefault(cid, ConversationFindings(cid, session_key))
        entry.kinds.append(KindCount(kind, spans, values))
    return list(found.values())
