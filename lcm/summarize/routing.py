"""Which provider and models serve an LLM call: the one place that decides it.

Every purpose reads the tenant's effective settings through :func:`model_route`:
a summary by its depth (``summary_model_rules``, else the summary models),
a large file's exploration summary (``large_file_summary_*``, else the
summary models), the expand-query loop (``expansion_*``, else the summary
provider and model). Rules that change settings by something else (a
session, a calling model) apply to the settings before they reach here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from lcm.settings import CompactionSettings, SummaryModelRule

Purpose = Literal["summary", "file", "expansion"]


@dataclass(frozen=True, slots=True)
class ModelRoute:
    """A provider name and its models in the order they are tried (primary first)."""

    provider: str
    models: tuple[str, ...]

    @property
    def model(self) -> str:
        return self.models[0]


def _ordered(primary: str, fallbacks: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(m for m in (primary, *fallbacks) if m))


def depth_rule(
    rules: Sequence[SummaryModelRule | Mapping[str, Any]], depth: int
) -> SummaryModelRule | None:
    """The first rule holding ``depth`` (stored JSON rules are read as rules here)."""
    for rule in rules:
        parsed = (
            rule if isinstance(rule, SummaryModelRule) else SummaryModelRule.model_validate(rule)
        )
        if parsed.holds(depth):
            return parsed
    return None


def model_route(settings: CompactionSettings, purpose: Purpose, depth: int = 0) -> ModelRoute:
    """The provider and models ``settings`` give a call of ``purpose`` (a summary at ``depth``)."""
    default = ModelRoute(
        settings.summary_provider,
        _ordered(settings.summary_model, settings.summary_fallback_models),
    )
    if purpose == "file":
        if settings.large_file_summary_model is None:
            provider = settings.large_file_summary_provider or default.provider
            return ModelRoute(provider, default.models)
        return ModelRoute(
            settings.large_file_summary_provider or default.provider,
            _ordered(
                settings.large_file_summary_model, settings.large_file_summary_fallback_models
            ),
        )
    if purpose == "expansion":
        return ModelRoute(
            settings.expansion_provider or default.provider,
            (settings.expansion_model or settings.summary_model,),
        )
    rule = depth_rule(settings.summary_model_rules, depth)
    if rule is None:
        return default
    return ModelRoute(rule.provider or default.provider, _ordered(rule.model, rule.fallback_models))
