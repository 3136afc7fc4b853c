"""The process's LLM connection: one SDK client per provider, one circuit breaker per model.

Built once by the process's composition root (:mod:`lcm.services`) and shared
by every summary and expand-query loop of every tenant. Only what cannot
differ between tenants lives here (key, endpoint, timeouts, retries, breaker
policy); the model, fallbacks and everything else a tenant may override is
passed per call.

A breaker is per model, not per client: one model overloaded must not stop
calls to the fallback model of the same provider, and a tenant that chose a
model the provider refuses must not open the breaker for everyone else's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lcm.settings import Settings
from lcm.summarize.breaker import BreakerState, CircuitBreaker
from lcm.turns import TurnGate

if TYPE_CHECKING:
    import anthropic


class Breakers:
    """One :class:`CircuitBreaker` per model name, made on first use."""

    def __init__(
        self,
        failure_threshold: int,
        reset_seconds: float,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._threshold = failure_threshold
        self._reset_seconds = reset_seconds
        self._clock = clock
        # Pool threads ask for breakers concurrently: without the lock two
        # threads could each make a breaker for one model, and the failures
        # they count would be split between two objects.
        self._lock = threading.Lock()
        self._by_model: dict[str, CircuitBreaker] = {}

    def for_model(self, model: str) -> CircuitBreaker:
        with self._lock:
            breaker = self._by_model.get(model)
            if breaker is None:
                breaker = CircuitBreaker(self._threshold, self._reset_seconds, clock=self._clock)
                self._by_model[model] = breaker
            return breaker

    def states(self) -> dict[str, BreakerState]:
        """Each model's breaker state (for metrics)."""
        with self._lock:
            breakers = dict(self._by_model)
        return {model: breaker.state for model, breaker in breakers.items()}


@dataclass(frozen=True)
class LlmClients:
    """The Anthropic SDK client and the per-model breakers (thread-safe, shared).

    ``turns`` is the process's turn gate: a call gives up its thread's turn
    while it waits for the model (a no-op for a thread that holds none).
    """

    client: anthropic.Anthropic
    breakers: Breakers
    send_temperature: bool = False
    turns: TurnGate = field(default_factory=lambda: TurnGate(1))

    @classmethod
    def connect(
        cls,
        *,
        api_key: str,
        base_url: str | None = None,
        timeout_seconds: float = 60.0,
        max_retries: int = 3,
        breakers: Breakers | None = None,
        send_temperature: bool = False,
        turns: TurnGate | None = None,
    ) -> LlmClients:
        # Imported here: the SDK takes over a second to import, which offline
        # deployments and every importer of this module should not pay.
        import anthropic

        client = anthropic.Anthropic(
            api_key=api_key,
            base_url=base_url,
            timeout=timeout_seconds,
            max_retries=max_retries,  # the SDK backs off on 408/409/429/5xx itself
        )
        build_reply_models()
        return cls(client, breakers or Breakers(5, 30.0), send_temperature, turns or TurnGate(1))

    @classmethod
    def from_settings(cls, settings: Settings, turns: TurnGate | None = None) -> LlmClients | None:
        """The deployment's connection; ``None`` without an API key (offline)."""
        if settings.anthropic_api_key is None:
            return None
        return cls.connect(
            api_key=settings.anthropic_api_key.get_secret_value(),
            base_url=settings.anthropic_base_url,
            timeout_seconds=settings.llm_timeout_seconds,
            max_retries=settings.llm_max_retries,
            breakers=Breakers(settings.llm_breaker_failures, settings.llm_breaker_reset_seconds),
            send_temperature=settings.llm_send_temperature,
            turns=turns,
        )


# A reply as the Messages API sends it, with every part a summary reads.
_SAMPLE_REPLY: dict[str, Any] = {
    "id": "msg_sample",
    "type": "message",
    "role": "assistant",
    "model": "sample",
    "content": [{"type": "text", "text": ""}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 0, "output_tokens": 0},
}


def build_reply_models() -> None:
    """Have pydantic finish the SDK's reply models now rather than on the first reply.

    The SDK reads a reply into pydantic models (the message, its content
    blocks, its usage) whose schemas pydantic builds on first use: ~7 ms of
    CPU. A worker's first wave of replies arrives together, and then every
    pool thread builds them at once: 25 threads reading their first reply
    together took 13-66 ms, and 9-10 ms with the models built. The SDK
    reads a reply through ``model_construct``, so one sample reply read at
    connect time builds them once.
    """
    import anthropic

    anthropic.types.Message.model_construct(**_SAMPLE_REPLY)
