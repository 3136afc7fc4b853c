"""describe: what a summary or a large file is, where it sits in the DAG, what it covers.

Naming follows LCM's own (and the ``<parents>`` list the assembler renders):
a condensed summary's ``parents`` are the summaries it was condensed from;
its ``children`` are the deeper summaries that were later condensed from it.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from lcm.db.models import Summary
from lcm.errors import InvalidInput, NotFound
from lcm.files.service import load_file
from lcm.files.storage import FileStorage
from lcm.retrieval.dag_walk import walk
from lcm.retrieval.repository import HistoryRepository
from lcm.secrets import file_spans, mask_detected, mask_ranges

SUMMARY_PREFIX = "sum_"
FILE_PREFIX = "file_"


@dataclass(frozen=True, slots=True)
class SourceRange:
    """The raw messages a summary covers (through every level below it)."""

    message_count: int
    first_seq: int | None
    last_seq: int | None


@dataclass(frozen=True, slots=True)
class SummaryDescription:
    id: str
    conversation_id: int
    session_key: str | None
    kind: str
    depth: int
    content: str
    token_count: int
    source_token_count: int
    descendant_count: int
    earliest_at: datetime
    latest_at: datetime
    created_at: datetime
    escalation: str
    model: str
    file_ids: list[str]
    parents: list[str]
    children: list[str]
    source_messages: SourceRange
    in_context: bool
    # An operator's rewrite (``lcm summary rewrite``): when the last one was, how many.
    rewritten_at: datetime | None = None
    rewrites: int = 0


DEFAULT_FILE_PAGE_CHARS = 1_000_000
MAX_FILE_PAGE_CHARS = 4_000_000


@dataclass(frozen=True, slots=True)
class FileContent:
    """One page of a large file's text: characters ``[offset, offset + len(text))``."""

    text: str
    offset: int
    total_chars: int
    next_offset: int | None  # None once the page reaches the end
    # "base64" for an image (the text is its bytes, encoded), else "utf-8".
    encoding: str = "utf-8"


@dataclass(frozen=True, slots=True)
class FileDescription:
    id: str
    conversation_id: int
    name: str | None
    mime: str | None
    ext: str | None
    byte_size: int
    token_count: int
    exploration_summary: str | None
    created_at: datetime
    message_seq: int | None
    cited_by: list[str]
    # The HTTP describe pages the content in; the agent tools' describe leaves it
    # out (they read files through grep and expand within a token budget).
    content: FileContent | None = None


def describe(
    session: Session,
    tenant_id: str,
    node_id: str,
    allowed_conversations: Collection[int] | None = None,
) -> SummaryDescription | FileDescription:
    """Describe ``node_id`` (``sum_…`` or ``file_…``).

    Another tenant's id, or (under a grant) an id outside the granted
    conversations, is reported exactly as a missing one.
    """
    if node_id.startswith(SUMMARY_PREFIX):
        return describe_summary(session, tenant_id, node_id, allowed_conversations)
    if node_id.startswith(FILE_PREFIX):
        return describe_file(session, tenant_id, node_id, allowed_conversations)
    raise InvalidInput(f"expected a {SUMMARY_PREFIX}… or {FILE_PREFIX}… id, got {node_id!r}")


def describe_summary(
    session: Session,
    tenant_id: str,
    summary_id: str,
    allowed_conversations: Collection[int] | None = None,
    *,
    mask: bool = True,
) -> SummaryDescription:
    repo = HistoryRepository(session)
    summary = repo.summaries(tenant_id, [summary_id]).get(summary_id)
    if summary is None or not _allowed(summary.conversation_id, allowed_conversations):
        raise NotFound(f"no summary {summary_id}")
    parents = repo.sources_of([summary_id]).get(summary_id, [])
    return SummaryDescription(
        id=summary.id,
        conversation_id=summary.conversation_id,
        session_key=repo.session_key_of(summary.conversation_id),
        kind=summary.kind,
        depth=summary.depth,
        # A summary written before masking may quote a secret: what the detector finds is masked.
        content=mask_detected(summary.content) if mask else summary.content,
        token_count=summary.token_count,
        source_token_count=summary.source_token_count,
        descendant_count=summary.descendant_count,
        earliest_at=summary.earliest_at,
        latest_at=summary.latest_at,
        created_at=summary.created_at,
        escalation=summary.escalation,
        model=summary.model,
        file_ids=list(summary.file_ids or []),
        parents=parents,
        children=repo.condensed_into(summary_id),
        source_messages=stored_range(repo, summary),
        in_context=repo.in_context(summary_id),
        rewritten_at=summary.rewritten_at,
        rewrites=summary.rewrites or 0,
    )


def describe_file(
    session: Session,
    tenant_id: str,
    file_id: str,
    allowed_conversations: Collection[int] | None = None,
    *,
    mask: bool = True,
) -> FileDescription:
    repo = HistoryRepository(session)
    found = repo.large_file(tenant_id, file_id)
    if found is None or not _allowed(found.conversation_id, allowed_conversations):
        raise NotFound(f"no file {file_id}")
    return FileDescription(
        id=found.id,
        conversation_id=found.conversation_id,
        name=found.name,
        mime=found.mime,
        ext=found.ext,
        byte_size=found.byte_size,
        token_count=found.token_count,
        exploration_summary=(
            mask_detected(found.exploration_summary)
            if mask and found.exploration_summary is not None
            else found.exploration_summary
        ),
        created_at=found.created_at,
        message_seq=None if found.message_id is None else repo.message_seq(found.message_id),
        cited_by=repo.summaries_citing_file(found.conversation_id, file_id),
    )


def file_content_page(
    session: Session,
    storage: FileStorage,
    tenant_id: str,
    file_id: str,
    offset: int,
    limit: int,
    *,
    mask: bool = True,
) -> FileContent:
    """``limit`` characters of the file's text from ``offset`` (empty past the end);
    its secrets masked when ``mask``."""
    stored = load_file(session, storage, tenant_id, file_id)
    text = stored.content
    end = min(len(text), offset + limit)
    page = text[offset:end] if offset < len(text) else ""
    spans = file_spans(session, tenant_id, file_id) if page and mask else []
    if spans:
        # Masked before it is cut: a secret across the page's edge shows as its placeholder.
        masked, [(start, stop)] = mask_ranges(text, spans, [(offset, end)])
        page = masked[start:stop]
    return FileContent(page, offset, len(text), end if end < len(text) else None, stored.encoding)


def stored_range(repo: HistoryRepository, summary: Summary) -> SourceRange:
    """The range stored with the summary (migration 0030): one row read, whatever its depth.

    A summary written by a server older than the migration has none (nor
    has one condensed from it, until the doctor repairs them): its subtree
    is walked instead.
    """
    if summary.source_message_count is None:
        return source_range(repo, [summary.id])
    return SourceRange(
        summary.source_message_count, summary.source_first_seq, summary.source_last_seq
    )


def source_range(repo: HistoryRepository, summary_ids: list[str]) -> SourceRange:
    """The range found by walking the subtree down to its messages (O(subtree))."""
    count, _tokens, first, last = repo.leaf_totals(walk(repo, summary_ids).leaves)
    return SourceRange(count, first, last)


def _allowed(conversation_id: int, allowed: Collection[int] | None) -> bool:
    return allowed is None or conversation_id in allowed
