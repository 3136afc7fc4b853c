"""Worker figures: the LLM breakers' state read at scrape time, tokens by tenant."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY, generate_latest

from lcm.retrieval.answers import Usage
from lcm.summarize.breaker import CircuitBreaker
from workers import metrics


def breaker_gauge(name: str) -> float | None:
    return REGISTRY.get_sample_value("lcm_llm_breaker_open", {"breaker": name})


def test_an_open_breaker_shows_on_the_scrape() -> None:
    breaker = CircuitBreaker(2, 3600.0, name="expansion")
    breaker.record_failure()
    breaker.record_failure()
    assert breaker.state == "open"
    assert breaker_gauge("expansion") == 1.0
    assert b'lcm_llm_breaker_open{breaker="expansion"} 1.0' in generate_latest()


def test_closed_or_absent_breakers_read_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    closed = CircuitBreaker(1, 3600.0, name="summaries")
    monkeypatch.setattr(metrics, "live_breakers", lambda: [closed])
    assert breaker_gauge("summaries") == 0.0
    assert breaker_gauge("expansion") == 0.0  # none in this process
    closed.record_failure()
    assert breaker_gauge("summaries") == 1.0
    closed.record_success()
    assert breaker_gauge("summaries") == 0.0


def test_expansion_usage_counts_by_tenant() -> None:
    before = REGISTRY.get_sample_value(
        "lcm_llm_tokens_total", {"tenant": "t-metrics", "direction": "input"}
    )
    metrics.count_llm_usage("t-metrics", [Usage("m", 120, 30), Usage("m", 80, 5)])
    after = REGISTRY.get_sample_value(
        "lcm_llm_tokens_total", {"tenant": "t-metrics", "direction": "input"}
    )
    assert (after or 0) - (before or 0) == 200
