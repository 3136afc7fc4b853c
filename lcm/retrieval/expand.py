"""expand: from summary ids back down to the original messages, within a token cap.

Messages come out in history order, each rebuilt exactly as the gateway sent
it (``message_to_provider``: the stored string, or the stored blocks) with
its detected secrets masked (``lcm.secrets.mask_view``). The
cap is applied to a contiguous prefix: the first message that does not fit
ends the expansion, and ``omitted`` says what was left out and which leaf
summaries to expand next to read it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from lcm.assembly.render import message_to_provider
from lcm.errors import InvalidInput, NotFound
from lcm.retrieval.dag_walk import walk
from lcm.retrieval.grep import GrepResult, message_ref
from lcm.retrieval.repository import HistoryRepository
from lcm.secrets import mask_view, message_spans

MAX_SUMMARY_IDS = 50
_LEAF_CHUNK = 100
_OMITTED_LEAF_IDS = 50


@dataclass(frozen=True, slots=True)
class ExpandedNode:
    id: str
    kind: str
    depth: int
    conversation_id: int
    earliest_at: datetime
    latest_at: datetime
    descendant_count: int
    token_count: int
    parents: list[str]


@dataclass(frozen=True, slots=True)
class ExpandedMessage:
    id: int
    ref: str
    conversation_id: int
    seq: int
    role: str
    created_at: datetime
    token_count: int
    summary_id: str  # the leaf summary it was summarized into
    message: dict[str, Any]  # exactly as sent: {"role", "content": str | blocks}


@dataclass(frozen=True, slots=True)
class Omitted:
    messages: int = 0
    tokens: int = 0
    first_seq: int | None = None
    last_seq: int | None = None
    leaf_ids: list[str] = field(default_factory=list)
    leaf_count: int = 0


@dataclass(frozen=True, slots=True)
class Expansion:
    nodes: list[ExpandedNode]
    messages: list[ExpandedMessage]
    token_cap: int
    tokens: int
    truncated: bool
    omitted: Omitted


def expand(
    session: Session,
    tenant_id: str,
    summary_ids: Sequence[str],
    token_cap: int,
    allowed_conversations: Collection[int] | None = None,
    *,
    mask: bool = True,
) -> Expansion:
    """The source messages of ``summary_ids`` that fit in ``token_cap``, in order (their
    secrets masked when ``mask``)."""
    ids = list(dict.fromkeys(summary_ids))
    if not ids or len(ids) > MAX_SUMMARY_IDS:
        raise InvalidInput(f"give between 1 and {MAX_SUMMARY_IDS} summary ids")
    if token_cap < 1:
        raise InvalidInput("token_cap must be at least 1")
    repo = HistoryRepository(session)
    _check_visible(repo, tenant_id, ids, allowed_conversations)
    dag = walk(repo, ids)
    picked = _pick_messages(repo, dag.leaves, token_cap)
    omitted = (
        _omitted(repo, dag.leaves[picked.cut_at :], picked.seen)
        if picked.cut_at is not None
        else Omitted()
    )
    views = repo.message_views([mid for mid, _leaf in picked.included])
    spans = message_spans(session, tenant_id, list(views) if mask else [])
    views = {mid: mask_view(v, spans[mid]) if mid in spans else v for mid, v in views.items()}
    messages = [
        ExpandedMessage(
            id=mid,
            ref=message_ref(mid),
            conversation_id=picked.sizes[mid][0],
            seq=views[mid].seq,
            role=views[mid].role,
            created_at=views[mid].created_at,
            token_count=picked.sizes[mid][2],
            summary_id=leaf,
            message=message_to_provider(views[mid]),
        )
        for mid, leaf in picked.included
    ]
    contributing = list(dict.fromkeys([*ids, *(leaf for _mid, leaf in picked.included)]))
    return Expansion(
        nodes=_nodes(repo, tenant_id, contributing, dag.sources),
        messages=messages,
        token_cap=token_cap,
        tokens=picked.used,
        truncated=picked.cut_at is not None,
        omitted=omitted,
    )


def with_sources(
    session: Session,
    tenant_id: str,
    result: GrepResult,
    token_cap: int,
    allowed_conversations: Collection[int] | None,
) -> GrepResult:
    """``result`` with its summary hits' source messages (the best first, within ``token_cap``)."""
    ids = [str(m.id) for m in result.matches if m.type == "summary"][:MAX_SUMMARY_IDS]
    if not ids:
        return result
    expansion = expand(session, tenant_id, ids, token_cap, allowed_conversations)
    return dataclasses.replace(result, sources=expansion)


