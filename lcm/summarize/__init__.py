"""The summarizer layer: prompts, providers and the escalation every summary goes through."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lcm.exports import lazy_exports

if TYPE_CHECKING:
    from lcm.summarize.breaker import BreakerState
    from lcm.summarize.connections import LlmConnections
    from lcm.summarize.extractive import EXTRACTIVE_MODEL
    from lcm.summarize.llm import LlmClients
    from lcm.summarize.openai_llm import OpenAiClients, chat_completion
    from lcm.summarize.policy import SummaryPolicy, thinking_of
    from lcm.summarize.provider import Completion, SummaryKind, SummaryProvider, SummaryRequest
    from lcm.summarize.routing import ModelRoute, model_route
    from lcm.summarize.summarizer import (
        CallUsage,
        Escalation,
        Summarizer,
        SummaryResult,
        build_provider,
    )
    from lcm.summarize.truncation import clip_to_tokens

__all__ = [
    "EXTRACTIVE_MODEL",
    "BreakerState",
    "CallUsage",
    "Completion",
    "Escalation",
    "LlmClients",
    "LlmConnections",
    "ModelRoute",
    "OpenAiClients",
    "Summarizer",
    "SummaryKind",
    "SummaryPolicy",
    "SummaryProvider",
    "SummaryRequest",
    "SummaryResult",
    "build_provider",
    "chat_completion",
    "clip_to_tokens",
    "model_route",
    "thinking_of",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "lcm.summarize.breaker": ("BreakerState",),
        "lcm.summarize.extractive": ("EXTRACTIVE_MODEL",),
        "lcm.summarize.connections": ("LlmConnections",),
        "lcm.summarize.llm": ("LlmClients",),
        "lcm.summarize.openai_llm": ("OpenAiClients", "chat_completion"),
        "lcm.summarize.policy": ("SummaryPolicy", "thinking_of"),
        "lcm.summarize.routing": ("ModelRoute", "model_route"),
        "lcm.summarize.provider": (
            "Completion",
            "SummaryKind",
            "SummaryProvider",
            "SummaryRequest",
        ),
        "lcm.summarize.summarizer": (
            "CallUsage",
            "Escalation",
            "Summarizer",
            "SummaryResult",
            "build_provider",
        ),
        "lcm.summarize.truncation": ("clip_to_tokens",),
    },
)
