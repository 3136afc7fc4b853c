"""All SQL of secret spans."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Sequence
from typing import Any

from sqlalchemy import Table, bindparam, delete, func, insert, select
from sqlalchemy.orm import Session

from lcm.db.driver import DriverStatement
from lcm.db.models import MessagePart
from lcm.db.models import SecretSpan as SecretSpanRow
from lcm.secrets.masking import SecretSpan

SPANS: Table = SecretSpanRow.__table__  # type: ignore[assignment]

# Every assembly asks it: built once (lcm.db.driver), not per call.
_ANY_IN_CONVERSATION = DriverStatement(
    select(SecretSpanRow.id)
    .where(
        SecretSpanRow.tenant_id == bindparam("tenant_id"),
        SecretSpanRow.conversation_id == bindparam("conversation_id"),
    )
    .limit(1)
)


class SecretSpanRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    # Every query names the tenant too: rows are distributed by it
    # (docs/operations.md, "Past one Postgres"; tests/integration/test_sharding.py).

    def ordinals(
        self, tenant_id: str, conversation_id: int, fingerprints: Collection[str]
    ) -> dict[str, int]:
        """The ordinal each of ``fingerprints`` already has in the conversation."""
        found: dict[str, int] = {}
        wanted = sorted(set(fingerprints))
        for start in range(0, len(wanted), 500):  # within every driver's bind limit
            rows = self.session.execute(
                select(SecretSpanRow.fingerprint, SecretSpanRow.ordinal)
                .where(
                    SecretSpanRow.tenant_id == tenant_id,
                    SecretSpanRow.conversation_id == conversation_id,
                    SecretSpanRow.fingerprint.in_(wanted[start : start + 500]),
                )
                .distinct()
            )
            found.update({fingerprint: int(ordinal) for fingerprint, ordinal in rows})
        return found

    def last_ordinal(self, tenant_id: str, conversation_id: int) -> int:
        return int(
            self.session.scalar(
                select(func.coalesce(func.max(SecretSpanRow.ordinal), 0)).where(
                    SecretSpanRow.tenant_id == tenant_id,
                    SecretSpanRow.conversation_id == conversation_id,
                )
            )
            or 0
        )

    def any_in_conversation(self, tenant_id: str, conversation_id: int) -> bool:
        """One probe of the (conversation, fingerprint) index."""
        params = {"tenant_id": tenant_id, "conversation_id": conversation_id}
        return _ANY_IN_CONVERSATION.run(self.session, params).first() is not None

    def any_erased(self, tenant_id: str, conversation_id: int) -> bool:
        """Whether a secret of the conversation was erased (its spans, through the index)."""
        return (
            self.session.scalar(
                select(SecretSpanRow.id)
                .where(
                    SecretSpanRow.tenant_id == tenant_id,
                    SecretSpanRow.conversation_id == conversation_id,
                    SecretSpanRow.erased_at.is_not(None),
                )
                .limit(1)
            )
            is not None
        )

    def insert(self, rows: Sequence[dict[str, Any]]) -> None:
        if rows:
            self.session.connection().execute(insert(SPANS), list(rows))

    def delete_message_spans(self, tenant_id: str, message_ids: Collection[int]) -> None:
        ids = sorted(set(message_ids))
        for start in range(0, len(ids), 500):
            self.session.execute(
                delete(SecretSpanRow).where(
                    SecretSpanRow.tenant_id == tenant_id,
                    SecretSpanRow.message_id.in_(ids[start : start + 500]),
                )
            )

    def message_spans(
        self, tenant_id: str, message_ids: Collection[int]
    ) -> dict[int, list[SecretSpan]]:
        """Each message's spans (over its parts), by message id."""
        spans: dict[int, list[SecretSpan]] = defaultdict(list)
        ids = sorted(set(message_ids))
        for start in range(0, len(ids), 500):
            rows = self.session.execute(
                select(SecretSpanRow)
                .where(
                    SecretSpanRow.tenant_id == tenant_id,
                    SecretSpanRow.message_id.in_(ids[start : start + 500]),
                )
                .order_by(SecretSpanRow.message_id, SecretSpanRow.part, SecretSpanRow.char_offset)
            ).scalars()
            for row in rows:
                assert row.message_id is not None
                spans[row.message_id].append(_span(row))
        return dict(spans)

    def part_lengths(self, tenant_id: str, message_ids: Collection[int]) -> dict[int, list[int]]:
        """Each message's part text lengths in code points, by ordinal (SQL ``length``
        counts characters on both databases)."""
        lengths: dict[int, list[int]] = defaultdict(list)
        ids = sorted(set(message_ids))
        for start in range(0, len(ids), 500):
            rows = self.session.execute(
                select(MessagePart.message_id, MessagePart.ordinal, func.length(MessagePart.text))
                .where(
                    MessagePart.tenant_id == tenant_id,
                    MessagePart.message_id.in_(ids[start : start + 500]),
                )
                .order_by(MessagePart.message_id, MessagePart.ordinal)
            )
            for message_id, ordinal, length in rows:
                parts = lengths[int(message_id)]
                parts.extend([0] * (int(ordinal) + 1 - len(parts)))
                parts[int(ordinal)] = int(length or 0)
        return dict(lengths)

    def file_spans(self, tenant_id: str, file_id: str) -> list[SecretSpan]:
        rows = self.session.execute(
            select(SecretSpanRow)
            .where(SecretSpanRow.tenant_id == tenant_id, SecretSpanRow.file_id == file_id)
            .order_by(SecretSpanRow.char_offset)
        ).scalars()
        return [_span(row) for row in rows]


def _span(row: SecretSpanRow) -> SecretSpan:
    return SecretSpan(
        row.part, row.char_offset, row.char_length, row.kind, row.ordinal, row.erased_at is not None
    )
