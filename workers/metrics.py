"""Prometheus figures of the jobs: passes, failures, LLM tokens, the LLM breakers.

In embedded mode these live in the API process and appear on its /metrics;
a worker process serves them on ``LCM_WORKER_METRICS_PORT`` when set.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from celery.signals import worker_ready
from prometheus_client import REGISTRY, Counter, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from lcm.retrieval.answers import Usage
from lcm.summarize.breaker import BreakerState
from lcm.turns import TurnStats
from workers import runtime

PASSES = Counter(
    "lcm_compaction_passes_total", "Compaction passes committed", ["kind", "escalation"]
)
PASS_SECONDS = Histogram(
    "lcm_compaction_pass_seconds",
    "Duration of a committed pass",
    ["kind"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120),
)
QUEUE_LAG = Histogram(
    "lcm_compaction_queue_lag_seconds",
    "Age of the debt when a worker claimed it",
    buckets=(0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 300, 900),
)
FAILURES = Counter("lcm_compaction_failures_total", "Passes that failed", ["final"])
LLM_TOKENS = Counter("lcm_llm_tokens_total", "LLM tokens used", ["tenant", "direction"])
DEGRADED_SUMMARIES = Counter(
    "lcm_degraded_summaries_total",
    "Summaries written without the LLM although one is configured",
    ["reason"],  # llm_error | budget
)
LLM_BUDGET_EXHAUSTED = Counter(
    "lcm_llm_budget_exhausted_total",
    "Work served offline or refused because a tenant's daily LLM token budget was spent",
    ["tenant", "purpose"],  # purpose: summary | expand_query
)
RATE_LIMIT_PAUSES = Counter(
    "lcm_compaction_rate_limit_pauses_total",
    "Sweep chains paused by the per-conversation summarization call rate limit",
)
RECONCILED = Counter("lcm_compaction_reconciled_total", "Wake-ups re-sent by the reconciler")


def count_llm_tokens(tenant_id: str, input_tokens: int, output_tokens: int) -> None:
    LLM_TOKENS.labels(tenant_id, "input").inc(input_tokens)
    LLM_TOKENS.labels(tenant_id, "output").inc(output_tokens)


def count_llm_usage(tenant_id: str, usage: Iterable[Usage]) -> None:
    for call in usage:
        count_llm_tokens(tenant_id, call.input_tokens, call.output_tokens)


class BreakerCollector(Collector):
    """``lcm_llm_breaker_open{model}``: 1 while this process's breaker for a model is not closed.

    Read at scrape time from the process's shared LLM connection (one breaker
    per model, :mod:`lcm.summarize.llm`); open and half-open both count, as
    the model has not answered since it failed. The deployment's summary
    model always has a sample (0 before its first call).
    """

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "lcm_llm_breaker_open",
            "1 while the LLM circuit breaker of a model is open or half-open",
            labels=["model"],
        )
        states = runtime.breaker_states()
        for model, state in sorted(states.items()):
            family.add_metric([model], 0.0 if state == BreakerState.CLOSED else 1.0)
        yield family


class TurnCollector(Collector):
    """The passes' turns at the process's Python work (lcm/turns.py), read at scrape time.

    A pass takes a turn when it starts and another when its model replies.
    Wait seconds growing about as fast as the clock mean the process's
    Python work, not the model, bounds its passes: add processes, not threads.
    """

    def collect(self) -> Iterator[Metric]:
        stats = runtime.turn_stats() or TurnStats(0, 0, 0.0, 0)  # zeros before the first pass
        yield CounterMetricFamily(
            "lcm_worker_turns", "Turns passes took at the process's work", value=stats.turns
        )
        yield CounterMetricFamily(
            "lcm_worker_turn_waits", "Turns a pass had to queue for", value=stats.waits
        )
        yield CounterMetricFamily(
            "lcm_worker_turn_wait_seconds",
            "Time passes spent queued for a turn",
            value=stats.wait_seconds,
        )
        yield GaugeMetricFamily(
            "lcm_worker_turns_waiting", "Passes queued for a turn now", value=stats.waiting
        )


REGISTRY.register(BreakerCollector())
REGISTRY.register(TurnCollector())


@worker_ready.connect
def _serve_metrics(**_kwargs: Any) -> None:
    port = runtime.settings().worker_metrics_port
    if port:
        start_http_server(port)
