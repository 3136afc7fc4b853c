"""Prometheus figures of the compaction jobs.

In embedded mode these live in the API process and appear on its /metrics;
a worker process serves them on ``LCM_WORKER_METRICS_PORT`` when set.
"""

from __future__ import annotations

from typing import Any

from celery.signals import worker_ready
from prometheus_client import Counter, Histogram, start_http_server

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


@worker_ready.connect
def _serve_metrics(**_kwargs: Any) -> None:
    port = runtime.settings().worker_metrics_port
    if port:
        start_http_server(port)
