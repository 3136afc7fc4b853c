"""The log event of a compaction pass: why it ran, on which range, what it saved.

One INFO line per pass carried out, with the fields operators filter on
(``event=compaction_pass``; see lcm/logs.py). Ids and counts only: never the
text summarized or written.
"""

from __future__ import annotations

import logging

from lcm.compaction.debt_repository import Claim
from lcm.compaction.engine import PassOutcome
from lcm.compaction.planning import PassPlan

log = logging.getLogger("lcm.compaction")


def log_pass(
    claim: Claim, plan: PassPlan, outcome: PassOutcome, budget: int, before_tokens: int
) -> None:
    """One line per compaction decision carried out: why, which range, what it saved."""
    log.info(
        "compaction %s pass on conversation %s: %s -> %s tokens",
        plan.kind,
        claim.conversation_id,
        outcome.tokens_in,
        outcome.tokens_out,
        extra={
            "event": "compaction_pass",
            "reason": claim.reason,
            "kind": plan.kind,
            "depth": plan.depth,
            "first_ordinal": plan.first_ordinal,
            "last_ordinal": plan.last_ordinal,
            "tokens_before": outcome.tokens_in,
            "tokens_after": outcome.tokens_out,
            "context_tokens_before": before_tokens,
            "token_budget": budget,
            "model": outcome.model,
            "escalation": outcome.escalation,
            "degraded": outcome.degraded,
            "duration_ms": outcome.duration_ms,
            "summary_id": outcome.summary_id,
        },
    )
