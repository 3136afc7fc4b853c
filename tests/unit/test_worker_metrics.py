"""Worker figures: the LLM breakers' state read at scrape time, tokens by tenant."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY, generate_latest

from lcm.retrieval.answers import Usage
from lcm.settings import Settings
from lcm.summarize.llm import Breakers
from lcm.turns import TurnGate
from workers import metrics, runtime
from workers.sender import CelerySender


def breaker_gauge(model: str) -> float | None:
    return REGISTRY.get_sample_value("lcm_llm_breaker_open", {"model": model})


def test_each_models_breaker_shows_on_the_scrape(monkeypatch: pytest.MonkeyPatch) -> None:
    breakers = Breakers(2, 3600.0)
    monkeypatch.setattr(runtime, "breaker_states", breakers.states)
    breakers.for_model("model-a").record_failure()
    breakers.for_model("model-a").record_failure()
    breakers.for_model("model-b").record_success()
    assert breaker_gauge("model-a") == 1.0
    assert breaker_gauge("model-b") == 0.0
    assert b'lcm_llm_breaker_open{model="model-a"} 1.0' in generate_latest()
    breakers.for_model("model-a").record_success()
    assert breaker_gauge("model-a") == 0.0


def test_the_deployments_model_is_listed_before_its_first_call() -> None:
    settings = Settings(ANTHROPIC_API_KEY="sk-x", summary_model="claude-x")
    runtime.use_settings(settings, CelerySender())
    try:
        assert runtime.breaker_states() == {"claude-x": "closed"}
        assert breaker_gauge("claude-x") == 0.0
    finally:
        runtime.use_settings(Settings(), CelerySender())


def test_expansion_usage_counts_by_tenant() -> None:
    before = REGISTRY.get_sample_value(
        "lcm_llm_tokens_total", {"tenant": "t-metrics", "direction": "input"}
    )
    metrics.count_llm_usage("t-metrics", [Usage("m", 120, 30), Usage("m", 80, 5)])
    after = REGISTRY.get_sample_value(
        "lcm_llm_tokens_total", {"tenant": "t-metrics", "direction": "input"}
    )
    assert (after or 0) - (before or 0) == 200


def test_the_turn_gate_shows_on_the_scrape(monkeypatch: pytest.MonkeyPatch) -> None:
    gate = TurnGate(1)
    monkeypatch.setattr(runtime, "turn_stats", gate.stats)
    with gate.turn():
        pass
    with gate.turn():
        pass
    assert REGISTRY.get_sample_value("lcm_worker_turns_total") == 2.0
    assert REGISTRY.get_sample_value("lcm_worker_turn_waits_total") == 0.0
    assert REGISTRY.get_sample_value("lcm_worker_turns_waiting") == 0.0


def test_turn_figures_are_zero_before_the_first_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime, "turn_stats", lambda: None)
    assert REGISTRY.get_sample_value("lcm_worker_turn_wait_seconds_total") == 0.0
