"""Compaction: deciding what to summarize (pure planning) and doing it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lcm.exports import lazy_exports

if TYPE_CHECKING:
    from lcm.compaction.debt_repository import (
        UNFINISHED,
        DebtListing,
        DebtRepository,
        debt_overview,
    )
    from lcm.compaction.debt_statements import (
        DONE,
        FAILED,
        PENDING,
        REPAIR,
        RUNNING,
        SURGERY,
        DebtStatus,
    )
    from lcm.compaction.engine import CompactionEngine, PassOutcome
    from lcm.compaction.inline import compact_now, run_inline
    from lcm.compaction.jobs import CompactionJobs
    from lcm.compaction.reconcile import keep_fair_queue, overdue_debts, retry_failed_debt
    from lcm.compaction.repair_repository import has_sources
    from lcm.compaction.repository import CompactionRepository
    from lcm.compaction.service import (
        context_token_total,
        list_debts,
        owe_compaction,
        unfinished_debt,
        wait_for_debt,
    )
    from lcm.compaction.source import new_summary_id
    from lcm.compaction.source_ranges import SourceRangeRepository
    from lcm.compaction.steps import Step, StepAction
    from lcm.compaction.surgery_repository import SurgeryRepository
    from lcm.compaction.sweep import ChainPosition

__all__ = [
    "DONE",
    "FAILED",
    "PENDING",
    "REPAIR",
    "RUNNING",
    "SURGERY",
    "UNFINISHED",
    "ChainPosition",
    "CompactionEngine",
    "CompactionJobs",
    "CompactionRepository",
    "DebtListing",
    "DebtRepository",
    "DebtStatus",
    "PassOutcome",
    "SourceRangeRepository",
    "Step",
    "StepAction",
    "SurgeryRepository",
    "compact_now",
    "context_token_total",
    "debt_overview",
    "has_sources",
    "keep_fair_queue",
    "list_debts",
    "new_summary_id",
    "overdue_debts",
    "owe_compaction",
    "retry_failed_debt",
    "run_inline",
    "unfinished_debt",
    "wait_for_debt",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "lcm.compaction.debt_repository": (
            "DebtListing",
            "DebtRepository",
            "DebtStatus",
            "UNFINISHED",
            "debt_overview",
        ),
        "lcm.compaction.debt_statements": (
            "DONE",
            "DebtStatus",
            "FAILED",
            "PENDING",
            "REPAIR",
            "RUNNING",
            "SURGERY",
        ),
        "lcm.compaction.engine": ("CompactionEngine", "PassOutcome"),
        "lcm.compaction.inline": ("compact_now", "run_inline"),
        "lcm.compaction.jobs": ("CompactionJobs",),
        "lcm.compaction.reconcile": ("keep_fair_queue", "overdue_debts", "retry_failed_debt"),
        "lcm.compaction.repair_repository": ("has_sources",),
        "lcm.compaction.repository": ("CompactionRepository",),
        "lcm.compaction.service": (
            "context_token_total",
            "list_debts",
            "owe_compaction",
            "unfinished_debt",
            "wait_for_debt",
        ),
        "lcm.compaction.source": ("new_summary_id",),
        "lcm.compaction.source_ranges": ("SourceRangeRepository",),
        "lcm.compaction.steps": ("Step", "StepAction"),
        "lcm.compaction.surgery_repository": ("SurgeryRepository",),
        "lcm.compaction.sweep": ("ChainPosition",),
    },
)
