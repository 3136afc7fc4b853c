"""The process's LLM connections, one per provider, and the provider that routes between them.

A tenant picks its provider per call (``summary_provider``, per purpose and
depth, :mod:`lcm.summarize.routing`); the connections themselves are the
deployment's, built once by the composition root (:mod:`lcm.services`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from lcm.errors import SummarizerError
from lcm.settings import Settings
from lcm.summarize.breaker import BreakerState
from lcm.summarize.llm import LlmClients
from lcm.summarize.openai_llm import PROVIDER as OPENAI
from lcm.summarize.openai_llm import OpenAiClients
from lcm.summarize.provider import Completion, SummaryProvider, SummaryRequest
from lcm.turns import TurnGate

ANTHROPIC = "anthropic"
NOT_CONFIGURED_CODE = "provider_not_configured"


@dataclass(frozen=True)
class LlmConnections:
    """Every configured provider's SDK client and breakers; ``None`` for one not configured."""

    anthropic: LlmClients | None = None
    openai: OpenAiClients | None = None

    @classmethod
    def from_settings(cls, settings: Settings, turns: TurnGate | None = None) -> LlmConnections:
        return cls(
            LlmClients.from_settings(settings, turns), OpenAiClients.from_settings(settings, turns)
        )

    @classmethod
    def of(cls, llm: LlmConnections | LlmClients | None) -> LlmConnections:
        """``llm`` as connections (an Anthropic-only client set is one provider's)."""
        if isinstance(llm, LlmConnections):
            return llm
        return cls(anthropic=llm)

    @property
    def any(self) -> bool:
        """False offline: no provider configured (the extractive summarizer writes)."""
        return self.anthropic is not None or self.openai is not None

    def breaker_states(self) -> dict[str, BreakerState]:
        """Each model's breaker; an OpenAI-compatible model's name is prefixed ``openai:``."""
        states: dict[str, BreakerState] = {}
        if self.anthropic is not None:
            states.update(self.anthropic.breakers.states())
        if self.openai is not None:
            states.update({f"{OPENAI}:{m}": s for m, s in self.openai.breakers.states().items()})
        return states


class RoutedProvider:
    """Sends each request to the provider it names (else the deployment's default)."""

    def __init__(self, providers: Mapping[str, SummaryProvider], default: str) -> None:
        self._providers = dict(providers)
        self._default = default

    def provider_for(self, name: str | None) -> SummaryProvider | None:
        return self._providers.get(name or self._default)

    def complete(self, request: SummaryRequest) -> Completion:
        name = request.provider or self._default
        provider = self._providers.get(name)
        if provider is None:
            # A tenant chose a provider the deployment has no key or endpoint
            # for: the summary is truncated (degraded) rather than lost.
            raise SummarizerError(
                f"summary provider {name!r} is not configured on this deployment",
                code=NOT_CONFIGURED_CODE,
            )
        return provider.complete(request)


def routed_provider(settings: Settings, connections: LlmConnections) -> RoutedProvider:
    """A provider per configured connection, defaulting to ``settings.summary_provider``."""
    # Imported here: each SDK takes about a second to import.
    providers: dict[str, SummaryProvider] = {}
    if connections.anthropic is not None:
        from lcm.summarize.anthropic_provider import AnthropicProvider

        providers[ANTHROPIC] = AnthropicProvider.from_settings(settings, connections.anthropic)
    if connections.openai is not None:
        from lcm.summarize.openai_provider import OpenAiProvider

        providers[OPENAI] = OpenAiProvider.from_settings(settings, connections.openai)
    return RoutedProvider(providers, settings.summary_provider)
