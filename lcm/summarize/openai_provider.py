"""Summaries through an OpenAI-compatible chat-completions API, with the ``openai`` SDK.

Resilience is layered as for Anthropic (:mod:`lcm.summarize.anthropic_provider`):
the SDK's own retries (408/409/429/5xx, connection errors, ``retry-after``
honoured), then a breaker per model, then the next fallback model; when all
fail the summarizer truncates. Every failure leaves as a
:class:`~lcm.errors.SummarizerError`.

Thinking (``enable_summary_thinking``) is sent as ``reasoning_effort`` with
``max_completion_tokens`` covering the thinking budget too, and without a
temperature (reasoning models refuse one). A model that does not reason
either ignores ``reasoning_effort`` (most local servers) or refuses the
request (hosted non-reasoning models: 400, then truncation): turn thinking
on only for a tenant whose models reason.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import openai

from lcm.errors import ProviderUnavailable, SummarizerError
from lcm.settings import Settings
from lcm.summarize.openai_llm import (
    PROVIDER,
    MalformedReply,
    OpenAiClients,
    chat_completion,
)
from lcm.summarize.prompts import build_prompt
from lcm.summarize.provider import Completion, SummaryRequest

logger = logging.getLogger(__name__)

# Statuses that say "this request is wrong", not "the server is unwell".
REQUEST_FAULT_STATUSES = frozenset({400, 413, 422})
REJECTED_CODE = "provider_rejected_request"


class OpenAiProvider:
    """A :class:`~lcm.summarize.provider.SummaryProvider` over chat completions.

    Holds no connection of its own: the process's :class:`OpenAiClients`
    (one SDK client, one breaker per model) is shared with expand-query.
    A request naming no models uses ``default_models``.
    """

    def __init__(self, llm: OpenAiClients, default_models: Sequence[str] = ()) -> None:
        self._llm = llm
        self._models = list(dict.fromkeys(default_models))

    @classmethod
    def from_settings(cls, settings: Settings, llm: OpenAiClients) -> OpenAiProvider:
        return cls(llm, [settings.summary_model, *settings.summary_fallback_models])

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
            except openai.APIStatusError as err:
                if err.status_code in REQUEST_FAULT_STATUSES:
                    request_faults += 1
                failures.append(f"{model}: HTTP {err.status_code}")
            except openai.APIConnectionError as err:
                failures.append(f"{model}: {type(err).__name__}")
            except (openai.OpenAIError, MalformedReply, ValueError) as err:
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
        except openai.APIStatusError as err:
            if err.status_code in REQUEST_FAULT_STATUSES:
                breaker.record_success()  # the server is up; only this request was refused
            else:
                breaker.record_failure()
            raise
        except BaseException:
            breaker.record_failure()  # never leave a half-open trial unresolved
            raise
        breaker.record_success()
        return completion

    def _call(self, model: str, request: SummaryRequest) -> Completion:
        prompt = build_prompt(request)
        extra: dict[str, Any] = {}
        if request.thinking is not None:
            extra["reasoning_effort"] = request.thinking.effort
            extra["max_completion_tokens"] = (
                prompt.max_output_tokens + request.thinking.budget_tokens
            )
        else:
            extra["max_tokens"] = prompt.max_output_tokens
            extra["temperature"] = request.temperature
        reply = chat_completion(
            self._llm,
            model,
            messages=[
                {"role": "system", "content": prompt.system},
                {"role": "user", "content": prompt.user},
            ],
            **extra,
        )
        return Completion(
            text=reply.text,
            model=reply.model,
            input_tokens=reply.input_tokens,
            output_tokens=reply.output_tokens,
            provider=PROVIDER,
        )
