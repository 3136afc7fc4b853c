"""Prometheus figures for the HTTP layer: request counts and latency."""

from __future__ import annotations

import time
from collections.abc import Iterator

from prometheus_client import Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from lcm.compaction.service import UNFINISHED, unfinished_debt
from lcm.db.engine import Database
from lcm.db.models import utcnow

REQUESTS = Counter("lcm_http_requests_total", "HTTP requests served", ["method", "route", "status"])
LATENCY = Histogram(
    "lcm_http_request_duration_seconds",
    "HTTP request latency",
    ["method", "route"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)


class RequestMetrics:
    """Counts requests by route template (not raw path, to keep cardinality bounded)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            method = scope.get("method", "GET")
            REQUESTS.labels(method, template, str(status)).inc()
            LATENCY.labels(method, template).observe(time.perf_counter() - started)


class DebtCollector(Collector):
    """Compaction debt read from the database at scrape time (the durable truth).

    ``lcm_compaction_debt`` counts unfinished rows by status (pending,
    running, failed: not done, which is every conversation ever compacted);
    ``…_oldest_pending_seconds`` is the queue lag an operator alerts on: how
    long the oldest owed compaction has waited. Two statements per scrape,
    each reading only unfinished rows.
    """

    def __init__(self, database: Database) -> None:
        self.database = database

    def collect(self) -> Iterator[Metric]:
        counts = GaugeMetricFamily(
            "lcm_compaction_debt", "Unfinished compaction debt rows by status", labels=["status"]
        )
        oldest = GaugeMetricFamily(
            "lcm_compaction_debt_oldest_pending_seconds",
            "Age of the oldest pending or running compaction debt",
        )
        try:
            with self.database.read_session() as session:
                by_status, oldest_at = unfinished_debt(session)
        except Exception:
            return  # an unreachable database shows on /readyz, not as a failed scrape
        for status in UNFINISHED:
            counts.add_metric([status], by_status.get(status, 0))
        age = 0.0 if oldest_at is None else (utcnow() - oldest_at).total_seconds()
        oldest.add_metric([], max(age, 0.0))
        yield counts
        yield oldest
