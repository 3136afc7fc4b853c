"""Summaries through Anthropic's Messages API, with the official SDK.

Resilience is layered, innermost first:

1. the SDK retries 408/409/429 and every 5xx (500, 529 overloaded included)
   and connection errors, with exponential backoff that honours
   ``retry-after``; we only set ``max_retries`` and the timeout;
2. a circuit breaker per model, shared by all threads, stops calling a model
   that keeps failing, so passes move on at once instead of waiting out
   timeouts;
3. when a model fails (or its breaker is open), the next fallback model is
   tried; when all fail, the summarizer falls back to truncation.

Every failure leaves this module as a :class:`~lcm.errors.SummarizerError`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import anthropic

from lcm.errors import ProviderUnavailable, SummarizerError
from lcm.settings import Settings
from lcm.summarize.llm import LlmClients
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

    Holds no connection of its own: the process's :class:`LlmClients` (one
    SDK client, one breaker per model) is shared with expand-query. The
    models come with each request (the tenant's effective settings); a
    request naming none uses ``default_models``.

    ``send_temperature`` (on the clients) is off by default because the SDK's
    default API version refuses sampling parameters; escalation then rests on
    the prompt and the lower token limit alone. Turning it on sends the
    escalation temperature together with ``anthropic-version: 2023-06-01``.
    """

    def __init__(self, llm: LlmClients, default_models: Sequence[str] = ()) -> None:
        self._llm = llm
        self._models = list(dict.fromkeys(default_models))

    @classmethod
    def from_settings(cls, settings: Settings, llm: LlmClients) -> AnthropicProvider:
        """A provider over the process's ``llm`` defaulting to the settings' models."""
        return cls(llm, [settings.summary_model, *settings.summary_fallback_models])

    @property
    def models(self) -> list[str]:
        """The default primary model followed by the fallbacks, in the order they are tried."""
        return list(self._models)

    def complete(self, request: SummaryRequest) -> Completion:
        """One summary: the primary model, then the fallbacks, each behind its own breaker."""
        failures: list[str] = []
        request_faults = open_circuits = 0
        models = list(dict.fromkeys(request.models)) or self._models
        if not models:
            raise SummarizerError("no summary model configured")
        for model in models:
            try:
                return self._guarded_call(model, request)
            except ProviderUnavailable as err:
                open_circuits += 1
                failures.append(f"{model}: {err.message}")
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
        if open_circuits == len(models):
            raise ProviderUnavailable(f"every summary model's circuit is open: {detail}")
        raise SummarizerError(f"all summary models failed: {detail}")

    def _guarded_call(self, model: str, request: SummaryRequest) -> Completion:
        """One call to ``model`` through its breaker (which may refuse it at once)."""
        breaker = self._llm.breakers.for_model(model)
        breaker.before_call()
        try:
            completion = self._call(model, request)
        except anthropic.APIStatusError as err:
            if err.status_code in _REQUEST_FAULT_STATUSES:
                # The API is up and answered; only this request was refused.
                breaker.record_success()
            else:
                breaker.record_failure()
            raise
        except BaseException:
            # Never leave a half-open trial unresolved, or the breaker would stay
            # half-open with no call admitted.
            breaker.record_failure()
            raise
        breaker.record_success()
        return completion

    def _call(self, model: str, request: SummaryRequest) -> Completion:
        prompt = build_prompt(request)
        extra: dict[str, Any] = {}
        max_tokens = prompt.max_output_tokens
        if request.thinking is not None:
            # The budget is part of max_tokens, so the summary keeps its own room;
            # the API refuses a temperature other than 1 with thinking on.
            budget = request.thinking.budget_tokens
            extra["thinking"] = {"type": "enabled", "budget_tokens": budget}
            max_tokens += budget
        elif self._llm.send_temperature:
            extra["extra_body"] = {"temperature": request.temperature}
            extra["extra_headers"] = {"anthropic-version": SAMPLING_API_VERSION}
        with self._llm.turns.step_aside():  # other passes work while this one waits
            message: object = self._llm.client.messages.create(
                model=model,
                max_tokens=max_tokens,
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
    # Only text blocks: ``thinking`` (and ``redacted_thinking``) blocks are the
    # model's reasoning, billed in output_tokens but never part of a summary.
    for block in content:
        if getattr(block, "type", None) == "text" and isinstance(getattr(block, "text", None), str):
            texts.append(block.text)
    model = getattr(message, "model", None)
    return Completion(
        text="".join(texts).strip(),
        model=model if isinstance(model, str) and model else requested_model,
        input_tokens=_token_count(getattr(usage, "input_tokens", None)),
        output_tokens=_token_count(getattr(usage, "output_tokens", None)),
        provider="anthropic",
    )


def _token_count(value: object) -> int:
    return value if isinstance(value, int) and value >= 0 else 0
