"""The Grafana dashboard, the alert rules and the compose wiring agree with the code.

No Prometheus or Grafana runs here: the files are loaded, and every metric
and label they name is checked against what the API's /metrics and the
workers' registry actually export, so renaming a metric, a label or a
route fails this test rather than silently blanking a panel or an alert.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from api.app import create_app
from lcm.db.engine import Database
from tests.conftest import RecordingSender
from workers.link import CeleryLink

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "lcm.json"
ALERTS = DEPLOY / "prometheus" / "alerts.yml"

# What an operator must see and be paged for (the list).
REQUIRED = {
    "lcm_http_request_duration_seconds_bucket",  # turn latency p99
    "lcm_compaction_debt",  # debt backlog
    "lcm_compaction_debt_oldest_pending_seconds",  # oldest debt age
    "lcm_compaction_failures_total",  # pass failures
    "lcm_compaction_passes_total",  # escalations
    "lcm_llm_tokens_total",  # LLM tokens by tenant
    "lcm_llm_breaker_open",  # breaker open
}
_METRIC = re.compile(r'\b(lcm_[a-z0-9_]+)\b(\{(?:[^}"]|"[^"]*")*\})?')
_MATCHER = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"')
_GROUPING = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")
_SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "summary": ("_count", "_sum", "_created"),
    "gauge": ("",),
}


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def dashboard_exprs() -> list[str]:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [t["expr"] for p in panels for t in p["targets"]]


def alert_rules() -> list[dict[str, Any]]:
    return [rule for group in load_yaml(ALERTS)["groups"] for rule in group["rules"]]


@dataclass
class Exported:
    labels: dict[str, set[str]]  # sample name -> its label names
    routes: set[str]  # route label values seen


@pytest.fixture
def exported(sqlite_db: Database, monkeypatch: pytest.MonkeyPatch) -> Exported:
    """Every sample name the API and the workers export, with its label names."""
    import workers.metrics  # noqa: F401  (registers the worker figures)
    from workers import runtime

    # A process with an LLM has a breaker per model; this one has none yet.
    monkeypatch.setattr(runtime, "breaker_states", lambda: {"claude-x": "closed"})

    app = create_app(
        sqlite_db.settings,
        link=CeleryLink(),
        database=sqlite_db,
        broker_ping=lambda: True,
        sender=RecordingSender(),
    )
    with TestClient(app) as client:
        # One turn request (refused: no key) records its route template as
        # the middleware labels it: the value dashboards filter on.
        assert client.post("/v1/conversations/k/turns", json={}).status_code == 401
        text = client.get("/metrics").text
    names: dict[str, set[str]] = {}
    routes: set[str] = set()
    for family in text_string_to_metric_families(text):
        for suffix in _SUFFIXES.get(family.type, ("",)):
            names[family.name + suffix] = set()
        for sample in family.samples:
            names.setdefault(sample.name, set()).update(sample.labels)
            if family.name == "lcm_http_requests":
                routes.add(sample.labels["route"])
    # Labelled counters and histograms export no sample before their first
    # use: their label names come from the metric objects.
    registered = REGISTRY._collector_to_names.items()
    for collector, sample_names in registered:
        for name in sample_names:
            if name in names:
                names[name].update(getattr(collector, "_labelnames", ()))
    for name in list(names):
        if name.endswith("_bucket"):
            names[name].add("le")
    return Exported(names, routes)


def check_expr(expr: str, exported: Exported) -> set[str]:
    """Assert ``expr`` names exported metrics, labels and routes; return its metric names."""
    used = set()
    labels_of_expr: set[str] = set()
    for name, selector in _METRIC.findall(expr):
        assert name in exported.labels, f"{name} (in {expr!r}) is not exported"
        used.add(name)
        labels_of_expr |= exported.labels[name]
        for label, op, value in _MATCHER.findall(selector or ""):
            assert label in exported.labels[name], f"{name} has no label {label!r} ({expr!r})"
            if label == "route" and op == "=":
                assert value in exported.routes, f"no route {value!r} ({expr!r})"
    for grouping in _GROUPING.findall(expr):
        for label in filter(None, (g.strip() for g in grouping.split(","))):
            assert label in labels_of_expr, f"no metric in {expr!r} has label {label!r}"
    return used


def test_dashboard_and_alerts_use_only_exported_metrics(exported: Exported) -> None:
    in_dashboard: set[str] = set()
    for expr in dashboard_exprs():
        in_dashboard |= check_expr(expr, exported)
    in_alerts: set[str] = set()
    for rule in alert_rules():
        if rule["expr"].startswith("up{"):
            continue  # Prometheus's own scrape health
        in_alerts |= check_expr(rule["expr"], exported)
    assert in_dashboard >= REQUIRED, REQUIRED - in_dashboard
    assert in_alerts >= REQUIRED, REQUIRED - in_alerts


def test_alert_rules_are_well_formed() -> None:
    rules = alert_rules()
    assert len({r["alert"] for r in rules}) == len(rules)
    for rule in rules:
        assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}, rule
        assert rule["labels"]["severity"] in ("info", "warning", "critical")
        assert rule["annotations"]["summary"]
        assert re.fullmatch(r"\d+[smh]", rule.get("for", "0s")), rule
        assert rule["expr"].count("(") == rule["expr"].count(")"), rule["alert"]


def test_dashboard_panels_use_the_provisioned_datasource() -> None:
    datasource = load_yaml(DEPLOY / "grafana/provisioning/datasources/prometheus.yml")
    uid = datasource["datasources"][0]["uid"]
    dashboard = json.loads(DASHBOARD.read_text())
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == uid
        assert panel["targets"]
        assert all(t["datasource"]["uid"] == uid for t in panel["targets"])


def mounts(service: dict[str, Any]) -> dict[str, str]:
    """Container path -> repository path of a service's bind mounts."""
    found = {}
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        if source.startswith("./"):
            found[target] = source[2:]
    return found


def test_compose_wires_monitoring_auth_and_the_redis_password() -> None:
    compose = load_yaml(ROOT / "docker-compose.yml")
    services = compose["services"]

    prometheus = mounts(services["prometheus"])
    config_dir = ROOT / prometheus["/etc/prometheus"]
    config = load_yaml(config_dir / "prometheus.yml")
    for rule_file in config["rule_files"]:
        assert (config_dir / Path(rule_file).relative_to("/etc/prometheus")).is_file()
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert jobs["lcm-api"]["static_configs"][0]["targets"] == ["api:8000"]
    assert "8000" in services["api"]["command"]
    worker_sd = jobs["lcm-worker"]["dns_sd_configs"][0]
    assert worker_sd["names"] == ["worker"]
    assert str(worker_sd["port"]) == services["worker"]["environment"]["LCM_WORKER_METRICS_PORT"]

    grafana = mounts(services["grafana"])
    provider = load_yaml(ROOT / grafana["/etc/grafana/provisioning"] / "dashboards/lcm.yml")
    dashboards_dir = provider["providers"][0]["options"]["path"]
    assert (ROOT / grafana[dashboards_dir] / DASHBOARD.name).is_file()

    assert services["flower"]["environment"]["LCM_FLOWER_BASIC_AUTH"]
    assert "--requirepass" in " ".join(services["redis"]["command"])
    env = compose["x-lcm-env"]
    for url in (env["LCM_BROKER_URL"], env["LCM_RESULT_BACKEND_URL"]):
        assert re.fullmatch(r"redis://:\$\{REDIS_PASSWORD[^}]*\}@redis:6379/\d", url), url
