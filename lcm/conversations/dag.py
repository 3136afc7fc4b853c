"""A read-only view of one conversation's context and summary DAG (for ``lcm dag``).

The context is listed in order with runs of raw messages grouped; every
summary reachable from it is loaded with its sources, and each leaf with the
range of messages it covers. A handful of queries whatever the size: one for
the context, one per DAG level, one for the leaves' ranges.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from lcm.db.models import ContextItem, Message, Summary, SummaryMessage, SummaryParent

_CHUNK = 500
MAX_LEVELS = 64  # bounds the walk down a corrupt (cyclic) DAG


@dataclass(frozen=True, slots=True)
class MessageRange:
    first_seq: int
    last_seq: int
    count: int
    tokens: int


@dataclass(frozen=True, slots=True)
class DagNode:
    id: str
    kind: str
    depth: int
    token_count: int
    descendant_count: int
    earliest_at: datetime
    latest_at: datetime
    sources: tuple[str, ...]  # parent summaries of a condensed node, in order
    messages: MessageRange | None  # what a leaf covers


@dataclass(frozen=True, slots=True)
class ContextRow:
    """One summary item, or a run of consecutive raw-message items."""

    summary_id: str | None
    messages: MessageRange | None


@dataclass(frozen=True, slots=True)
class ConversationDag:
    context: list[ContextRow]
    nodes: dict[str, DagNode]


class SummaryFacts(NamedTuple):
    id: str
    kind: str
    depth: int
    token_count: int
    descendant_count: int
    earliest_at: datetime
    latest_at: datetime


class DagRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def context(self, conversation_id: int) -> list[tuple[str | None, int | None, int]]:
        """(summary id, message seq, tokens) per context item, in order."""
        return [
            (summary_id, seq, int(tokens))
            for summary_id, seq, tokens in self.session.execute(
                select(ContextItem.summary_id, Message.seq, ContextItem.token_count)
                .outerjoin(Message, Message.id == ContextItem.message_id)
                .where(ContextItem.conversation_id == conversation_id)
                .order_by(ContextItem.ordinal)
            )
        ]

    def summaries(self, ids: Sequence[str]) -> list[SummaryFacts]:
        """The summaries' figures, without their text (the DAG view never reads it)."""
        found: list[SummaryFacts] = []
        columns = [getattr(Summary, name) for name in SummaryFacts._fields]
        for start in range(0, len(ids), _CHUNK):
            # Plain rows, not ORM objects: a DAG of thousands of nodes stays cheap.
            found += (
                SummaryFacts(*row)
                for row in self.session.execute(
                    select(*columns).where(Summary.id.in_(ids[start : start + _CHUNK]))
                )
            )
        return found

    def sources(self, ids: Sequence[str]) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for start in range(0, len(ids), _CHUNK):
            for child, parent in self.session.execute(
                select(SummaryParent.summary_id, SummaryParent.parent_id)
                .where(SummaryParent.summary_id.in_(ids[start : start + _CHUNK]))
                .order_by(SummaryParent.summary_id, SummaryParent.ordinal)
            ):
                found.setdefault(child, []).append(parent)
        return found

    def leaf_ranges(self, ids: Sequence[str]) -> dict[str, MessageRange]:
        found: dict[str, MessageRange] = {}
        for start in range(0, len(ids), _CHUNK):
            for summary_id, first, last, count, tokens in self.session.execute(
                select(
                    SummaryMessage.summary_id,
                    func.min(Message.seq),
                    func.max(Message.seq),
                    func.count(),
                    func.sum(Message.token_count),
                )
                .join(Message, Message.id == SummaryMessage.message_id)
                .where(SummaryMessage.summary_id.in_(ids[start : start + _CHUNK]))
                .group_by(SummaryMessage.summary_id)
            ):
                found[summary_id] = MessageRange(first, last, count, int(tokens or 0))
        return found


def load_dag(session: Session, conversation_id: int) -> ConversationDag:
    repo = DagRepository(session)
    context: list[ContextRow] = []
    run: list[tuple[int, int]] = []  # (seq, tokens) of the current raw-message run
    for summary_id, seq, tokens in repo.context(conversation_id):
        if summary_id is None and seq is not None:
            run.append((seq, tokens))
            continue
        if run:
            context.append(ContextRow(None, _range(run)))
            run = []
        context.append(ContextRow(summary_id, None))
    if run:
        context.append(ContextRow(None, _range(run)))

    sources: dict[str, list[str]] = {}
    frontier = list(dict.fromkeys(r.summary_id for r in context if r.summary_id))
    for _ in range(MAX_LEVELS):
        if not frontier:
            break
        level = repo.sources(frontier)
        for node in frontier:
            sources[node] = level.get(node, [])
        frontier = list(
            dict.fromkeys(p for node in frontier for p in sources[node] if p not in sources)
        )
    rows = repo.summaries(list(sources))
    ranges = repo.leaf_ranges([s.id for s in rows if s.kind == "leaf"])
    nodes = {
        s.id: DagNode(
            s.id,
            s.kind,
            s.depth,
            s.token_count,
            s.descendant_count,
            s.earliest_at,
            s.latest_at,
            tuple(sources.get(s.id, ())),
            ranges.get(s.id),
        )
        for s in rows
    }
    return ConversationDag(context, nodes)


def _range(run: list[tuple[int, int]]) -> MessageRange:
    return MessageRange(run[0][0], run[-1][0], len(run), sum(t for _, t in run))
