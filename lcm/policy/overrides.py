"""``model_overrides``: threshold, fresh tail and leaf chunk by the model of a call.

A turn or an assemble call may name the ``model`` it serves and its
``context_window``; the conversation remembers the last ones a turn named so
the worker's sweep (which has no call) applies the same rule. Rule choice is
described on :class:`lcm.settings.ModelOverride`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Protocol, TypeVar

from lcm.settings import CompactionSettings, ModelOverride

S = TypeVar("S", bound=CompactionSettings)


def _matches(rule: ModelOverride, model: str | None, context_window: int | None) -> bool:
    if rule.model is None and rule.context_window_min is None and rule.context_window_max is None:
        return False
    if rule.model is not None and (model is None or not fnmatchcase(model, rule.model)):
        return False
    if rule.context_window_min is not None or rule.context_window_max is not None:
        if context_window is None:
            return False
        if rule.context_window_min is not None and context_window < rule.context_window_min:
            return False
        if rule.context_window_max is not None and context_window > rule.context_window_max:
            return False
    return True


def matching_override(
    rules: Sequence[ModelOverride | Mapping[str, Any]],
    model: str | None,
    context_window: int | None,
) -> ModelOverride | None:
    """The rule that applies: model rules first, then window-only rules, each in order.

    Rules may arrive as stored JSON (a tenant's overrides are layered without
    re-validation), so each is read as a ``ModelOverride`` here.
    """
    parsed = [r if isinstance(r, ModelOverride) else ModelOverride.model_validate(r) for r in rules]
    found = [r for r in parsed if _matches(r, model, context_window)]
    by_model = [r for r in found if r.model is not None]
    chosen = by_model or found
    return chosen[0] if chosen else None


def for_model(settings: S, model: str | None, context_window: int | None) -> S:
    """``settings`` with the matching rule's values on top (unchanged when none matches)."""
    rule = matching_override(settings.model_overrides, model, context_window)
    if rule is None:
        return settings
    changes = {
        key: value
        for key in ("context_threshold", "fresh_tail_count", "leaf_chunk_tokens")
        if (value := getattr(rule, key)) is not None
    }
    return settings.model_copy(update=changes)


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """What a call says about the model it serves (either may be unknown)."""

    model: str | None = None
    context_window: int | None = None


class NamedModel(Protocol):
    """What a conversation remembers of the model its turns named."""

    @property
    def model_id(self) -> str | None: ...

    @property
    def context_window(self) -> int | None: ...


def settings_for_call(settings: S, conversation: NamedModel, call: ModelInfo) -> S:
    """The rule matching the call's model, else the one the conversation's turns named."""
    model = call.model if call.model is not None else conversation.model_id
    window = call.context_window if call.context_window is not None else conversation.context_window
    return for_model(settings, model, window)
