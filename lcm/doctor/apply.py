"""The doctor's apply as one use case (``POST /v1/tenant/doctor/apply``).

Structural problems are repaired in the unit of work this opens, and the
LLM repairs of degraded summaries are owed there too (leased compaction
chains, reason ``repair``). Deferred mode leaves them to workers (their
wake-ups leave with the commit); inline mode runs them here, after it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from lcm.compaction.inline import run_inline
from lcm.compaction.jobs import CompactionJobs
from lcm.db.engine import Transaction
from lcm.doctor.service import request_repair
from lcm.doctor.structure import StructuralRepair, repair_structure


@dataclass(frozen=True, slots=True)
class DoctorApplied:
    """``none`` (nothing owed), ``ran`` (every repair done here) or ``scheduled``."""

    status: Literal["none", "ran", "scheduled"]
    conversations: list[int]  # those a repair is owed for
    repaired: list[StructuralRepair]


def apply_repairs(
    transaction: Transaction,
    inline_jobs: Callable[[], CompactionJobs],
    tenant_id: str,
    conversation_id: int | None,
    mode: str,
) -> DoctorApplied:
    """Repair structure here; re-summarize degraded summaries with leased jobs.

    ``mode`` is the tenant's effective ``compaction_mode``. A repair that
    found the LLM still down ends ``retry`` (its debt retries later), and
    the outcome is then ``scheduled``.
    """
    with transaction() as session:
        fixed = repair_structure(session, tenant_id, conversation_id)
        owed = request_repair(session, tenant_id, conversation_id, mode=mode)
    if not owed:
        return DoctorApplied("none", [], fixed)
    if mode == "inline":
        reports = [run_inline(inline_jobs(), cid) for cid in owed]
        if all(r is not None and r.ended == "done" for r in reports):
            return DoctorApplied("ran", owed, fixed)
    return DoctorApplied("scheduled", owed, fixed)


__all__ = ["DoctorApplied", "apply_repairs"]
