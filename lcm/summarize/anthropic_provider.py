"""Summaries through Anthropic's Messages API, with the official SDK.

Resilience is layered, innermost first:

1. the SDK retries 408/409/429 and every 5xx (500, 529 overloaded included)
   and connection errors, with exponential backoff that honours
   ``retry-after``; we only set ``max_retries`` and the timeout;
2. when a model still fails, the next fallback model is tried;
3. a circuit breaker shared by all threads stops calling a provider that keeps
   failing, so passes fall back to truncation at once instead of waiting out
   timeouts.

Every failure leaves this module as a :class:`~lcm.errors.SummarizerError`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import anthropic

from lcm.errors import SummarizerError
from lcm.settings import Settings
from lcm.summarize.breaker import CircuitBreaker
from lcm.summarize.prompts import build_prompt
from lcm.summarize.provider import Completion, SummaryRequest

logger = logging.getLogger(__name__)

# The SDK pins API version 2026-10-21, which rejects temperature/top_p/top_k with
# a 400 at any value, and it no longer accepts them as arguments. Sending a
# temperature therefore means asking for the previous API version explicitly.
SAMPLING_API_VERSION = "2023-06-01"
# Statuses that say "this request is wrong", not "the provider is unwell".
_REQUEST_FAULT_STATUSES = frozenset({400, 413, 422})
REJECTED_CODE = "provider_rejected_request"


class _MalformedResponse(Exception):
    """The API answered 2xx with something that is not a Messages API message."""


class AnthropicProvider:
    """A :class:`~lcm.summarize.provider.SummaryProvider` backed by Claude models.

    ``send_temperature`` is off by default because the SDK's default API
    version refuses sampling parameters; escalation then rests on the prompt
    and the lower token limit alone. Turning it on sends the escalation
    temperature together with ``anthropic-version: 2023-06-01``.
    """

    def __init__(
        self,
        *,
        api_key: str,
        model: str,
        fallback_models: Sequence[str] = (),
        base_url: str | None = None,
        timeout_seconds: float = 60.0,
        max_retries: int = 3,
        breaker: CircuitBreaker | None = None,
        send_temperature: bool = False,
    ) -> None:
        self._client = anthropic.Anthropic(
            api_key=api_key,
            base_url=base_url,
            timeout=timeout_seconds,
            max_retries=max_retries,
        )
        self._models = list(dict.fromkeys([model, *fallback_models]))
        self._breaker = breaker or CircuitBreaker(5, 30.0)
        self._send_temperature = send_temperature

    @classmethod
    def from_settings(
        cls, settings: Settings, *, breaker: CircuitBreaker | None = None
    ) -> AnthropicProvider:
        """A provider configured from ``settings`` (which must carry an API key)."""
        if settings.anthropic_api_key is None:
            raise SummarizerError("no Anthropic API key configured")
        return cls(
            api_key=settings.anthropic_api_key.get_secret_value(),
            model=settings.summary_model,
            fallback_models=settings.summary_fallback_models,
            base_url=settings.anthropic_base_url,
            timeout_seconds=settings.llm_timeout_seconds,
            max_retries=settings.llm_max_retries,
            breaker=breaker
            or CircuitBreaker(settings.llm_breaker_failures, settings.llm_breaker_reset_seconds),
            send_temperature=settings.llm_send_temperature,
        )

    @property
    def models(self) -> list[str]:
        """The primary model followed by the fallbacks, in the order they are tried."""
        return list(self._models)

    def complete(self, request: SummaryRequest) -> Completion:
        """One summary: primary model, then fallbacks, guarded by the breaker."""
        self._breaker.before_call()
        try:
            completion = self._complete_with_fallbacks(request)
        except SummarizerError as err:
            if err.code == REJECTED_CODE:
                # The API is up and answered; only this request was refused.
                self._breaker.record_success()
            else:
                self._breaker.record_failure()
            raise
        except BaseException:
            # Never leave a half-open trial unresolved, or the breaker would stay
            # half-open with no call admitted.
            self._breaker.record_failure()
            raise
        self._breaker.record_success()
        return completion

    def _complete_with_fallbacks(self, request: SummaryRequest) -> Completion:
        failures: list[str] = []
        request_faults = 0
        # The tenant's models when the request names them (one client and one
        # breaker serve every tenant), else the deployment's.
        models = list(dict.fromkeys(request.models)) or self._models
        for model in models:
            try:
                return self._call(model, request)
            except anthropic.APIStatusError as err:
                if err.status_code in _REQUEST_FAULT_STATUSES:
                    request_faults += 1
                error_type = getattr(err, "type", None) or ""  # absent before SDK 2.x
                failures.append(f"{model}: HTTP {err.status_code} {error_type}".rstrip())
            except anthropic.APIConnectionError as err:
                failures.append(f"{model}: {type(err).__name__}")
            except (anthropic.AnthropicError, _MalformedResponse, ValueError) as err:
                # ValueError covers a 2xx body that is not JSON at all.
                failures.append(f"{model}: malformed response ({type(err).__name__})")
            logger.warning("summary call failed: %s", failures[-1])
        detail = "; ".join(failures)
        if request_faults == len(models):
            raise SummarizerError(f"LLM rejected the request: {detail}", code=REJECTED_CODE)
        raise SummarizerError(f"all summary models failed: {detail}")

    def _call(self, model: str, request: SummaryRequest) -> Completion:
        prompt = build_prompt(request)
        extra: dict[str, Any] = {}
        if self._send_temperature:
            extra["extra_body"] = {"temperature": request.temperature}
            extra["extra_headers"] = {"anthropic-version": SAMPLING_API_VERSION}
        message: object = self._client.messages.create(
            model=model,
            max_tokens=prompt.max_output_tokens,
            system=prompt.system,
            messages=[{"role": "user", "content": prompt.user}],
            **extra,
        )
        return _to_completion(message, model)


def _to_completion(message: object, requested_model: str) -> Completion:
    """Validate the parts of a response we rely on; the SDK does not by default."""
    if not isinstance(message, anthropic.types.Message):
        # A 2xx body with a non-JSON content type comes back as a plain string.
        raise _MalformedResponse(f"expected a message, got {type(message).__name__}")
    content = getattr(message, "content", None)
    usage = getattr(message, "usage", None)
    if not isinstance(content, list) or usage is None:
        raise _MalformedResponse("message without content list or usage")
    texts = []
    for block in content:
        if getattr(block, "type", None) == "text" and isinstance(getattr(block, "text", None), str):
            texts.append(block.text)
    model = getattr(message, "model", None)
    return Completion(
        text="".join(texts).strip(),
        model=model if isinstance(model, str) and model else requested_model,
        input_tokens=_token_count(getattr(usage, "input_tokens", None)),
        output_tokens=_token_count(getattr(usage, "output_tokens", None)),
    )


def _token_count(value: object) -> int:
    return value if isinstance(value, int) and value >= 0 else 0
