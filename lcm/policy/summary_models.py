"""``summary_model_overrides``: the summary model by the conversation's session key.

One place decides which model summarizes a conversation's passes:
:func:`summary_models_for_session` (the model and its fallbacks for a key).
:func:`for_session` puts that choice into the settings a pass runs with, so
every summary of the pass (leaf, condensed, repair) uses it. Large-file
exploration summaries are not per session and keep ``summary_model``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from lcm.session_globs import matches_session_pattern
from lcm.settings import CompactionSettings, SummaryModelOverride

S = TypeVar("S", bound=CompactionSettings)


def matching_summary_rule(
    rules: Sequence[SummaryModelOverride | Mapping[str, Any]], session_key: str
) -> SummaryModelOverride | None:
    """The first rule whose ``session_pattern`` matches ``session_key`` (first match wins).

    Rules may arrive as stored JSON (a tenant's overrides are layered without
    re-validation), so each is read as a ``SummaryModelOverride`` here.
    """
    for raw in rules:
        rule = SummaryModelOverride.model_validate(raw)  # a model instance passes through
        if matches_session_pattern(session_key, rule.session_pattern):
            return rule
    return None


def summary_models_for_session(
    settings: CompactionSettings, session_key: str | None
) -> tuple[str, list[str]]:
    """The summary model and its fallbacks for ``session_key`` under ``settings``.

    The first matching rule's model (and its fallbacks, when it names any);
    otherwise ``summary_model`` and ``summary_fallback_models``. No key (a
    pass that does not know it) gets the settings' own models.
    """
    rule = None
    if session_key is not None:
        rule = matching_summary_rule(settings.summary_model_overrides, session_key)
    if rule is None:
        return settings.summary_model, list(settings.summary_fallback_models)
    fallbacks = rule.summary_fallback_models
    return rule.summary_model, list(
        settings.summary_fallback_models if fallbacks is None else fallbacks
    )


def for_session(settings: S, session_key: str | None) -> S:
    """``settings`` with the summary models chosen for ``session_key`` (unchanged when none)."""
    model, fallbacks = summary_models_for_session(settings, session_key)
    if model == settings.summary_model and fallbacks == settings.summary_fallback_models:
        return settings
    return settings.model_copy(
        update={"summary_model": model, "summary_fallback_models": fallbacks}
    )
