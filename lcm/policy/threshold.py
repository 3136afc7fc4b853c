"""When a context owes compaction: its tokens against a share of the budget."""

from __future__ import annotations

from decimal import Decimal
from typing import NamedTuple

from lcm.settings import CompactionSettings

__all__ = ["ThresholdCheck", "evaluate_threshold"]


class ThresholdCheck(NamedTuple):
    threshold_tokens: int
    over_threshold: bool


def evaluate_threshold(
    context_tokens: int, token_budget: int, settings: CompactionSettings
) -> ThresholdCheck:
    """``threshold_tokens = floor(context_threshold * budget)``; over means ``≥``."""
    if token_budget < 1:
        raise ValueError("token_budget must be positive")
    # Decimal keeps e.g. 0.29 * 100 at 29 instead of float's 28.999….
    threshold = int(Decimal(repr(settings.context_threshold)) * token_budget)
    return ThresholdCheck(threshold, context_tokens >= threshold)
