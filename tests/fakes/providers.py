"""The real Anthropic provider pointed at the fake server, as the tests build it."""

from __future__ import annotations

from collections.abc import Sequence

from lcm.summarize.anthropic_provider import AnthropicProvider
from lcm.summarize.llm import Breakers, LlmClients
from lcm.summarize.openai_llm import OpenAiClients
from lcm.summarize.openai_provider import OpenAiProvider
from lcm.turns import TurnGate


def anthropic_provider(
    base_url: str,
    model: str = "claude-test",
    *,
    fallback_models: Sequence[str] = (),
    api_key: str = "sk-test",
    timeout_seconds: float = 5.0,
    max_retries: int = 0,
    breakers: Breakers | None = None,
    send_temperature: bool = False,
    turns: TurnGate | None = None,
) -> AnthropicProvider:
    llm = LlmClients.connect(
        api_key=api_key,
        base_url=base_url,
        timeout_seconds=timeout_seconds,
        max_retries=max_retries,
        breakers=breakers,
        send_temperature=send_temperature,
        turns=turns,
    )
    return AnthropicProvider(llm, [model, *fallback_models])


def openai_clients(
    base_url: str,
    *,
    stream: bool = False,
    max_retries: int = 0,
    breakers: Breakers | None = None,
    timeout_seconds: float = 5.0,
) -> OpenAiClients:
    return OpenAiClients.connect(
        api_key="sk-test",
        base_url=base_url,
        timeout_seconds=timeout_seconds,
        max_retries=max_retries,
        breakers=breakers,
        stream=stream,
    )


def openai_provider(
    base_url: str,
    model: str = "local-llama",
    *,
    fallback_models: Sequence[str] = (),
    stream: bool = False,
    max_retries: int = 0,
    breakers: Breakers | None = None,
) -> OpenAiProvider:
    """The real OpenAI-compatible provider pointed at the fake chat-completions server."""
    clients = openai_clients(base_url, stream=stream, max_retries=max_retries, breakers=breakers)
    return OpenAiProvider(clients, [model, *fallback_models])
