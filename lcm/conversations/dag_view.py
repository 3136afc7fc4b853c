"""A read-only view of one conversation's context and summary DAG (for ``lcm dag``).

The context is listed in order with runs of raw messages grouped; every
summary reachable from it is loaded with its sources, and each leaf with the
range of messages it covers. A handful of queries whatever the size: one for
the context, one per DAG level, one for the leaves' ranges.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from lcm.conversations.dag_repository import DagRepository
from lcm.retrieval.repository import HistoryRepository

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


def load_dag(session: Session, conversation_id: int) -> ConversationDag:
    repo = DagRepository(session)
    history = HistoryRepository(session)
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
        level = history.sources_of(frontier)
        for node in frontier:
            sources[node] = level.get(node, [])
        frontier = list(
            dict.fromkeys(p for node in frontier for p in sources[node] if p not in sources)
        )
    rows = repo.summaries(list(sources))
    ranges = {
        summary_id: MessageRange(*span)
        for summary_id, span in repo.leaf_ranges([s.id for s in rows if s.kind == "leaf"]).items()
    }
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
