"""The debt row's statements, built once: claims, the fence, the release, owing.

Every pass runs them, and building a statement per call costs several times
the CPU of executing it (a worker runs dozens of passes a second on one
core). :class:`lcm.compaction.debt_repository.DebtRepository` runs them on
the driver, in the session's transaction (``lcm.db.driver``), past the ORM
and SQLAlchemy's execution layer, which they do not need; the fair claims
(``fairness_repository``) build theirs with :func:`claim_statement` too.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    BindParameter,
    Boolean,
    ColumnElement,
    bindparam,
    case,
    func,
    or_,
    select,
    true,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import InstrumentedAttribute
from sqlalchemy.sql.dml import UpdateBase

from lcm.db.driver import DriverStatement
from lcm.db.models import CompactionDebt


class DebtStatus(StrEnum):
    """A compaction debt row's ``status``; the column stores these strings."""

    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


PENDING, RUNNING, DONE, FAILED = (
    DebtStatus.PENDING,
    DebtStatus.RUNNING,
    DebtStatus.DONE,
    DebtStatus.FAILED,
)

# Debt reason of a doctor repair chain (``lcm/doctor``): re-summarize the
# conversation's degraded summaries, then go on as a sweep.
REPAIR = "repair"
# Debt reason of an operator's summary surgery (``lcm/surgery``): its passes
# run first; a chain owed for nothing else then ends instead of sweeping, so a
# dissolved summary's sources are not condensed again at once.
SURGERY = "surgery"


def claim_params(owner: str, now: datetime, lease: timedelta) -> dict[str, Any]:
    """The parameters every claim statement takes."""
    return {"owner": owner, "now": now, "expires": now + lease}


def claim_statement(which: ColumnElement[bool], *, successor: bool = False) -> UpdateBase:
    """A claim of the debt row ``which`` selects, returning what :class:`Claim` holds.

    Parameters: ``owner``, ``now``, ``expires`` (:func:`claim_params`), those
    of ``which``, and ``successor`` (the token handing over) when
    ``successor``. A parameter may not be named like a column of the table.
    """
    now: BindParameter[datetime] = bindparam("now")
    condition: ColumnElement[bool]
    if successor:
        # A chained pass: only the holder of ``successor`` can hand over.
        condition = (CompactionDebt.status == RUNNING) & (
            CompactionDebt.fencing_token == bindparam("successor")
        )
        attempts: ColumnElement[int] | InstrumentedAttribute[int] = CompactionDebt.attempts
    else:
        # A wake-up: pending work, or work whose holder's lease ran out.
        condition = or_(
            CompactionDebt.status == PENDING,
            (CompactionDebt.status == RUNNING) & (CompactionDebt.lease_expires_at < now),
        )
        # Taking over an expired lease counts as a failed attempt of the holder,
        # so a pass that kills its worker every time ends failed.
        attempts = case(
            (CompactionDebt.status == RUNNING, CompactionDebt.attempts + 1),
            else_=CompactionDebt.attempts,
        )
    return (
        update(CompactionDebt)
        .where(which, condition)
        .values(
            status=RUNNING,
            lease_owner=bindparam("owner"),
            lease_expires_at=bindparam("expires"),
            fencing_token=CompactionDebt.fencing_token + 1,
            attempts=attempts,
            updated_at=now,
        )
        .returning(
            CompactionDebt.conversation_id,
            CompactionDebt.tenant_id,
            CompactionDebt.fencing_token,
            CompactionDebt.reason,
            CompactionDebt.token_budget,
            CompactionDebt.target_tokens,
            CompactionDebt.attempts,
            CompactionDebt.enqueued_at,
        )
    )


BY_ID = CompactionDebt.conversation_id == bindparam("debt_id")
CLAIM = DriverStatement(claim_statement(BY_ID))
HAND_OVER = DriverStatement(claim_statement(BY_ID, successor=True))

