"""The LLM spend guard: a tenant's daily token budget, read from ``llm_usage``.

The day is the current UTC day. The guard is checked before work starts (a
summary, an expand-query), so the call that crosses the budget finishes and
the next one is refused or served offline: the budget may be overshot by
at most one call per worker thread, never by a sweep.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta

from sqlalchemy.orm import Session

from lcm.errors import LlmBudgetExhausted
from lcm.settings import TenantLimits
from lcm.tenants.usage_repository import UsageRepository

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SpendState:
    budget: int | None
    spent: int

    @property
    def exhausted(self) -> bool:
        return self.budget is not None and self.spent >= self.budget


def spend_today(
    session: Session, tenant_id: str, limits: TenantLimits, now: datetime | None = None
) -> SpendState:
    """Tokens the tenant's LLM calls used today (UTC) against its daily budget."""
    budget = limits.llm_daily_token_budget
    if budget is None:
        return SpendState(None, 0)  # no budget: no query on the hot path
    day_start = datetime.combine((now or datetime.now(UTC)).astimezone(UTC).date(), time(), UTC)
    return SpendState(budget, UsageRepository(session).llm_tokens_since(tenant_id, day_start))


def llm_budget_exhausted(
    session: Session, tenant_id: str, limits: TenantLimits, purpose: str
) -> bool:
    """True (and a log line saying so) when today's budget is spent."""
    state = spend_today(session, tenant_id, limits)
    if state.exhausted:
        log.warning(
            "tenant %s: daily LLM token budget spent (%d of %d tokens); %s",
            tenant_id,
            state.spent,
            state.budget,
            "summaries use the offline extractive summarizer"
            if purpose == "summary"
            else f"{purpose} refused",
        )
    return state.exhausted


def require_llm_budget(
    session: Session, tenant_id: str, limits: TenantLimits, purpose: str
) -> None:
    """Raise ``LlmBudgetExhausted`` (429) when today's budget is spent."""
    if llm_budget_exhausted(session, tenant_id, limits, purpose):
        now = datetime.now(UTC)
        midnight = datetime.combine(now.date() + timedelta(days=1), time(), UTC)
        raise LlmBudgetExhausted(
            "the tenant's daily LLM token budget is spent; it renews at 00:00 UTC",
            retry_after=max(1, int((midnight - now).total_seconds())),
        )