def _check_visible(
    repo: HistoryRepository,
    tenant_id: str,
    ids: Sequence[str],
    allowed_conversations: Collection[int] | None,
) -> None:
    """``NotFound`` for an id that is not the tenant's, or outside the allowed conversations."""
    found = repo.summaries(tenant_id, ids)
    for summary_id in ids:
        summary = found.get(summary_id)
        if summary is None or (
            allowed_conversations is not None
            and summary.conversation_id not in allowed_conversations
        ):
            raise NotFound(f"no summary {summary_id}")


@dataclass
class _Picked:
    """The messages that fit, in leaf order, and where the cap cut the leaves."""

    included: list[tuple[int, str]] = field(default_factory=list)  # (message id, leaf id)
    sizes: dict[int, tuple[int, int, int]] = field(default_factory=dict)  # conv, seq, tokens
    seen: set[int] = field(default_factory=set)
    used: int = 0
    cut_at: int | None = None  # index of the first leaf not wholly included


def _pick_messages(repo: HistoryRepository, leaves: Sequence[str], token_cap: int) -> _Picked:
    """Leaf by leaf (chunked reads), each message once, until the next one would pass the cap."""
    picked = _Picked()
    for start in range(0, len(leaves), _LEAF_CHUNK):
        chunk = leaves[start : start + _LEAF_CHUNK]
        by_leaf = repo.leaf_messages(chunk)
        for index, leaf in enumerate(chunk):
            for m in by_leaf.get(leaf, []):
                if m.id in picked.seen:
                    continue
                if picked.used + m.token_count > token_cap:
                    picked.cut_at = start + index
                    return picked
                picked.seen.add(m.id)
                picked.used += m.token_count
                picked.included.append((m.id, leaf))
                picked.sizes[m.id] = (m.conversation_id, m.seq, m.token_count)
    return picked


def _omitted(repo: HistoryRepository, leaves: list[str], included: set[int]) -> Omitted:
    """What the cap left out: every message under the leaves from the cut on.

    The leaf where the cut happened may have been partly included; its
    included messages are not counted as omitted.
    """
    count, tokens, first, last = repo.leaf_totals(leaves)
    at_cut = repo.leaf_messages(leaves[:1]).get(leaves[0], []) if leaves else []
    taken = [m for m in at_cut if m.id in included]
    if taken:
        count -= len(taken)
        tokens -= sum(m.token_count for m in taken)
        first = min((m.seq for m in at_cut if m.id not in included), default=first)
    return Omitted(count, tokens, first, last, leaves[:_OMITTED_LEAF_IDS], len(leaves))


def _nodes(
    repo: HistoryRepository, tenant_id: str, ids: list[str], sources: dict[str, list[str]]
) -> list[ExpandedNode]:
    rows = repo.summaries(tenant_id, ids)
    return [
        ExpandedNode(
            id=s.id,
            kind=s.kind,
            depth=s.depth,
            conversation_id=s.conversation_id,
            earliest_at=s.earliest_at,
            latest_at=s.latest_at,
            descendant_count=s.descendant_count,
            token_count=s.token_count,
            parents=sources.get(s.id, []),
        )
        for s in (rows[i] for i in ids if i in rows)
    ]
