"""What a tenant's settings make of one summary, as one value (:class:`SummaryPolicy`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lcm.settings import CompactionSettings
from lcm.summarize.provider import Thinking
from lcm.summarize.routing import ModelRoute, model_route


@dataclass(frozen=True, slots=True)
class SummaryPolicy:
    """The tenant's effective knobs for a summary, passed per call.

    ``None`` or empty keeps the summarizer's defaults (the deployment's).
    ``offline`` asks for the extractive summarizer instead of the LLM (the
    spend guard); the result is then marked degraded with reason ``budget``.
    A new setting that changes summaries is read in :meth:`of`, one place.
    """

    custom_instructions: str | None = None
    models: tuple[str, ...] = ()  # primary, then fallbacks
    truncation_tokens: int | None = None
    # A summary over this many times its target escalates (None: only
    # "smaller than its input" counts).
    max_overage_factor: float | None = None
    offline: bool = False
    provider: str | None = None  # None: the deployment's summary provider
    thinking: Thinking | None = None
    # Where depth rules come from (``summary_model_rules``); None: ``models`` at every depth.
    routing: CompactionSettings | None = None

    @classmethod
    def of(cls, settings: CompactionSettings, *, offline: bool = False) -> SummaryPolicy:
        """The policy of a tenant's effective ``settings``."""
        return cls(
            custom_instructions=settings.custom_instructions,
            models=(settings.summary_model, *settings.summary_fallback_models),
            truncation_tokens=settings.truncation_tokens,
            max_overage_factor=settings.summary_max_overage_factor,
            offline=offline,
            provider=settings.summary_provider,
            thinking=thinking_of(settings),
            routing=settings,
        )

    @classmethod
    def for_models(
        cls, models: Sequence[str], custom_instructions: str | None = None
    ) -> SummaryPolicy:
        """Only ``models`` (and instructions) chosen; every other knob the deployment's."""
        return cls(custom_instructions=custom_instructions, models=tuple(models))

    @classmethod
    def for_route(
        cls, route: ModelRoute, custom_instructions: str | None, thinking: Thinking | None
    ) -> SummaryPolicy:
        """A fixed provider and models (a large file's), with instructions and thinking."""
        return cls(
            custom_instructions=custom_instructions,
            models=route.models,
            provider=route.provider,
            thinking=thinking,
        )

    def route(self, depth: int) -> tuple[str | None, tuple[str, ...]]:
        """The provider and models of a summary at ``depth`` (:func:`model_route`)."""
        if self.routing is None:
            return self.provider, self.models
        chosen = model_route(self.routing, "summary", depth)
        return chosen.provider, chosen.models


def thinking_of(settings: CompactionSettings) -> Thinking | None:
    """The thinking ``settings`` ask of summary calls, or None (off)."""
    if not settings.enable_summary_thinking:
        return None
    return Thinking(settings.summary_thinking_budget_tokens, settings.summary_reasoning_effort)


DEFAULT_POLICY = SummaryPolicy()

__all__ = ["DEFAULT_POLICY", "SummaryPolicy", "thinking_of"]
