"""model_route: the provider and models of each purpose, and the depth rules."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from lcm.settings import CompactionSettings, SummaryModelRule, TenantSettings
from lcm.summarize.policy import SummaryPolicy
from lcm.summarize.routing import ModelRoute, model_route

RULES = [
    {"depth_max": 0, "model": "cheap-leaf"},
    {
        "depth_min": 1,
        "depth_max": 2,
        "provider": "openai",
        "model": "local",
        "fallback_models": ["b"],
    },
]


def settings(**changes: object) -> CompactionSettings:
    return CompactionSettings.model_validate(changes)


def test_without_rules_every_purpose_uses_the_summary_models() -> None:
    s = settings(summary_model="m", summary_fallback_models=["f"])
    assert model_route(s, "summary", 5) == ModelRoute("anthropic", ("m", "f"))
    assert model_route(s, "file") == ModelRoute("anthropic", ("m", "f"))
    assert model_route(s, "expansion") == ModelRoute("anthropic", ("m",))


def test_depth_rules_route_leaves_and_condensed_depths_apart() -> None:
    s = settings(summary_model="m", summary_model_rules=RULES)
    assert model_route(s, "summary", 0) == ModelRoute("anthropic", ("cheap-leaf",))
    assert model_route(s, "summary", 1) == ModelRoute("openai", ("local", "b"))
    assert model_route(s, "summary", 2).provider == "openai"
    assert model_route(s, "summary", 3) == ModelRoute("anthropic", ("m",))
    # The policy of these settings routes the same way, per call.
    assert SummaryPolicy.of(s).route(1) == ("openai", ("local", "b"))
    assert SummaryPolicy.of(s).route(4) == ("anthropic", ("m",))


def test_large_files_and_expansion_have_their_own_provider_and_models() -> None:
    s = settings(
        summary_model="m",
        large_file_summary_provider="openai",
        large_file_summary_model="reader",
        large_file_summary_fallback_models=["reader-2"],
        expansion_provider="openai",
        expansion_model="asker",
    )
    assert model_route(s, "file") == ModelRoute("openai", ("reader", "reader-2"))
    assert model_route(s, "expansion") == ModelRoute("openai", ("asker",))
    assert model_route(s, "summary", 0) == ModelRoute("anthropic", ("m",))


def test_a_tenant_rule_is_validated() -> None:
    with pytest.raises(ValidationError):
        TenantSettings.model_validate({"summary_model_rules": [{"depth_min": 0}]})
    with pytest.raises(ValidationError):
        TenantSettings.model_validate({"summary_provider": "gemini"})
    with pytest.raises(ValidationError):
        SummaryModelRule(model="x", depth_min=2, depth_max=1)
    assert SummaryModelRule(model="x").holds(7)


def test_thinking_travels_with_the_policy() -> None:
    assert SummaryPolicy.of(settings()).thinking is None
    on = SummaryPolicy.of(
        settings(enable_summary_thinking=True, summary_thinking_budget_tokens=4096)
    )
    assert on.thinking is not None
    assert (on.thinking.budget_tokens, on.thinking.effort) == (4096, "low")


def test_a_session_rule_sets_the_summary_model_a_depth_rule_overrides() -> None:
    from lcm.policy import for_session

    s = settings(
        summary_model="m",
        summary_model_overrides=[{"session_pattern": "agent:vip:*", "summary_model": "vip"}],
        summary_model_rules=[{"depth_max": 0, "model": "cheap-leaf"}],
    )
    vip = for_session(s, "agent:vip:1")
    assert model_route(vip, "summary", 0).models == ("cheap-leaf",)
    assert model_route(vip, "summary", 1).models == ("vip",)
    assert model_route(for_session(s, "agent:other"), "summary", 1).models == ("m",)
