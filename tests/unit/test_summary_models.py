"""Choosing the summary model by session key: first match wins, stored JSON reads the same."""

from __future__ import annotations

from lcm.policy import for_session, summary_models_for_session
from lcm.settings import CompactionSettings
from lcm.tenants.service import with_overrides

RULES = [
    {"session_pattern": "agent:*:telegram:**", "summary_model": "chat"},
    {"session_pattern": "agent:**", "summary_model": "agent", "summary_fallback_models": []},
    {"session_pattern": "agent:main:**", "summary_model": "never"},
]


def settings() -> CompactionSettings:
    base = CompactionSettings(summary_model="plain", summary_fallback_models=["spare"])
    return with_overrides(base, {"summary_model_overrides": RULES})


def test_the_first_matching_rule_wins() -> None:
    s = settings()
    assert summary_models_for_session(s, "agent:main:telegram:dm:1") == ("chat", ["spare"])
    assert summary_models_for_session(s, "agent:main:cron") == ("agent", [])
    # ``*`` stays within a segment: this key is not a telegram key.
    assert summary_models_for_session(s, "agent:a:b:telegram:x") == ("agent", [])
    assert summary_models_for_session(s, "console") == ("plain", ["spare"])
    assert summary_models_for_session(s, None) == ("plain", ["spare"])


def test_for_session_changes_only_the_models() -> None:
    s = settings()
    assert for_session(s, "console") is s
    chosen = for_session(s, "agent:main:cron")
    assert (chosen.summary_model, chosen.summary_fallback_models) == ("agent", [])
    assert (
        chosen.model_copy(update={"summary_model": "plain", "summary_fallback_models": ["spare"]})
        == s
    )
