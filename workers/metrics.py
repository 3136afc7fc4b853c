"""Prometheus figures of the jobs: passes, failures, LLM tokens, the LLM breakers.

In embedded mode these live in the API process and appear on its /metrics;
a worker process serves them on ``LCM_WORKER_METRICS_PORT`` when set.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from celery.signals import worker_ready
from prometheus_client import REGISTRY, Counter, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from lcm.retrieval.answers import Usage
from lcm.summarize.breaker import live_breakers
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
RECONCILED = Counter("lcm_compaction_reconciled_total", "Wake-ups re-sent by the reconciler")

BREAKER_NAMES = ("summaries", "expansion")


def count_llm_tokens(tenant_id: str, input_tokens: int, output_tokens: int) -> None:
    LLM_TOKENS.labels(tenant_id, "input").inc(input_tokens)
    LLM_TOKENS.labels(tenant_id, "output").inc(output_tokens)


def count_llm_usage(tenant_id: str, usage: Iterable[Usage]) -> None:
    for call in usage:
        count_llm_tokens(tenant_id, call.input_tokens, call.output_tokens)


class BreakerCollector(Collector):
    """``lcm_llm_breaker_open{breaker}``: 1 while a breaker of this process is not closed.

    Read from the live breakers at scrape time (open or half-open both mean
    the provider has not answered since it failed); 0 for a kind this
    process holds none of.
    """

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "lcm_llm_breaker_open",
            "1 while the LLM circuit breaker is open or half-open",
            labels=["breaker"],
        )
        tripped = {b.name for b in live_breakers() if b.state != "closed"}
        for name in BREAKER_NAMES:
            family.add_metric([name], 1.0 if name in tripped else 0.0)
        yield family


REGISTRY.register(BreakerCollector())


@worker_ready.connect
def _serve_metrics(**_kwargs: Any) -> None:
    port = runtime.settings().worker_metrics_port
    if port:
        start_http_server(port)
