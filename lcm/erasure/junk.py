"""Junk conversations: found by session-key pattern and inactivity, erased or archived.

``lcm doctor-clean`` lists them (read-only) and, when asked, erases or
archives them. A conversation is junk when its session key matches one of
the glob patterns (``lcm.conversations.patterns``: ``*`` within a segment,
``**`` across) and, when ``inactive_days`` is set, no message was written to
it for that many days: idleness read from ``conversations.updated_at``, as
retention reads it (``lcm.erasure.retention``). The pattern ``**`` matches
every key, so inactivity alone is ``patterns=("**",)``.

The defaults are the keys an OpenClaw gateway gives runs nobody reads back
(its ``isCronSessionKey`` and ``isSubagentSessionKey``): cron jobs and their
runs (``agent:<id>:cron:<job>[:run:<run>]``), heartbeat sessions, and
subagents (``agent:<id>:subagent:...``) left behind when their parent ended.

Each conversation is erased (or archived) in its own short transaction, as
retention does: one refused erase (a later session or a fork still uses its
summaries) is reported on its row and does not stop the others. The newest
go first, so a fork listed with its parent is erased before the parent that
it references. Stored file contents are removed after each commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

from sqlalchemy.orm import Session

from lcm.conversations.patterns import compile_session_pattern
from lcm.db.engine import Transaction
from lcm.erasure.junk_repository import ConversationRow, JunkRepository
from lcm.erasure.repository import ErasureRepository
from lcm.erasure.service import Erased, erase_conversations, remove_released_blobs
from lcm.errors import Conflict
from lcm.files.storage import FileStorage

DEFAULT_JUNK_PATTERNS: tuple[str, ...] = (
    "agent:*:cron:**",  # a cron job's session and its runs (``cron:<job>:run:<run>``)
    "agent:*:heartbeat*",  # ``heartbeat``, ``heartbeat-recovered-<stamp>``
    "agent:*:heartbeat:**",
    "agent:*:subagent:**",
    "subagent:**",  # a subagent key outside an agent's namespace
)

CleanStatus = Literal["erased", "archived", "refused", "kept", "gone"]


@dataclass(frozen=True)
class JunkCriteria:
    """What makes a conversation junk: a key pattern matched and, if set, this many idle days."""

    patterns: tuple[str, ...] = DEFAULT_JUNK_PATTERNS
    inactive_days: int | None = None

    def idle_before(self, now: datetime) -> datetime | None:
        return None if self.inactive_days is None else now - timedelta(days=self.inactive_days)


@dataclass(frozen=True)
class JunkConversation:
    """One candidate and why it matched (``reasons``: the pattern, the idle days)."""

    tenant: str
    tenant_id: str
    conversation_id: int
    session_key: str
    messages: int
    last_activity: datetime
    archived: bool
    reasons: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class CleanOutcome:
    """What became of one candidate: erased, archived, refused (why), kept, or gone."""

    conversation_id: int
    status: CleanStatus
    detail: str = ""


def find_junk(
    session: Session,
    tenants: Sequence[tuple[str, str]],
    criteria: JunkCriteria,
    now: datetime,
) -> list[JunkConversation]:
    """The junk conversations of ``tenants`` (``(id, name)`` pairs), least recently active first."""
    idle_before = criteria.idle_before(now)
    found: list[JunkConversation] = []
    for tenant_id, name in tenants:
        for row in JunkRepository(session).conversations(tenant_id, idle_before):
            pattern = _first_match(row.session_key, criteria.patterns)
            if pattern is None:
                continue
            found.append(_candidate(tenant_id, name, row, pattern, criteria, now))
    return found


def clean_junk(
    transaction: Transaction,
    read_session: Transaction,
    storage: FileStorage,
    junk: Sequence[JunkConversation],
    criteria: JunkCriteria,
    now: datetime,
    *,
    archive: bool = False,
) -> list[CleanOutcome]:
    """Erase (or ``archive``) each candidate in its own transaction, newest first."""
    outcomes: list[CleanOutcome] = []
    for candidate in sorted(junk, key=lambda c: c.conversation_id, reverse=True):
        try:
            with transaction() as session:
                outcome, erased = _clean_one(session, candidate, criteria, now, archive)
        except Conflict as exc:
            outcomes.append(CleanOutcome(candidate.conversation_id, "refused", exc.message))
            continue
        if erased is not None:
            remove_released_blobs(read_session, storage, erased)
        outcomes.append(outcome)
    return outcomes


def _clean_one(
    session: Session,
    candidate: JunkConversation,
    criteria: JunkCriteria,
    now: datetime,
    archive: bool,
) -> tuple[CleanOutcome, Erased | None]:
    cid = candidate.conversation_id
    repo = ErasureRepository(session)
    if not repo.lock_conversations(candidate.tenant_id, [cid]):
        return CleanOutcome(cid, "gone"), None
    # Re-checked under the row lock: a message may have arrived since the
    # listing, and then the conversation is no longer idle.
    idle_before = criteria.idle_before(now)
    if idle_before is not None and not repo.is_idle(cid, idle_before):
        return CleanOutcome(cid, "kept", "a message arrived since the listing"), None
    if archive:
        if JunkRepository(session).archive(cid, now):
            return CleanOutcome(cid, "archived"), None
        return CleanOutcome(cid, "kept", "already archived"), None
    erased = erase_conversations(session, candidate.tenant_id, [cid])
    return CleanOutcome(cid, "erased", f"{erased.rows} rows"), erased


def _first_match(session_key: str, patterns: Sequence[str]) -> str | None:
    return next((p for p in patterns if compile_session_pattern(p).fullmatch(session_key)), None)


def _candidate(
    tenant_id: str,
    name: str,
    row: ConversationRow,
    pattern: str,
    criteria: JunkCriteria,
    now: datetime,
) -> JunkConversation:
    reasons = [f"key matches {pattern}"]
    if criteria.inactive_days is not None:
        reasons.append(f"inactive {(now - row.last_activity).days} days")
    return JunkConversation(
        tenant=name,
        tenant_id=tenant_id,
        conversation_id=row.conversation_id,
        session_key=row.session_key,
        messages=row.messages,
        last_activity=row.last_activity,
        archived=row.archived,
        reasons=reasons,
    )