FENCE = DriverStatement(
    select(CompactionDebt.fencing_token, CompactionDebt.status, CompactionDebt.lease_expires_at)
    .where(BY_ID)
    .with_for_update()
)

_REARMED = CompactionDebt.rearmed.is_(True)
# Reads ``rearmed`` under the row lock it takes, so a turn re-arming the
# debt concurrently is either seen here or waits, then finds the row done
# and makes it pending itself.
RELEASE = DriverStatement(
    update(CompactionDebt)
    .where(BY_ID, CompactionDebt.fencing_token == bindparam("token"))
    .values(
        status=case((_REARMED, PENDING), else_=DONE),
        rearmed=False,
        lease_owner=None,
        lease_expires_at=None,
        attempts=0,
        last_error=None,
        updated_at=bindparam("now"),
        enqueued_at=case((_REARMED, bindparam("now")), else_=CompactionDebt.enqueued_at),
    )
    .returning(CompactionDebt.status)
)


def _owe_statement(insert: Any) -> Any:
    """Insert the debt row, or coalesce into the one there: ``record_debt`` in one statement.

    On a conflict the SET expressions read the row as it was, locked by the
    statement (Postgres waits for a concurrent claim or release to commit and
    then sees its result, as ``SELECT … FOR UPDATE`` did): ``excluded`` is
    the row that would have been inserted (``now`` is its ``updated_at``).
    """
    debt = CompactionDebt.__table__
    stmt = insert(debt)
    new, old = stmt.excluded, debt.c
    # Not NOT IN: an IN list is expanded at execution, which the driver
    # statement does not do (``lcm.db.driver``).
    settled = (old.status != RUNNING) & (old.status != PENDING)
    running = old.status == RUNNING
    # A budget of None (or 0) keeps the one owed.
    budget = func.coalesce(func.nullif(new.token_budget, 0), old.token_budget)
    sets_reason = bindparam("sets_reason", type_=Boolean)
    replaces_target = bindparam("replaces_target", type_=Boolean)
    return stmt.on_conflict_do_update(
        index_elements=[old.conversation_id],
        set_={
            "token_budget": budget,
            "updated_at": new.updated_at,
            # Settled debt starts over with the new reason; otherwise only a
            # repair, manual or overflow debt, or a given target, replaces it.
            # Any debt replaces a surgery: its chain then sweeps once the
            # surgery is done instead of ending (``lcm/compaction/surgery.py``).
            "reason": case(
                (sets_reason | settled | (old.reason == SURGERY), new.reason), else_=old.reason
            ),
            "target_tokens": case((replaces_target, new.target_tokens), else_=old.target_tokens),
            "status": case((settled, PENDING), else_=old.status),
            "attempts": case((settled, 0), else_=old.attempts),
            # Coalesce: however many turns arrive during a sweep, one follow-up.
            "rearmed": case((running, true()), else_=old.rearmed),
            # Woken (enqueued now): settled debt made pending, and running
            # debt whose lease expired (its holder died or stalled: nobody
            # will release the row; the wake-up's claim takes the lease over
            # by bumping the fencing token). A pending row's wake-up is on
            # its way already, a live lease's holder releases into ``rearmed``.
            "enqueued_at": case(
                (running & (old.lease_expires_at < new.updated_at), new.enqueued_at),
                (settled, new.enqueued_at),
                else_=old.enqueued_at,
            ),
        },
    ).returning(old.enqueued_at)


# Built once, Postgres's and SQLite's (the upsert is dialect-specific SQL);
# see above. The columns are those ``DebtRepository.owe`` gives; the others
# get their defaults.
OWE_COLUMNS = (
    "conversation_id",
    "tenant_id",
    "reason",
    "status",
    "token_budget",
    "target_tokens",
    "enqueued_at",
    "updated_at",
)
OWE = DriverStatement(
    _owe_statement(postgresql.insert), OWE_COLUMNS, elsewhere=_owe_statement(sqlite.insert)
)
