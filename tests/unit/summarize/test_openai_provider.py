"""The OpenAI-compatible provider through the real ``openai`` SDK against the fake server."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from lcm.errors import ProviderUnavailable, SummarizerError
from lcm.settings import Settings
from lcm.summarize.breaker import BreakerState
from lcm.summarize.connections import LlmConnections, RoutedProvider
from lcm.summarize.llm import Breakers
from lcm.summarize.openai_llm import without_thinking
from lcm.summarize.openai_provider import OpenAiProvider
from lcm.summarize.policy import SummaryPolicy
from lcm.summarize.provider import SummaryRequest, Thinking
from lcm.summarize.summarizer import Summarizer, build_provider
from lcm.tokens import estimate_tokens
from tests.fakes import Behaviour, FakeAnthropicServer, FakeOpenAiServer
from tests.fakes.anthropic_script import THOUGHT
from tests.fakes.providers import anthropic_provider, openai_provider
from tests.unit.summarize.conftest import FakeClock

SOURCE = (
    "[2026-11-20T10:00:00Z] user: Please move the queue to Redis in workers/app.py.\n"
    "[2026-11-20T10:05:00Z] assistant: Done; we kept acks_late and set the "
    "visibility timeout to 3600 seconds.\n"
) * 5


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAiServer]:
    with FakeOpenAiServer() as server:
        yield server


def request(**changes: object) -> SummaryRequest:
    fields: dict[str, object] = {"source_text": SOURCE, "depth": 0, "target_tokens": 200}
    fields.update(changes)
    return SummaryRequest(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize("stream", [False, True])
def test_a_summary_through_chat_completions(fake_openai: FakeOpenAiServer, stream: bool) -> None:
    fake_openai.script([Behaviour.reply("The queue moved to Redis (workers/app.py).")])
    completion = openai_provider(fake_openai.base_url, stream=stream).complete(request())
    assert completion.text == "The queue moved to Redis (workers/app.py)."
    assert (completion.model, completion.provider) == ("local-llama", "openai")
    assert completion.input_tokens > 0
    assert completion.output_tokens > 0
    sent = fake_openai.requests[0]
    assert sent.model == "local-llama"
    roles = [m["role"] for m in sent.messages]
    assert roles == ["system", "user"]
    assert "workers/app.py" in sent.messages[1]["content"]
    assert sent.body["temperature"] == 0.2
    assert sent.body["max_tokens"] > 200
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert sent.body.get("stream", False) is stream
    if stream:
        assert sent.body["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize("status", ["429", "500"])
def test_transient_errors_are_retried_by_the_sdk(
    fake_openai: FakeOpenAiServer, status: str
) -> None:
    fake_openai.script([status, "ok"])
    completion = openai_provider(fake_openai.base_url, max_retries=1).complete(request())
    assert completion.text.startswith("Summary of")
    assert len(fake_openai.requests) == 2


def test_a_failing_model_falls_back_and_its_breaker_opens(fake_openai: FakeOpenAiServer) -> None:
    clock = FakeClock()
    breakers = Breakers(2, 30.0, clock=clock)
    fake_openai.set_default("500", model="down")
    provider = openai_provider(
        fake_openai.base_url, "down", fallback_models=["up"], breakers=breakers
    )
    for _ in range(3):
        assert provider.complete(request()).model == "up"
    # The third call skipped the open breaker: two requests reached "down".
    assert len(fake_openai.requests_for("down")) == 2
    assert breakers.states() == {"down": BreakerState.OPEN, "up": BreakerState.CLOSED}


@pytest.mark.parametrize("kind", ["garbage", "malformed", "html"])
def test_a_reply_that_is_no_completion_is_a_summarizer_error(
    fake_openai: FakeOpenAiServer, kind: str
) -> None:
    fake_openai.set_default(kind)
    with pytest.raises(SummarizerError, match="malformed response"):
        openai_provider(fake_openai.base_url).complete(request())


def test_a_refused_request_is_rejected_without_opening_the_breaker(
    fake_openai: FakeOpenAiServer,
) -> None:
    breakers = Breakers(1, 30.0)
    fake_openai.set_default("400")
    provider = openai_provider(fake_openai.base_url, breakers=breakers)
    with pytest.raises(SummarizerError) as caught:
        provider.complete(request())
    assert caught.value.code == "provider_rejected_request"
    assert breakers.states() == {"local-llama": BreakerState.CLOSED}


def test_every_breaker_open_is_provider_unavailable(fake_openai: FakeOpenAiServer) -> None:
    breakers = Breakers(1, 30.0)
    fake_openai.set_default("500")
    provider = openai_provider(fake_openai.base_url, breakers=breakers)
    with pytest.raises(SummarizerError):
        provider.complete(request())
    with pytest.raises(ProviderUnavailable):
        provider.complete(request())
    assert len(fake_openai.requests) == 1


@pytest.mark.parametrize("stream", [False, True])
def test_thinking_asks_reasoning_effort_and_keeps_reasoning_out_of_the_text(
    fake_openai: FakeOpenAiServer, stream: bool
) -> None:
    fake_openai.script([Behaviour.reply("Redis now carries the queue.")])
    provider = openai_provider(fake_openai.base_url, stream=stream)
    completion = provider.complete(request(thinking=Thinking(2_048, "medium")))
    sent = fake_openai.requests[0].body
    assert sent["reasoning_effort"] == "medium"
    assert sent["max_completion_tokens"] > 2_048
    assert "max_tokens" not in sent
    assert "temperature" not in sent  # reasoning models refuse one
    assert completion.text == "Redis now carries the queue."
    assert THOUGHT not in completion.text
    plain = openai_provider(fake_openai.base_url).complete(request())
    # The reasoning tokens are billed as output, and counted so.
    assert completion.output_tokens >= plain.output_tokens


def test_inline_think_blocks_are_cut_out() -> None:
    assert without_thinking("<think>a\nb</think>\nanswer") == "answer"
    assert without_thinking("answer <think>cut off mid-thought") == "answer"
    assert without_thinking("plain") == "plain"


def test_anthropic_thinking_sends_the_budget_and_drops_thinking_blocks() -> None:
    with FakeAnthropicServer() as fake:
        fake.script([Behaviour.reply("Redis now carries the queue.")])
        provider = anthropic_provider(fake.base_url, send_temperature=True)
        completion = provider.complete(request(thinking=Thinking(1_500)))
        plain = provider.complete(request())
        sent, unthought = fake.requests
    assert sent.body["thinking"] == {"type": "enabled", "budget_tokens": 1_500}
    assert sent.max_tokens is not None
    assert unthought.max_tokens is not None
    assert sent.max_tokens == unthought.max_tokens + 1_500
    assert "temperature" not in sent.body  # refused with thinking on
    assert completion.text == "Redis now carries the queue."
    assert THOUGHT not in completion.text
    # The thinking block is billed as output, and counted so.
    text_only = estimate_tokens(json.dumps({"type": "text", "text": completion.text}))
    assert completion.output_tokens >= text_only + estimate_tokens(THOUGHT)
    assert plain.output_tokens > 0


def test_the_routed_provider_sends_each_request_to_its_provider(
    fake_openai: FakeOpenAiServer,
) -> None:
    with FakeAnthropicServer() as fake_anthropic:
        settings = Settings(
            ANTHROPIC_API_KEY="sk-a",
            anthropic_base_url=fake_anthropic.base_url,
            openai_base_url=fake_openai.base_url,
            llm_max_retries=0,
        )
        provider = build_provider(settings, LlmConnections.from_settings(settings))
        assert isinstance(provider, RoutedProvider)
        assert isinstance(provider.provider_for("openai"), OpenAiProvider)
        summarizer = Summarizer(provider)
        default = summarizer.summarize(SOURCE, depth=0, target_tokens=200)
        assert default.usage[0].provider == "anthropic"
        assert len(fake_anthropic.requests) == 1
    assert fake_openai.requests == []
    routed = provider.complete(request(provider="openai", models=("qwen-local",)))
    assert (routed.provider, routed.model) == ("openai", "qwen-local")
    # A local server without auth: the endpoint alone, and the SDK still sends some key.
    assert fake_openai.requests[0].headers["authorization"] == "Bearer no-key"


def test_a_provider_the_deployment_lacks_degrades_to_truncation() -> None:
    with FakeAnthropicServer() as fake:
        settings = Settings(ANTHROPIC_API_KEY="sk-a", anthropic_base_url=fake.base_url)
        provider = build_provider(settings, LlmConnections.from_settings(settings))
        with pytest.raises(SummarizerError) as caught:
            provider.complete(request(provider="openai"))
        assert caught.value.code == "provider_not_configured"
        result = Summarizer(provider).summarize(
            SOURCE, depth=0, target_tokens=200, policy=SummaryPolicy(provider="openai")
        )
        assert (result.escalation, result.degraded) == ("fallback", "llm_error")
        assert fake.requests == []
