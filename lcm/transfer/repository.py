"""All SQL of export and import."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from typing import Any

from sqlalchemy import Table, func, insert, select
from sqlalchemy.orm import Session

from lcm.compaction import SourceRangeRepository
from lcm.db.models import (
    ContextItem,
    LargeFile,
    Message,
    MessagePart,
    Summary,
    SummaryMessage,
    SummaryParent,
)


def _table(model: Any) -> Table:
    table: Table = model.__table__
    return table


class TransferRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    # --- export -----------------------------------------------------------

    def message_batches(
        self, conversation_id: int, batch: int
    ) -> Iterator[list[tuple[Message, list[MessagePart]]]]:
        """Messages by seq with their parts, ``batch`` messages per query pair."""
        after = -1
        while True:
            messages = list(
                self.session.scalars(
                    select(Message)
                    .where(Message.conversation_id == conversation_id, Message.seq > after)
                    .order_by(Message.seq)
                    .limit(batch)
                )
            )
            if not messages:
                return
            parts: dict[int, list[MessagePart]] = {m.id: [] for m in messages}
            for part in self.session.scalars(
                select(MessagePart)
                .where(MessagePart.message_id.in_(parts))
                .order_by(MessagePart.message_id, MessagePart.ordinal)
            ):
                parts[part.message_id].append(part)
            yield [(m, parts[m.id]) for m in messages]
            after = messages[-1].seq

    def message_count(self, conversation_id: int) -> int:
        return int(
            self.session.scalar(
                select(func.count())
                .select_from(Message)
                .where(Message.conversation_id == conversation_id)
            )
            or 0
        )

    def seqs_by_id(self, conversation_id: int) -> dict[int, int]:
        return {
            int(mid): int(seq)
            for mid, seq in self.session.execute(
                select(Message.id, Message.seq).where(Message.conversation_id == conversation_id)
            )
        }

    def files(self, conversation_id: int) -> list[LargeFile]:
        return list(
            self.session.scalars(
                select(LargeFile)
                .where(LargeFile.conversation_id == conversation_id)
                .order_by(LargeFile.created_at, LargeFile.id)
            )
        )

    def summaries(self, conversation_id: int) -> list[Summary]:
        """Shallowest first, so every summary comes after its parents."""
        return list(
            self.session.scalars(
                select(Summary)
                .where(Summary.conversation_id == conversation_id)
                .order_by(Summary.depth, Summary.created_at, Summary.id)
            )
        )

    def message_links(self, conversation_id: int) -> dict[str, list[int]]:
        """Leaf summary id -> its source message ids, in order."""
        links: dict[str, list[int]] = {}
        for summary_id, message_id in self.session.execute(
            select(SummaryMessage.summary_id, SummaryMessage.message_id)
            .join(Summary, Summary.id == SummaryMessage.summary_id)
            .where(Summary.conversation_id == conversation_id)
            .order_by(SummaryMessage.summary_id, SummaryMessage.ordinal)
        ):
            links.setdefault(str(summary_id), []).append(int(message_id))
        return links

    def parent_links(self, conversation_id: int) -> dict[str, list[str]]:
        """Condensed summary id -> its parent summary ids, in order."""
        links: dict[str, list[str]] = {}
        for summary_id, parent_id in self.session.execute(
            select(SummaryParent.summary_id, SummaryParent.parent_id)
            .join(Summary, Summary.id == SummaryParent.summary_id)
            .where(Summary.conversation_id == conversation_id)
            .order_by(SummaryParent.summary_id, SummaryParent.ordinal)
        ):
            links.setdefault(str(summary_id), []).append(str(parent_id))
        return links

    def context_items(self, conversation_id: int) -> list[ContextItem]:
        return list(
            self.session.scalars(
                select(ContextItem)
                .where(ContextItem.conversation_id == conversation_id)
                .order_by(ContextItem.ordinal)
            )
        )

    # --- import -----------------------------------------------------------

    def is_empty(self, conversation_id: int) -> bool:
        return (
            self.session.scalar(
                select(Message.id).where(Message.conversation_id == conversation_id).limit(1)
            )
            is None
            and self.session.scalar(
                select(ContextItem.id)
                .where(ContextItem.conversation_id == conversation_id)
                .limit(1)
            )
            is None
        )

    def existing_summary_ids(self, ids: Collection[str]) -> set[str]:
        return set(self.session.scalars(select(Summary.id).where(Summary.id.in_(ids))))

    def tenant_summary_ids(self, tenant_id: str, ids: Collection[str]) -> set[str]:
        return set(
            self.session.scalars(
                select(Summary.id).where(Summary.id.in_(ids), Summary.tenant_id == tenant_id)
            )
        )

    def existing_file_ids(self, ids: Collection[str]) -> set[str]:
        return set(self.session.scalars(select(LargeFile.id).where(LargeFile.id.in_(ids))))

    def insert_messages(self, rows: Sequence[dict[str, Any]]) -> dict[int, int]:
        """Insert messages; return seq -> new message id."""
        if not rows:
            return {}
        result = self.session.execute(
            insert(_table(Message)).returning(Message.seq, Message.id), rows
        )
        return {int(seq): int(mid) for seq, mid in result}

    def insert_rows(self, model: Any, rows: Sequence[dict[str, Any]]) -> None:
        if rows:
            self.session.execute(insert(_table(model)), rows)

    def store_source_ranges(self, summary_ids: Collection[str]) -> None:
        """The imported summaries' source ranges, once they and their links are written.

        Recomputed, not taken from the export: they follow from the links
        (a parent outside the export has its own, stored).
        """
        SourceRangeRepository(self.session).recompute_ids(summary_ids)

    def summaries_with_parents(self, ids: Collection[str]) -> list[tuple[Summary, list[str]]]:
        """The summaries ``ids`` with their parent ids, in order."""
        if not ids:
            return []
        parents: dict[str, list[str]] = {i: [] for i in ids}
        for summary_id, parent_id in self.session.execute(
            select(SummaryParent.summary_id, SummaryParent.parent_id)
            .where(SummaryParent.summary_id.in_(ids))
            .order_by(SummaryParent.summary_id, SummaryParent.ordinal)
        ):
            parents[str(summary_id)].append(str(parent_id))
        found = self.session.scalars(select(Summary).where(Summary.id.in_(ids)))
        return [(s, parents[s.id]) for s in found]
