"""All SQL about conversation rows: finding, locking and creating them, their counters.

The DAG view's SQL is in ``dag_repository.py``, what a new session carries
over in ``carry_over_repository.py``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import BigInteger, and_, bindparam, func, select, update
from sqlalchemy.orm import Session

from lcm.db.driver import DriverStatement
from lcm.db.models import (
    CompactionRun,
    ContextItem,
    Conversation,
    utcnow,
)
from lcm.window_cache import Stamp


class ConversationRef(NamedTuple):
    """A conversation as a request's write or read needs it (no ORM entity)."""

    id: int
    session_id: str | None
    # The model and context window the latest turn named (``remember_model``).
    model_id: str | None
    context_window: int | None

    @classmethod
    def of(cls, conversation: Conversation) -> ConversationRef:
        return cls(
            conversation.id,
            conversation.session_id,
            conversation.model_id,
            conversation.context_window,
        )


class ConversationRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, tenant_id: str, conversation_id: int) -> Conversation | None:
        return self.session.scalar(
            select(Conversation).where(
                Conversation.tenant_id == tenant_id, Conversation.id == conversation_id
            )
        )

    def find_by_session_id(
        self, tenant_id: str, session_key: str, session_id: str, *, lock: bool = False
    ) -> Conversation | None:
        stmt = select(Conversation).where(
            Conversation.tenant_id == tenant_id,
            Conversation.session_key == session_key,
            Conversation.session_id == session_id,
        )
        if lock:
            stmt = stmt.with_for_update()
        return self.session.scalar(stmt)

    def find_active(
        self, tenant_id: str, session_key: str, *, lock: bool = False
    ) -> Conversation | None:
        stmt = select(Conversation).where(
            Conversation.tenant_id == tenant_id,
            Conversation.session_key == session_key,
            Conversation.archived_at.is_(None),
        )
        if lock:
            stmt = stmt.with_for_update()
        return self.session.scalar(stmt)

    def lock_by_session_id(
        self, tenant_id: str, session_key: str, session_id: str
    ) -> ConversationRef | None:
        """``find_by_session_id(..., lock=True)`` as a :class:`ConversationRef`."""
        params = {"tenant": tenant_id, "key": session_key, "session": session_id}
        row = _LOCK_BY_SESSION_ID.run(self.session, params).first()
        return None if row is None else ConversationRef(*row)

    def lock_active(self, tenant_id: str, session_key: str) -> ConversationRef | None:
        """``find_active(..., lock=True)`` as a :class:`ConversationRef`."""
        params = {"tenant": tenant_id, "key": session_key}
        row = _LOCK_ACTIVE.run(self.session, params).first()
        return None if row is None else ConversationRef(*row)

    def ref_by_session_id(
        self, tenant_id: str, session_key: str, session_id: str
    ) -> ConversationRef | None:
        """``find_by_session_id`` as a :class:`ConversationRef` (no lock)."""
        params = {"tenant": tenant_id, "key": session_key, "session": session_id}
        row = _REF_BY_SESSION_ID.run(self.session, params).first()
        return None if row is None else ConversationRef(*row)

    def latest_ref(self, tenant_id: str, session_key: str) -> ConversationRef | None:
        """``find_latest`` as a :class:`ConversationRef`."""
        params = {"tenant": tenant_id, "key": session_key}
        row = _LATEST_REF.run(self.session, params).first()
        return None if row is None else ConversationRef(*row)

    def ref_with_stamp(
        self, tenant_id: str, session_key: str, session_id: str | None
    ) -> tuple[ConversationRef, Stamp | None] | None:
        """``ref_by_session_id`` (or ``latest_ref`` without a session id) with the
        context's stamp (``AssemblyRepository.stamp``), read by the same statement."""
        params = {"tenant": tenant_id, "key": session_key}
        if session_id is None:
            row = _LATEST_STAMPED.run(self.session, params).first()
        else:
            params["session"] = session_id
            row = _STAMPED_BY_SESSION_ID.run(self.session, params).first()
        if row is None:
            return None
        ref = ConversationRef(*row[:4])
        version, appends, ordinal, message_id, summary_id = row[4:]
        if ordinal is None:  # no context item: no stamp, as AssemblyRepository.stamp
            return ref, None
        newest = int(message_id) if message_id is not None else str(summary_id)
        return ref, Stamp(int(version), int(appends), int(ordinal), newest)

    def find_latest(self, tenant_id: str, session_key: str) -> Conversation | None:
        """The active conversation of a family, else its most recent one."""
        return self.session.scalar(
            select(Conversation)
            .where(Conversation.tenant_id == tenant_id, Conversation.session_key == session_key)
            .order_by(Conversation.archived_at.is_not(None), Conversation.id.desc())
            .limit(1)
        )

    def page(
        self,
        tenant_id: str,
        *,
        before_id: int | None,
        limit: int,
        key_prefix: str | None,
        archived: bool | None,
        updated_since: datetime | None,
    ) -> list[tuple[Conversation, int]]:
        """Newest first, ids below ``before_id``: (conversation, context tokens) rows."""
        context_tokens = (
            select(func.coalesce(func.sum(ContextItem.token_count), 0))
            .where(ContextItem.conversation_id == Conversation.id)
            .scalar_subquery()
        )
        stmt = select(Conversation, context_tokens).where(Conversation.tenant_id == tenant_id)
        if before_id is not None:
            stmt = stmt.where(Conversation.id < before_id)
        if key_prefix:
            # substr, not LIKE: exact on both databases (SQLite's LIKE ignores
            # ASCII case) and no wildcard in a key to escape.
            stmt = stmt.where(
                func.substr(Conversation.session_key, 1, len(key_prefix)) == key_prefix
            )
        if archived is not None:
            stmt = stmt.where(
                Conversation.archived_at.is_not(None)
                if archived
                else Conversation.archived_at.is_(None)
            )
        if updated_since is not None:
            stmt = stmt.where(Conversation.updated_at >= updated_since)
        rows = self.session.execute(stmt.order_by(Conversation.id.desc()).limit(limit))
        return [(conversation, int(tokens)) for conversation, tokens in rows]

    def add(self, conversation: Conversation) -> Conversation:
        self.session.add(conversation)
        self.session.flush()
        return conversation

    def archive(self, conversation: Conversation, when: datetime) -> None:
        conversation.archived_at = when
        self.session.flush()

    def remember_model(
        self, conversation_id: int, model_id: str | None, context_window: int | None
    ) -> None:
        """Record what a turn named (only what it named: None leaves the stored value)."""
        statement = _REMEMBER_MODEL.get((model_id is not None, context_window is not None))
        if statement is not None:
            statement.run(
                self.session,
                {"conversation": conversation_id, "model": model_id, "window": context_window},
            )

    def store_host_cursor(self, conversation_id: int, cursor: str) -> None:
        """Keep the host's transcript cursor (see ``Conversation.host_cursor``)."""
        _STORE_HOST_CURSOR.run(self.session, {"conversation": conversation_id, "cursor": cursor})

    def host_cursor(self, conversation_id: int) -> str | None:
        return self.session.scalar(
            select(Conversation.host_cursor).where(Conversation.id == conversation_id)
        )

    def advance_counters(
        self, conversation_id: int, *, seq_by: int, ordinal_by: int
    ) -> tuple[int, int]:
        """Reserve ``seq_by`` seqs and ``ordinal_by`` ordinals; return the new maxima.

        Runs while the conversation row is locked by this transaction, so the
        reserved ranges are this writer's alone. Writing messages (``seq_by``
        > 0) is activity: it moves ``updated_at``, which retention reads.
        """
        params: dict[str, Any] = {
            "conversation": conversation_id,
            "seq_by": seq_by,
            "ordinal_by": ordinal_by,
        }
        if seq_by > 0:
            params["now"] = utcnow()
        row = (_ADVANCE_WITH_ACTIVITY if seq_by > 0 else _ADVANCE).run(self.session, params).one()
        return int(row[0]), int(row[1])

    def advance_appending(self, conversation_id: int, messages: int) -> tuple[int, int]:
        """``advance_counters`` for ingest's ``messages`` new messages, appended to the context.

        Bumps ``context_appends`` with ``context_version``: their items take
        the ordinals reserved here, after every item the context holds (the
        reserved ordinals start past ``last_ordinal``), and nothing else of
        the context changes. Only ingest may say so (``lcm.window_cache``).
        """
        params = {
            "conversation": conversation_id,
            "seq_by": messages,
            "ordinal_by": messages,
            "now": utcnow(),
        }
        row = _ADVANCE_APPENDING.run(self.session, params).one()
        return int(row[0]), int(row[1])

    def advance_counting_tokens(self, conversation_id: int, messages: int) -> tuple[int, int, int]:
        """``advance_appending``, and the context's token total.

        The total is read by the same statement, before this writer adds its
        items: while the row lock is held no other writer changes the context
        (compaction passes and session resets take the lock before they
        commit), so the total plus the new items' tokens is what a read after
        the insert would give, one round trip fewer. (A doctor repair of a
        summary that other contexts carried over rewrites their items' token
        counts under its own conversation's lock only: any read of the total
        may see it or not, this one as a later one would.)
        """
        params = {
            "conversation": conversation_id,
            "seq_by": messages,
            "ordinal_by": messages,
            "now": utcnow(),
        }
        row = _ADVANCE_COUNTING_TOKENS.run(self.session, params).one()
        return int(row[0]), int(row[1]), int(row[2])

    def last_run(self, conversation_id: int) -> CompactionRun | None:
        """The newest compaction pass of the conversation, successful or not."""
        return self.session.scalar(
            select(CompactionRun)
            .where(CompactionRun.conversation_id == conversation_id)
            .order_by(CompactionRun.id.desc())
            .limit(1)
        )


