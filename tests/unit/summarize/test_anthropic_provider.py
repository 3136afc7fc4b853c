"""The Anthropic provider through the real SDK against the fake Messages API server."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from lcm.errors import ProviderUnavailable, SummarizerError
from lcm.settings import Settings
from lcm.summarize.anthropic_provider import SAMPLING_API_VERSION, AnthropicProvider
from lcm.summarize.llm import LlmClients
from lcm.summarize.provider import SummaryRequest
from tests.fakes import Behaviour, FakeAnthropicServer
from tests.unit.summarize.conftest import FALLBACK, PRIMARY, FakeClock, ProviderFactory

SOURCE = (
    "[2026-11-20T10:00:00Z] user: Please move the queue to Redis in workers/app.py.\n"
    "[2026-11-20T10:05:00Z] assistant: Done; we decided to keep acks_late and set the "
    "visibility timeout to 3600 seconds.\n"
) * 5


def request(**changes: object) -> SummaryRequest:
    fields: dict[str, object] = {"source_text": SOURCE, "depth": 0, "target_tokens": 200}
    fields.update(changes)
    return SummaryRequest(**fields)  # type: ignore[arg-type]


def test_ok_reply_carries_text_model_and_usage(
    fake_anthropic: FakeAnthropicServer, make_provider: ProviderFactory
) -> None:
    fake_anthropic.script([Behaviour.reply("The queue moved to Redis.")])
    completion = make_provider().complete(request())
    assert completion.text == "The queue moved to Redis."
    assert completion.model == PRIMARY
    assert completion.input_tokens > 0
    assert completion.output_tokens > 0
    sent = fake_anthropic.requests[0]
    assert sent.model == PRIMARY
    assert sent.max_tokens is not None
    assert sent.max_tokens > 200
    assert "workers/app.py" in sent.user_text
    assert sent.headers["authorization"] == "Bearer sk-test"


@pytest.mark.parametrize("status", ["429", "500", "529"])
def test_transient_error_is_retried_by_the_sdk(
    fake_anthropic: FakeAnthropicServer, make_provider: ProviderFactory, status: str
) -> None:
    fake_anthropic.script([status, "ok"])
    completion = make_provider().complete(request())
    assert completion.text.startswith("Summary of")
    assert len(fake_anthropic.requests) == 2
    # The SDK numbers its attempts; the second one is a retry, not a second call of ours.
    assert [r.headers["x-stainless-retry-count"] for r in fake_anthropic.requests] == ["0", "1"]


def test_primary_always_overloaded_falls_back(
    fake_anthropic: FakeAnthropicServer, make_provider: ProviderFactory
) -> None:
    fake_anthropic.set_default("529", model=PRIMARY)
    provider = make_provider(fallback_models=[FALLBACK], max_retries=1)
    completion = provider.complete(request())
    assert completion.model == FALLBACK
    # One try plus one SDK retry on the primary, then the fallback.
    assert [r.model for r in fake_anthropic.requests] == [PRIMARY, PRIMARY, FALLBACK]


@pytest.mark.parametrize("status", ["500", "404"])
def test_failing_primary_uses_next_fallback(
    fake_anthropic: FakeAnthropicServer, make_provider: ProviderFactory, status: str
) -> None:
    fake_anthropic.set_default(status, model=PRIMARY)
    fake_anthropic.set_default("500", model="claude-second")
    provider = make_provider(fallback_models=["claude-second", FALLBACK], max_retries=0)
    assert provider.complete(request()).model == FALLBACK
    assert [r.model for r in fake_anthropic.requests] == [PRIMARY, "claude-second", FALLBACK]


def test_timeout_falls_back(
    fake_anthropic: FakeAnthropicServer, make_provider: ProviderFactory
) -> None:
    fake_anthropic.script(["latency:1.0"], model=PRIMARY)
    provider = make_provider(fallback_models=[FALLBACK], max_retries=0, timeout_seconds=0.2)
    assert provider.complete(request()).model == FALLBACK


@pytest.mark.parametrize("garbage", ["garbage", "malformed", "html"])
def test_unparseable_reply_is_a_summarizer_error(
    fake_anthropic: FakeAnthropicServer, make_provider: ProviderFactory, garbage: str
) -> None:
    fake_anthropic.script([garbage])
    with pytest.raises(SummarizerError, match="malformed"):
        make_provider().complete(request())


def test_all_models_failing_raises_summarizer_error(
    fake_anthropic: FakeAnthropicServer, make_provider: ProviderFactory
) -> None:
    fake_anthropic.set_default("500")
    with pytest.raises(SummarizerError) as caught:
        make_provider(fallback_models=[FALLBACK], max_retries=0).complete(request())
    assert PRIMARY in caught.value.message
    assert FALLBACK in caught.value.message
    assert not isinstance(caught.value, ProviderUnavailable)


def test_breaker_opens_and_fails_fast_without_network(
    fake_anthropic: FakeAnthropicServer, make_provider: ProviderFactory
) -> None:
    fake_anthropic.set_default("500")
    provider = make_provider(max_retries=0)  # breaker threshold is 3
    for _ in range(3):
        with pytest.raises(SummarizerError):
            provider.complete(request())
    assert len(fake_anthropic.requests) == 3
    with pytest.raises(ProviderUnavailable):
        provider.complete(request())
    assert len(fake_anthropic.requests) == 3  # nothing reached the server


def test_breaker_half_open_trial_recovers(
    fake_anthropic: FakeAnthropicServer, make_provider: ProviderFactory, clock: FakeClock
) -> None:
    fake_anthropic.set_default("529")
    provider = make_provider(max_retries=0)
    for _ in range(3):
        with pytest.raises(SummarizerError):
            provider.complete(request())
    clock.advance(29.9)
    with pytest.raises(ProviderUnavailable):
        provider.complete(request())

    clock.advance(0.2)  # reset period over: one trial call goes out, and fails
    with pytest.raises(SummarizerError) as trial:
        provider.complete(request())
    assert not isinstance(trial.value, ProviderUnavailable)
    assert len(fake_anthropic.requests) == 4
    with pytest.raises(ProviderUnavailable):  # re-opened by the failed trial
        provider.complete(request())

    clock.advance(30)
    fake_anthropic.set_default("ok")
    assert provider.complete(request()).text  # trial succeeds: closed again
    assert provider.complete(request()).text
    assert len(fake_anthropic.requests) == 6


def test_rejected_request_does_not_open_breaker(
    fake_anthropic: FakeAnthropicServer, make_provider: ProviderFactory
) -> None:
    fake_anthropic.set_default("400")
    provider = make_provider(max_retries=0)
    for _ in range(5):
        with pytest.raises(SummarizerError) as caught:
            provider.complete(request())
        assert caught.value.code == "provider_rejected_request"
    assert len(fake_anthropic.requests) == 5  # never failed fast


def test_temperature_is_not_sent_by_default(
    fake_anthropic: FakeAnthropicServer, make_provider: ProviderFactory
) -> None:
    # API 2026-10-21 (the SDK's default) answers 400 to any sampling parameter.
    make_provider().complete(request(temperature=0.1))
    sent = fake_anthropic.requests[0]
    assert "temperature" not in sent.body
    assert sent.headers["anthropic-version"] != SAMPLING_API_VERSION


def test_temperature_is_sent_with_the_api_version_that_accepts_it(
    fake_anthropic: FakeAnthropicServer, make_provider: ProviderFactory
) -> None:
    provider = make_provider(send_temperature=True)
    provider.complete(request(temperature=0.1))
    sent = fake_anthropic.requests[0]
    assert sent.temperature == 0.1
    assert sent.headers["anthropic-version"] == SAMPLING_API_VERSION


def test_from_settings_uses_key_url_models_and_breaker(
    fake_anthropic: FakeAnthropicServer,
) -> None:
    settings = Settings(
        ANTHROPIC_API_KEY="sk-from-settings",
        anthropic_base_url=fake_anthropic.base_url,
        summary_model="claude-a",
        summary_fallback_models=["claude-b"],
        llm_max_retries=0,
        llm_breaker_failures=1,
    )
    fake_anthropic.set_default("500", model="claude-a")
    llm = LlmClients.from_settings(settings)
    assert llm is not None
    provider = AnthropicProvider.from_settings(settings, llm)
    assert provider.models == ["claude-a", "claude-b"]
    assert provider.complete(request()).model == "claude-b"
    assert fake_anthropic.requests[0].headers["authorization"] == "Bearer sk-from-settings"


def test_no_key_means_no_llm_connection() -> None:
    assert LlmClients.from_settings(Settings(ANTHROPIC_API_KEY=None)) is None


def test_connecting_builds_the_sdk_reply_models_before_any_reply() -> None:
    """A fresh process: the models are unbuilt after the import, built once connected.

    Otherwise a worker's first wave of replies builds them on every thread at once.
    """
    code = (
        "import json, anthropic\n"
        "from anthropic.types import Message, Usage\n"
        "from lcm.summarize.llm import LlmClients\n"
        "built = lambda: [Message.__pydantic_complete__, Usage.__pydantic_complete__]\n"
        "before = built()\n"
        "LlmClients.connect(api_key='sk-test')\n"
        "print(json.dumps([before, built()]))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    before, after = json.loads(run.stdout)
    assert before == [False, False]
    assert after == [True, True]
