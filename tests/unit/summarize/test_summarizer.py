"""Escalation end to end: the real SDK, the fake server, and the summarizer on top."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

import pytest

from lcm.settings import Settings
from lcm.summarize.anthropic_provider import AnthropicProvider
from lcm.summarize.connections import RoutedProvider
from lcm.summarize.extractive import ExtractiveProvider
from lcm.summarize.footer import FOOTER_PREFIX, has_footer
from lcm.summarize.llm import LlmClients
from lcm.summarize.policy import SummaryPolicy
from lcm.summarize.summarizer import TRUNCATION_MODEL, Summarizer, SummaryResult, build_provider
from lcm.summarize.truncation import TRUNCATION_MARKER
from lcm.tokens import estimate_tokens
from lcm.turns import TurnGate
from tests.fakes import Behaviour, FakeAnthropicServer
from tests.unit.summarize.conftest import PRIMARY, ProviderFactory

SOURCE = "\n".join(
    f"[2026-11-20T10:{minute:02d}:00Z] assistant: Step {minute}: edited lcm/compaction/sweep.py "
    f"and ran the tests; 3 failures remained in test_sweep_{minute}, fixed by reordering."
    for minute in range(40)
)


def test_normal_summary_has_footer_and_usage(
    fake_anthropic: FakeAnthropicServer, make_provider: ProviderFactory
) -> None:
    result = Summarizer(make_provider()).summarize(SOURCE, depth=0, target_tokens=300)
    assert result.escalation == "normal"
    assert result.model == PRIMARY
    assert has_footer(result.text)
    assert result.token_count == estimate_tokens(result.text) < estimate_tokens(SOURCE)
    assert [(u.model, u.escalation) for u in result.usage] == [(PRIMARY, "normal")]
    assert result.usage[0].input_tokens > 0


def test_missing_footer_is_appended_from_the_source(
    fake_anthropic: FakeAnthropicServer, make_provider: ProviderFactory
) -> None:
    fake_anthropic.script([Behaviour.reply("Forty steps of fixing the sweep tests.")])
    result = Summarizer(make_provider()).summarize(SOURCE, depth=0, target_tokens=300)
    assert result.text.startswith("Forty steps of fixing the sweep tests.")
    last_line = result.text.splitlines()[-1]
    assert last_line.startswith(FOOTER_PREFIX)
    assert "lcm/compaction/sweep.py" in last_line


def test_oversized_escalates_to_aggressive_then_truncation(
    fake_anthropic: FakeAnthropicServer, make_provider: ProviderFactory
) -> None:
    fake_anthropic.script(["oversized", "oversized"])
    result = Summarizer(make_provider(), truncation_tokens=200).summarize(
        SOURCE, depth=0, target_tokens=300
    )
    assert result.escalation == "fallback"
    assert result.model == TRUNCATION_MODEL
    assert TRUNCATION_MARKER in result.text
    assert has_footer(result.text)
    assert result.token_count <= 200
    assert [u.escalation for u in result.usage] == ["normal", "aggressive"]
    normal, aggressive = fake_anthropic.requests
    assert aggressive.max_tokens is not None
    assert normal.max_tokens is not None
    assert aggressive.max_tokens < normal.max_tokens  # lower target
    assert "durable facts" in aggressive.system
    assert "durable facts" not in normal.system


def test_a_summary_must_beat_what_it_replaces_not_only_its_rendered_input(
    fake_anthropic: FakeAnthropicServer, make_provider: ProviderFactory
) -> None:
    # A reply smaller than the rendered source (timestamps on every line)
    # but not under ``must_beat_tokens`` escalates, to truncation at the end,
    # and the truncation is clipped under the bound as well.
    reply = Behaviour.reply("Forty steps of fixing the sweep tests. " * 12)
    fake_anthropic.script([reply, reply])
    bound = 60
    assert bound < estimate_tokens(reply.text) < estimate_tokens(SOURCE)
    result = Summarizer(make_provider()).summarize(
        SOURCE, depth=0, target_tokens=300, must_beat_tokens=bound
    )
    assert result.escalation == "fallback"
    assert TRUNCATION_MARKER in result.text
    assert result.token_count < bound
    assert [u.escalation for u in result.usage] == ["normal", "aggressive"]
    # Without the bound the same reply is a normal summary.
    fake_anthropic.script([reply])
    assert Summarizer(make_provider()).summarize(SOURCE, depth=0, target_tokens=300).escalation == (
        "normal"
    )


def test_oversized_then_good_aggressive_is_accepted(
    fake_anthropic: FakeAnthropicServer, make_provider: ProviderFactory
) -> None:
    fake_anthropic.script(["oversized", "ok"])
    result = Summarizer(make_provider()).summarize(SOURCE, depth=0, target_tokens=300)
    assert result.escalation == "aggressive"
    assert TRUNCATION_MARKER not in result.text


def test_empty_output_escalates_to_aggressive(
    fake_anthropic: FakeAnthropicServer, make_provider: ProviderFactory
) -> None:
    fake_anthropic.script(["empty", "ok"])
    result = Summarizer(make_provider()).summarize(SOURCE, depth=0, target_tokens=300)
    assert result.escalation == "aggressive"
    assert len(fake_anthropic.requests) == 2


def test_escalation_temperatures_when_sampling_is_enabled(
    fake_anthropic: FakeAnthropicServer, make_provider: ProviderFactory
) -> None:
    fake_anthropic.script(["oversized", "oversized"])
    Summarizer(make_provider(send_temperature=True)).summarize(SOURCE, depth=0, target_tokens=300)
    assert [r.temperature for r in fake_anthropic.requests] == [0.2, 0.1]


def test_prompt_carries_previous_context_and_custom_instructions(
    fake_anthropic: FakeAnthropicServer, make_provider: ProviderFactory
) -> None:
    Summarizer(make_provider()).summarize(
        SOURCE,
        depth=0,
        target_tokens=300,
        previous_context="Earlier: the team chose Celery over RQ.",
        policy=SummaryPolicy(custom_instructions="Always mention ticket numbers like LCM-123."),
    )
    sent = fake_anthropic.requests[0]
    assert "<previous_context>\nEarlier: the team chose Celery over RQ." in sent.user_text
    assert "Always mention ticket numbers like LCM-123." in sent.system
    assert "do not summarize it again" in sent.system


@pytest.mark.parametrize("behaviour", ["garbage", "500"])
def test_provider_trouble_falls_back_to_truncation(
    fake_anthropic: FakeAnthropicServer, make_provider: ProviderFactory, behaviour: str
) -> None:
    fake_anthropic.set_default(behaviour)
    result = Summarizer(make_provider(max_retries=0)).summarize(SOURCE, depth=0, target_tokens=300)
    assert result.escalation == "fallback"
    assert TRUNCATION_MARKER in result.text
    assert result.usage == ()
    # A failing provider is not asked a second time for the aggressive step.
    assert len(fake_anthropic.requests) == 1


def test_open_breaker_means_truncation_without_requests(
    fake_anthropic: FakeAnthropicServer, make_provider: ProviderFactory
) -> None:
    fake_anthropic.set_default("529")
    summarizer = Summarizer(make_provider(max_retries=0))
    for _ in range(3):  # the fixture's breaker opens after 3 failed calls
        assert summarizer.summarize(SOURCE, depth=0, target_tokens=300).escalation == "fallback"
    sent = len(fake_anthropic.requests)
    result = summarizer.summarize(SOURCE, depth=1, target_tokens=300)
    assert result.escalation == "fallback"
    assert len(fake_anthropic.requests) == sent


def test_truncation_is_deterministic(
    fake_anthropic: FakeAnthropicServer, make_provider: ProviderFactory
) -> None:
    fake_anthropic.set_default("oversized")
    summarizer = Summarizer(make_provider())
    first = summarizer.summarize(SOURCE, depth=0, target_tokens=300)
    second = summarizer.summarize(SOURCE, depth=0, target_tokens=300)
    assert first.text == second.text
    assert first.text.startswith(SOURCE[:40])


def test_offline_summarizer_end_to_end() -> None:
    result = Summarizer(ExtractiveProvider()).summarize(SOURCE, depth=0, target_tokens=300)
    assert result.escalation == "normal"
    assert result.model == "extractive"
    assert result.token_count <= 300
    assert has_footer(result.text)
    assert [u.model for u in result.usage] == ["extractive"]


def test_build_provider_without_key_warns_and_goes_offline(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="lcm.summarize.summarizer"):
        settings = Settings(ANTHROPIC_API_KEY=None)
        provider = build_provider(settings, LlmClients.from_settings(settings))
    assert isinstance(provider, ExtractiveProvider)
    assert any(
        r.levelno == logging.WARNING and "OFFLINE EXTRACTIVE" in r.getMessage()
        for r in caplog.records
    )


def test_build_provider_with_key_uses_anthropic(fake_anthropic: FakeAnthropicServer) -> None:
    settings = Settings(ANTHROPIC_API_KEY="sk-x", anthropic_base_url=fake_anthropic.base_url)
    llm = LlmClients.from_settings(settings)
    provider = build_provider(settings, llm)
    assert isinstance(provider, RoutedProvider)
    assert isinstance(provider.provider_for("anthropic"), AnthropicProvider)
    summarizer = Summarizer.from_settings(settings, llm)
    assert summarizer.summarize(SOURCE, depth=2, target_tokens=300).escalation == "normal"
    assert fake_anthropic.requests[0].model == settings.summary_model


def test_many_summaries_in_flight_from_threads(
    fake_anthropic: FakeAnthropicServer, make_provider: ProviderFactory
) -> None:
    # Each reply takes 1.5 s: calls made one after another would never
    # overlap, and a limit below 8 (a connection pool, a lock) would cap how
    # many the server holds at once. No wall-clock bound: a busy machine
    # slows everything, not the overlap.
    fake_anthropic.set_default("latency:1.5")
    summarizer = Summarizer(make_provider())
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(
            pool.map(
                lambda n: summarizer.summarize(f"{SOURCE}\nrun {n}", depth=0, target_tokens=300),
                range(8),
            )
        )
    assert {r.escalation for r in results} == {"normal"}
    assert len(fake_anthropic.requests) == 8
    assert fake_anthropic.peak_in_flight == 8


def test_a_pass_gives_its_turn_up_while_the_model_answers(
    fake_anthropic: FakeAnthropicServer, make_provider: ProviderFactory
) -> None:
    # Eight threads, each holding a turn of a one-slot gate as a worker's
    # passes do (lcm/turns.py): the model calls must still all be in flight
    # at once. A call that kept its turn would let the server hold one.
    fake_anthropic.set_default("latency:1.5")
    turns = TurnGate(1)
    summarizer = Summarizer(make_provider(turns=turns))

    def summarize_in_turn(n: int) -> SummaryResult:
        with turns.turn():
            result = summarizer.summarize(f"{SOURCE}\nrun {n}", depth=0, target_tokens=300)
            assert turns.holds_turn()  # the turn is back before the pass goes on
            return result

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(summarize_in_turn, range(8)))
    assert {r.escalation for r in results} == {"normal"}
    assert fake_anthropic.peak_in_flight == 8
    # Each took a turn, gave it up for the call and took one again after.
    assert turns.stats().turns == 16


def test_default_custom_instructions_apply_unless_overridden(
    fake_anthropic: FakeAnthropicServer, make_provider: ProviderFactory
) -> None:
    summarizer = Summarizer(make_provider(), custom_instructions="Deployment rule: be terse.")
    summarizer.summarize(SOURCE, depth=0, target_tokens=300)
    summarizer.summarize(
        SOURCE, depth=0, target_tokens=300, policy=SummaryPolicy(custom_instructions="Tenant rule.")
    )
    first, second = fake_anthropic.requests
    assert "Deployment rule: be terse." in first.system
    assert "Tenant rule." in second.system
    assert "Deployment rule" not in second.system


def test_blank_source_is_not_sent_to_the_model(
    fake_anthropic: FakeAnthropicServer, make_provider: ProviderFactory
) -> None:
    result = Summarizer(make_provider()).summarize("  \n ", depth=0, target_tokens=300)
    assert result.escalation == "fallback"
    assert fake_anthropic.requests == []
