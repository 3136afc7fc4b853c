"""Escalation: the one path every LCM summary takes (docs/design.md §3).

normal (temperature 0.2) -> aggressive (0.1, durable facts only, lower target)
when the output is empty or no smaller than its input -> deterministic
truncation. Provider failures (after the provider's own retries, fallbacks and
breaker) also end in truncation, so a compaction pass always makes progress
and :meth:`Summarizer.summarize` never raises for provider trouble.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

from lcm.errors import SummarizerError
from lcm.settings import Settings
from lcm.summarize.connections import LlmConnections, routed_provider
from lcm.summarize.extractive import ExtractiveProvider
from lcm.summarize.footer import ensure_footer
from lcm.summarize.llm import LlmClients
from lcm.summarize.policy import DEFAULT_POLICY, SummaryPolicy
from lcm.summarize.provider import (
    AGGRESSIVE_TEMPERATURE,
    NORMAL_TEMPERATURE,
    Completion,
    SummaryProvider,
    SummaryRequest,
    Thinking,
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
    provider: str = ""


@dataclass(frozen=True, slots=True)
class SummaryResult:
    """A finished summary, how it was reached, and every call it took.

    ``degraded`` says why no LLM wrote it although one is configured:
    ``llm_error`` (the provider failed; truncation) or ``budget`` (the
    caller asked for the offline summarizer: the tenant's LLM budget is
    spent). ``None`` for a summary the configured provider wrote.
    """

    text: str
    token_count: int
    escalation: Escalation
    model: str
    usage: tuple[CallUsage, ...]
    degraded: str | None = None


@dataclass(frozen=True, slots=True)
class SummaryCall:
    """One summary's input and the tenant's effective knobs for it."""

    source_text: str
    depth: int
    target_tokens: int
    previous_context: str | None
    custom_instructions: str
    models: tuple[str, ...]
    truncate_to: int
    # A summary over ``max_overage_factor`` x its target escalates even when
    # smaller than its input (None: only "smaller than the input" counts).
    max_overage_factor: float | None
    # What a usable summary must stay under: estimate_tokens(source_text),
    # counted once (a leaf's input is ~50 KB and escalation asks for it at
    # every step), or less when the caller says what the summary replaces
    # costs less than its rendered input (``must_beat_tokens``).
    input_tokens: int
    provider: str | None = None
    thinking: Thinking | None = None

    def steps(self) -> tuple[tuple[Escalation, SummaryRequest], ...]:
        """normal, then aggressive: the requests escalation tries in order."""
        input_tokens = self.input_tokens
        common = {
            "source_text": self.source_text,
            "depth": self.depth,
            "previous_context": self.previous_context,
            "custom_instructions": self.custom_instructions,
            "models": self.models,
            "provider": self.provider,
            "thinking": self.thinking,
        }
        normal = SummaryRequest(
            # Asking for more than the input holds invites an output that saves nothing.
            target_tokens=max(_MIN_TARGET_TOKENS, min(self.target_tokens, input_tokens * 3 // 4)),
            temperature=NORMAL_TEMPERATURE,
            **common,  # type: ignore[arg-type]
        )
        aggressive = SummaryRequest(
            target_tokens=max(_MIN_TARGET_TOKENS, min(self.target_tokens, input_tokens) // 2),
            temperature=AGGRESSIVE_TEMPERATURE,
            aggressive=True,
            **common,  # type: ignore[arg-type]
        )
        return (("normal", normal), ("aggressive", aggressive))

    def usable(self, tokens: int, request: SummaryRequest) -> bool:
        """Smaller than its input and, with an overage factor, not far over its target."""
        if tokens >= self.input_tokens:
            return False
        factor = self.max_overage_factor
        return factor is None or tokens <= factor * request.target_tokens


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
        self._offline = ExtractiveProvider()
        self._truncation_tokens = truncation_tokens
        self._custom_instructions = custom_instructions

    @classmethod
    def from_settings(
        cls, settings: Settings, llm: LlmConnections | LlmClients | None
    ) -> Summarizer:
        """A summarizer over :func:`build_provider` with the deployment's defaults."""
        return cls(
            build_provider(settings, llm),
            truncation_tokens=settings.truncation_tokens,
            custom_instructions=settings.custom_instructions,
        )

    @property
    def uses_llm(self) -> bool:
        """False when the deployment has no LLM (every summary is extractive by design)."""
        return not isinstance(self._provider, ExtractiveProvider)

    def summarize(
        self,
        source_text: str,
        *,
        depth: int,
        target_tokens: int,
        previous_context: str | None = None,
        must_beat_tokens: int | None = None,
        policy: SummaryPolicy = DEFAULT_POLICY,
    ) -> SummaryResult:
        """Summarize ``source_text`` (depth 0 = leaf) into about ``target_tokens`` tokens.

        ``policy`` is what the tenant's effective settings make of it
        (instructions, models, truncation, overage, offline), passed per
        call; its empty fields keep the summarizer's defaults (the deployment's).

        ``must_beat_tokens``: the summary must come out under this many
        tokens, when that is less than the source's own estimate. A
        compaction pass passes what the range it replaces costs in the
        context, less the summary's wrapper: the rendered source carries a
        timestamp per line and can outweigh the context it came from, so
        "smaller than its input" alone let a pass grow the context.
        Truncation is clipped to it too.
        """
        input_tokens = estimate_tokens(source_text)
        provider, models = policy.route(depth)
        truncate_to = policy.truncation_tokens or self._truncation_tokens
        if must_beat_tokens is not None:
            input_tokens = min(input_tokens, max(1, must_beat_tokens))
            truncate_to = min(truncate_to, max(1, must_beat_tokens - 1))
        call = SummaryCall(
            source_text=source_text,
            depth=depth,
            target_tokens=target_tokens,
            previous_context=previous_context,
            custom_instructions=(
                self._custom_instructions
                if policy.custom_instructions is None
                else policy.custom_instructions
            ),
            models=models,
            truncate_to=truncate_to,
            max_overage_factor=policy.max_overage_factor,
            input_tokens=input_tokens,
            provider=provider,
            thinking=policy.thinking,
        )
        if not source_text.strip():
            return _truncated(call, [], None)  # nothing an LLM could shorten
        if policy.offline and self.uses_llm:
            return self._escalate(call, self._offline, "budget")
        return self._escalate(call, self._provider, None)

    def _escalate(
        self, call: SummaryCall, provider: SummaryProvider, degraded: str | None
    ) -> SummaryResult:
        """normal -> aggressive -> truncation; a failing provider goes straight to truncation."""
        usage: list[CallUsage] = []
        for escalation, request in call.steps():
            completion = self._attempt(provider, request, escalation, usage)
            if completion is None:
                # The provider is failing: a second call would only wait again.
                return _truncated(call, usage, degraded or "llm_error")
            text = ensure_footer(completion.text, call.source_text) if completion.text else ""
            tokens = estimate_tokens(text)
            if text and call.usable(tokens, request):
                return SummaryResult(
                    text, tokens, escalation, completion.model, tuple(usage), degraded
                )
            logger.info(
                "%s summary unusable (%d tokens for %d input tokens, target %d); escalating",
                escalation,
                tokens,
                call.input_tokens,
                request.target_tokens,
            )
        return _truncated(call, usage, degraded)

    @staticmethod
    def _attempt(
        provider: SummaryProvider,
        request: SummaryRequest,
        escalation: Escalation,
        usage: list[CallUsage],
    ) -> Completion | None:
        """One provider call, its usage recorded; ``None`` when the provider failed."""
        try:
            completion = provider.complete(request)
        except SummarizerError as err:
            logger.warning("summary provider failed (%s); falling back to truncation", err)
            return None
        usage.append(
            CallUsage(
                completion.model,
                completion.input_tokens,
                completion.output_tokens,
                escalation,
                completion.provider,
            )
        )
        return completion


def _truncated(call: SummaryCall, usage: list[CallUsage], degraded: str | None) -> SummaryResult:
    text = truncate_source(call.source_text, call.truncate_to)
    return SummaryResult(
        text, estimate_tokens(text), "fallback", TRUNCATION_MODEL, tuple(usage), degraded
    )


def build_provider(settings: Settings, llm: LlmConnections | LlmClients | None) -> SummaryProvider:
    """A provider routing between the process's connections, or the offline one without any.

    ``llm`` holds no connection exactly when neither an Anthropic key nor an
    OpenAI-compatible key or endpoint is set (:meth:`LlmConnections.from_settings`).
    """
    connections = LlmConnections.of(llm)
    if connections.any:
        return routed_provider(settings, connections)
    logger.warning(
        "no LLM is configured (ANTHROPIC_API_KEY, LCM_OPENAI_API_KEY, LCM_OPENAI_BASE_URL): "
        "summaries use the OFFLINE EXTRACTIVE summarizer "
        "(no LLM; summaries are extracts and record model=%r)",
        "extractive",
    )
    return ExtractiveProvider()
