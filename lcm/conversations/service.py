"""Session families: which conversation a write or a read lands in.

A family is every conversation of one ``session_key``. At most one of them is
live (unarchived). A ``session_id`` the family has not seen starts a new
conversation and archives the live one; a ``session_id`` it has seen (even an
archived one, e.g. a gateway's late retry) goes back to that conversation.
Which summaries of the archived conversation the new one starts with is
``new_session_retain_depth`` (see :mod:`lcm.conversations.carry_over`).
"""

from __future__ import annotations

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from lcm.conversations.carry_over import carry_summaries
from lcm.conversations.repository import ConversationRef, ConversationRepository
from lcm.db.models import Conversation, utcnow
from lcm.errors import Conflict, NotFound
from lcm.window_cache import StampRead


def resolve_for_write(
    session: Session,
    tenant_id: str,
    session_key: str,
    session_id: str | None,
    *,
    retain_depth: int = -1,
) -> Conversation:
    """The conversation a write goes to, created if needed, row-locked on Postgres.

    The row lock (``SELECT … FOR UPDATE``) is held until the caller's commit:
    it is what serializes concurrent writers of one conversation so that seq
    numbers have no gaps and no duplicates. On SQLite the whole write
    transaction already holds the database write lock (BEGIN IMMEDIATE).
    """
    repo = ConversationRepository(session)
    if session_id is not None:
        found = repo.find_by_session_id(tenant_id, session_key, session_id, lock=True)
        if found is not None:
            return found
    active = repo.find_active(tenant_id, session_key, lock=True)
    if active is not None and (session_id is None or active.session_id == session_id):
        return active
    if active is not None:
        # A new runtime session in the family: the previous one is archived.
        repo.archive(active, utcnow())
    conversation, created = _create(session, repo, tenant_id, session_key, session_id)
    if created and active is not None:
        # Only the writer that archived the live conversation and created its
        # successor carries summaries over, so a racing writer never does it twice.
        carry_summaries(session, tenant_id, active.id, conversation.id, retain_depth)
    return conversation


def target_for_write(
    session: Session,
    tenant_id: str,
    session_key: str,
    session_id: str | None,
    *,
    retain_depth: int = -1,
) -> ConversationRef:
    """What :func:`resolve_for_write` resolves, under the same row lock, as plain columns.

    The common case, a conversation that exists, is the same locked read as
    there, without building an ORM entity; creating a conversation or
    starting a new session of the family is :func:`resolve_for_write` itself
    (which reads the rows again: they are locked by then, so nothing moved).
    """
    repo = ConversationRepository(session)
    if session_id is not None:
        found = repo.lock_by_session_id(tenant_id, session_key, session_id)
        if found is not None:
            return found
    active = repo.lock_active(tenant_id, session_key)
    if active is not None and (session_id is None or active.session_id == session_id):
        return active
    return ConversationRef.of(
        resolve_for_write(session, tenant_id, session_key, session_id, retain_depth=retain_depth)
    )


def _create(
    session: Session,
    repo: ConversationRepository,
    tenant_id: str,
    session_key: str,
    session_id: str | None,
) -> tuple[Conversation, bool]:
    """The new conversation, and whether this call created it (False: a racing writer did)."""
    # Two writers may both decide to create the conversation. The unique
    # indexes (one live conversation per family; one row per session_id) let
    # exactly one insert win; the loser rolls back its savepoint and takes the
    # winner's row, which is committed by then (Postgres makes the loser's
    # insert wait for the winner's transaction before reporting the conflict).
    savepoint = session.begin_nested()
    try:
        created = repo.add(
            Conversation(tenant_id=tenant_id, session_key=session_key, session_id=session_id)
        )
        savepoint.commit()
        return created, True
    except IntegrityError:
        savepoint.rollback()
    winner = (
        repo.find_by_session_id(tenant_id, session_key, session_id, lock=True)
        if session_id is not None
        else repo.find_active(tenant_id, session_key, lock=True)
    )
    if winner is None:
        raise Conflict("the session family changed concurrently; retry the request")
    return winner, False


def target_for_read(
    session: Session, tenant_id: str, session_key: str, session_id: str | None = None
) -> ConversationRef:
    """What :func:`resolve_for_read` resolves, as plain columns (one prebuilt query)."""
    repo = ConversationRepository(session)
    found = (
        repo.ref_by_session_id(tenant_id, session_key, session_id)
        if session_id is not None
        else repo.latest_ref(tenant_id, session_key)
    )
    if found is None:
        raise NotFound(f"no conversation for session key {session_key!r}")
    return found


def target_for_assembly(
    session: Session, tenant_id: str, session_key: str, session_id: str | None = None
) -> tuple[ConversationRef, StampRead]:
    """:func:`target_for_read` and its context's stamp, in one statement.

    Assembly's window cache reads the stamp first (``lcm.window_cache``):
    read here, in the same transaction before the window, it needs no
    statement of its own (``assemble(..., stamp_read=...)``).
    """
    found = ConversationRepository(session).ref_with_stamp(tenant_id, session_key, session_id)
    if found is None:
        raise NotFound(f"no conversation for session key {session_key!r}")
    ref, stamp = found
    return ref, StampRead(stamp)


def get_conversation(session: Session, tenant_id: str, conversation_id: int) -> Conversation | None:
    """The tenant's conversation ``conversation_id``, if it has one."""
    return ConversationRepository(session).get(tenant_id, conversation_id)


def conversation_in_family(
    session: Session,
    tenant_id: str,
    session_key: str,
    session_id: str | None,
    conversation_id: int | None,
) -> Conversation:
    """The family's conversation named by session id or conversation id (both must agree)."""
    repo = ConversationRepository(session)
    found = (
        repo.get(tenant_id, conversation_id)
        if conversation_id is not None
        else repo.find_by_session_id(tenant_id, session_key, str(session_id))
    )
    if (
        found is None
        or found.session_key != session_key
        or (session_id is not None and found.session_id != session_id)
    ):
        raise NotFound(f"no such conversation under session key {session_key!r}")
    return found


def resolve_for_read(
    session: Session, tenant_id: str, session_key: str, session_id: str | None = None
) -> Conversation:
    """The conversation a read targets: the given session, else the family's latest."""
    repo = ConversationRepository(session)
    found = (
        repo.find_by_session_id(tenant_id, session_key, session_id)
        if session_id is not None
        else repo.find_latest(tenant_id, session_key)
    )
    if found is None:
        raise NotFound(f"no conversation for session key {session_key!r}")
    return found
