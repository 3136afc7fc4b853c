"""Escalation: the one path every LCM summary takes (DESIGN §3).

normal (temperature 0.2) -> aggressive (0.1, durable facts only, lower target)
when the output is empty or no smaller than its input -> deterministic
truncation. Provider failures (after the provider's own retries, fallbacks and
breaker) also end in truncation, so a compaction pass always makes progress
and :meth:`Summarizer.summarize` never raises for provider trouble.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from lcm.errors import SummarizerError
from lcm.settings import Settings
from lcm.summarize.extractive import ExtractiveProvider
from lcm.summarize.footer import ensure_footer
from lcm.summarize.llm import LlmClients
from lcm.summarize.provider import (
    AGGRESSIVE_TEMPERATURE,
    NORMAL_TEMPERATURE,
    Completion,
    SummaryProvider,
    SummaryRequest,
)
from lcm.summarize.truncation import truncate_source
from lcm.tokens import estimate_tokens

logger = logging.getLogger(__name__)

Escalation = Literal["normal", "aggressive", "fallback"]

# ``model`` of a summary no model wrote.
TRUNCATION_MODEL = "truncation"
# Below this a target cannot hold a sentence plus the footer.
_MIN_TARGET_TOKENS = 32


@dataclass(frozen=True, slots=True)
class CallUsage:
    """What one provider call cost: one ``llm_usage`` row."""

    model: str
    input_tokens: int
    output_tokens: int
    escalation: Escalation


@dataclass(frozen=True, slots=True)
class SummaryResult:
    """A finished summary, how it was reached, and every call it took."""

    text: str
    token_count: int
    escalation: Escalation
    model: str
    usage: tuple[CallUsage, ...]


class Summarizer:
    """Runs escalation over a :class:`SummaryProvider`.

    Thread-safe as long as the provider is: it keeps no state between calls.
    """

    def __init__(
        self,
        provider: SummaryProvider,
        *,
        truncation_tokens: int = 512,
        custom_instructions: str = "",
    ) -> None:
        self._provider = provider
        self._truncation_tokens = truncation_tokens
        self._custom_instructions = custom_instructions

    @classmethod
    def from_settings(cls, settings: Settings, llm: LlmClients | None) -> Summarizer:
        """A summarizer over :func:`build_provider` with the deployment's defaults."""
        return cls(
            build_provider(settings, llm),
            truncation_tokens=settings.truncation_tokens,
            custom_instructions=settings.custom_instructions,
        )

    def summarize(
        self,
        source_text: str,
        *,
        depth: int,
        target_tokens: int,
        previous_context: str | None = None,
        custom_instructions: str | None = None,
        models: Sequence[str] = (),
        truncation_tokens: int | None = None,
    ) -> SummaryResult:
        """Summarize ``source_text`` (depth 0 = leaf) into about ``target_tokens`` tokens.

        ``custom_instructions``, ``models`` (primary then fallbacks) and
        ``truncation_tokens`` are the tenant's effective settings, passed per
        call; ``None`` / empty keeps the summarizer's defaults (the deployment's).
        """
        if custom_instructions is None:
            custom_instructions = self._custom_instructions
        truncate_to = truncation_tokens or self._truncation_tokens
        input_tokens = estimate_tokens(source_text)
        usage: list[CallUsage] = []
        if not source_text.strip():
            return self._truncated(source_text, usage, truncate_to)  # nothing an LLM could shorten
        normal = SummaryRequest(
            source_text=source_text,
            depth=depth,
            # Asking for more than the input holds invites an output that saves nothing.
            target_tokens=max(_MIN_TARGET_TOKENS, min(target_tokens, input_tokens * 3 // 4)),
            previous_context=previous_context,
            temperature=NORMAL_TEMPERATURE,
            custom_instructions=custom_instructions,
            models=tuple(models),
        )
        aggressive = SummaryRequest(
            source_text=source_text,
            depth=depth,
            target_tokens=max(_MIN_TARGET_TOKENS, min(target_tokens, input_tokens) // 2),
            previous_context=previous_context,
            temperature=AGGRESSIVE_TEMPERATURE,
            aggressive=True,
            custom_instructions=custom_instructions,
            models=tuple(models),
        )
        steps: tuple[tuple[Escalation, SummaryRequest], ...] = (
            ("normal", normal),
            ("aggressive", aggressive),
        )
        for escalation, request in steps:
            completion = self._attempt(request, escalation, usage)
            if completion is None:
                break  # the provider is failing: a second call would only wait again
            text = ensure_footer(completion.text, source_text) if completion.text else ""
            tokens = estimate_tokens(text)
            if text and tokens < input_tokens:
                return SummaryResult(text, tokens, escalation, completion.model, tuple(usage))
            logger.info(
                "%s summary unusable (%d tokens for %d input tokens); escalating",
                escalation,
                tokens,
                input_tokens,
            )
        return self._truncated(source_text, usage, truncate_to)

    def _truncated(self, source_text: str, usage: list[CallUsage], tokens: int) -> SummaryResult:
        text = truncate_source(source_text, tokens)
        return SummaryResult(
            text, estimate_tokens(text), "fallback", TRUNCATION_MODEL, tuple(usage)
        )

    def _attempt(
        self, request: SummaryRequest, escalation: Escalation, usage: list[CallUsage]
    ) -> Completion | None:
        """One provider call, its usage recorded; ``None`` when the provider failed."""
        try:
            completion = self._provider.complete(request)
        except SummarizerError as err:
            logger.warning("summary provider failed (%s); falling back to truncation", err)
            return None
        usage.append(
            CallUsage(
                completion.model, completion.input_tokens, completion.output_tokens, escalation
            )
        )
        return completion


def build_provider(settings: Settings, llm: LlmClients | None) -> SummaryProvider:
    """The Anthropic provider over the process's ``llm``, or the offline one without it.

    ``llm`` is ``None`` exactly when no API key is set (:meth:`LlmClients.from_settings`).
    """
    if llm is not None:
        # Imported here: the SDK takes over a second to import, a cost offline
        # deployments and every importer of this package should not pay.
        from lcm.summarize.anthropic_provider import AnthropicProvider

        return AnthropicProvider.from_settings(settings, llm)
    logger.warning(
        "ANTHROPIC_API_KEY is not set: summaries use the OFFLINE EXTRACTIVE summarizer "
        "(no LLM; summaries are extracts and record model=%r)",
        "extractive",
    )
    return ExtractiveProvider()