# The statements every ingest runs are built once, with bound parameters:
# building a statement (and its cache key) per call costs more CPU than
# running it. They run on the session's connection (its transaction), past
# the ORM: a write needs the row's columns, not a tracked entity.
_REF_COLUMNS = (
    Conversation.id,
    Conversation.session_id,
    Conversation.model_id,
    Conversation.context_window,
)
_IN_FAMILY = (
    Conversation.tenant_id == bindparam("tenant"),
    Conversation.session_key == bindparam("key"),
)
# FOR UPDATE (ignored by SQLite, whose write transaction holds the database
# lock): the row lock serializes the writers of one conversation until the
# caller commits, so the seqs they reserve have no gaps and no duplicates.
_LOCK_BY_SESSION_ID = DriverStatement(
    select(*_REF_COLUMNS)
    .where(*_IN_FAMILY, Conversation.session_id == bindparam("session"))
    .with_for_update()
)
_LOCK_ACTIVE = DriverStatement(
    select(*_REF_COLUMNS).where(*_IN_FAMILY, Conversation.archived_at.is_(None)).with_for_update()
)
_REF_BY_SESSION_ID = DriverStatement(
    select(*_REF_COLUMNS).where(*_IN_FAMILY, Conversation.session_id == bindparam("session"))
)
# The active conversation of the family, else its most recent one.
_LATEST_REF = DriverStatement(
    select(*_REF_COLUMNS)
    .where(*_IN_FAMILY)
    .order_by(Conversation.archived_at.is_not(None), Conversation.id.desc())
    .limit(1)
)
# The same with the context's stamp (its version, appends and newest item),
# for assembly: one statement where the conversation and the stamp took two.
_NEWER_ITEMS = ContextItem.__table__.alias("newer_items")
_WITH_NEWEST_ITEM = Conversation.__table__.outerjoin(
    ContextItem.__table__,
    and_(
        ContextItem.conversation_id == Conversation.id,
        ContextItem.ordinal
        == select(func.max(_NEWER_ITEMS.c.ordinal))
        .where(_NEWER_ITEMS.c.conversation_id == Conversation.id)
        .scalar_subquery(),
    ),
)
_STAMPED_COLUMNS = (
    *_REF_COLUMNS,
    Conversation.context_version,
    Conversation.context_appends,
    ContextItem.ordinal,
    ContextItem.message_id,
    ContextItem.summary_id,
)
_STAMPED_BY_SESSION_ID = DriverStatement(
    select(*_STAMPED_COLUMNS)
    .select_from(_WITH_NEWEST_ITEM)
    .where(*_IN_FAMILY, Conversation.session_id == bindparam("session"))
)
_LATEST_STAMPED = DriverStatement(
    select(*_STAMPED_COLUMNS)
    .select_from(_WITH_NEWEST_ITEM)
    .where(*_IN_FAMILY)
    .order_by(Conversation.archived_at.is_not(None), Conversation.id.desc())
    .limit(1)
)

