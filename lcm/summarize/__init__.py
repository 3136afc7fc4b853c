"""The summarizer layer: prompts, providers and the escalation every summary goes through."""

from lcm.summarize.provider import Completion, SummaryKind, SummaryProvider, SummaryRequest
from lcm.summarize.summarizer import (
    CallUsage,
    Escalation,
    Summarizer,
    SummaryResult,
    build_provider,
)

__all__ = [
    "CallUsage",
    "Completion",
    "Escalation",
    "Summarizer",
    "SummaryKind",
    "SummaryProvider",
    "SummaryRequest",
    "SummaryResult",
    "build_provider",
]
