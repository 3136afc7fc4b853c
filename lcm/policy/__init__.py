"""Context policy every feature shares: the fresh tail, the compaction threshold,
the per-model and per-session overrides, the timestamp format and the escaping
of wrapper markup.

Assembly, ingest and compaction all follow these rules, so they live below
all three and import only the ground (``lcm.settings``, ``lcm.context``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lcm.exports import lazy_exports

if TYPE_CHECKING:
    from lcm.policy.fresh_tail import ContextSplit, fresh_tail_start, split_fresh_tail, unsafe_cuts
    from lcm.policy.markup import escape_markup, unescape_markup
    from lcm.policy.overrides import ModelInfo, for_model, settings_for_call
    from lcm.policy.summary_models import (
        for_session,
        matching_summary_rule,
        summary_models_for_session,
    )
    from lcm.policy.threshold import ThresholdCheck, evaluate_threshold
    from lcm.policy.timestamps import format_timestamp

__all__ = [
    "ContextSplit",
    "ModelInfo",
    "ThresholdCheck",
    "escape_markup",
    "evaluate_threshold",
    "for_model",
    "for_session",
    "format_timestamp",
    "fresh_tail_start",
    "matching_summary_rule",
    "settings_for_call",
    "split_fresh_tail",
    "summary_models_for_session",
    "unescape_markup",
    "unsafe_cuts",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "lcm.policy.fresh_tail": (
            "ContextSplit",
            "fresh_tail_start",
            "split_fresh_tail",
            "unsafe_cuts",
        ),
        "lcm.policy.markup": ("escape_markup", "unescape_markup"),
        "lcm.policy.overrides": ("ModelInfo", "for_model", "settings_for_call"),
        "lcm.policy.summary_models": (
            "for_session",
            "matching_summary_rule",
            "summary_models_for_session",
        ),
        "lcm.policy.threshold": ("ThresholdCheck", "evaluate_threshold"),
        "lcm.policy.timestamps": ("format_timestamp",),
    },
)