_BY_CONVERSATION = Conversation.id == bindparam("conversation")
_COUNTERS = {
    "last_seq": Conversation.last_seq + bindparam("seq_by", type_=BigInteger),
    "last_ordinal": Conversation.last_ordinal + bindparam("ordinal_by", type_=BigInteger),
    "context_version": Conversation.context_version + 1,
}
_ADVANCE_COUNTERS = (
    update(Conversation)
    .where(_BY_CONVERSATION)
    .values(_COUNTERS)
    .returning(Conversation.last_seq, Conversation.last_ordinal)
)
_ADVANCE = DriverStatement(_ADVANCE_COUNTERS)
_ADVANCE_WITH_ACTIVITY = DriverStatement(_ADVANCE_COUNTERS.values(updated_at=bindparam("now")))
# Ingest's appends: one more version that was an append (lcm/window_cache.py).
_APPENDED = {
    **_COUNTERS,
    "context_appends": Conversation.context_appends + 1,
    "updated_at": bindparam("now"),
}
_ADVANCE_APPENDING = DriverStatement(_ADVANCE_COUNTERS.values(_APPENDED))
_CONTEXT_TOKENS = (
    select(func.coalesce(func.sum(ContextItem.token_count), 0))
    .where(ContextItem.conversation_id == bindparam("conversation"))
    .scalar_subquery()
)
_ADVANCE_COUNTING_TOKENS = DriverStatement(
    update(Conversation)
    .where(_BY_CONVERSATION)
    .values(_APPENDED)
    .returning(Conversation.last_seq, Conversation.last_ordinal, _CONTEXT_TOKENS)
)

# Run by a batch that brings its cursor, under the row lock its ingest took.
_STORE_HOST_CURSOR = DriverStatement(
    update(Conversation).where(_BY_CONVERSATION).values(host_cursor=bindparam("cursor"))
)


def _remember(model: bool, window: bool) -> DriverStatement:
    values: dict[str, Any] = {}
    if model:
        values["model_id"] = bindparam("model")
    if window:
        values["context_window"] = bindparam("window")
    return DriverStatement(update(Conversation).where(_BY_CONVERSATION).values(values))


# By (model named, window named); naming neither writes nothing.
_REMEMBER_MODEL = {
    (True, True): _remember(True, True),
    (True, False): _remember(True, False),
    (False, True): _remember(False, True),
}
