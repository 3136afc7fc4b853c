"""One running expand-query per caller session (409 ``expansion_busy`` for a second).

An expand-query holds an LLM loop, a worker slot and a reading budget for up
to its deadline; an agent that fires a second one from the same session while
the first runs doubles all three for one question. The guard must hold across
every API process and worker host, and in embedded mode, so it is a database
row (``expansion_leases``), not a process-local lock:

- taken in the transaction that issues the call's grant, so it is committed
  before the job leaves; a concurrent second call conflicts on the primary key;
- released by the API when its wait ends, answered or failed;
- expiring at the call's deadline plus a margin: an API process that died
  while waiting cannot block the session for longer than one call could run,
  and no heartbeat is needed because no call outlives its deadline.

The caller's session is the session key the call names (its own family), the
session key of the conversation it names, or ``key:<id>`` of its API key when
it names neither (``all_conversations`` without a ``session_key``).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from lcm.errors import ExpansionBusy
from lcm.retrieval.lease_repository import LeaseRepository
from lcm.retrieval.repository import HistoryRepository
from lcm.retrieval.scope import ScopeSelector


def caller_session(
    session: Session, tenant_id: str, selector: ScopeSelector, key_id: int | None
) -> str:
    """The session a call comes from, as the lease names it."""
    if selector.session_key is not None:
        return selector.session_key
    if selector.conversation_id is not None:
        key = HistoryRepository(session).session_key_of(selector.conversation_id)
        if key is not None:
            return key
    return f"key:{key_id}"


def hold_session(
    session: Session,
    tenant_id: str,
    caller: str,
    owner: str,
    now: datetime,
    seconds: float,
) -> None:
    """Take the session's lease for ``seconds``; :class:`ExpansionBusy` if one runs."""
    expires_at = now + timedelta(seconds=seconds)
    if not LeaseRepository(session).take(tenant_id, caller, owner, expires_at, now):
        raise ExpansionBusy(
            "an expand-query from this session is still running; wait for its answer"
        )


def release_session(session: Session, tenant_id: str, caller: str, owner: str) -> None:
    LeaseRepository(session).release(tenant_id, caller, owner)
