"""The rule shapes of the override lists in :mod:`lcm.settings`.

``model_overrides`` (by the model a call names) and ``summary_model_overrides``
(by session key). Each rule is validated where the settings are: a tenant's
``PATCH /v1/tenant/settings`` answers 400 on a bad rule.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from lcm.session_globs import session_pattern_problem

# Every token figure fits comfortably in a 64-bit column and in any arithmetic
# done with it; larger values are a client mistake, not a configuration.
MAX_TOKENS = 1_000_000_000


class ModelOverride(BaseModel):
    """One rule of ``model_overrides``: which calls it matches and what it changes.

    ``model`` is a glob on the model id a turn or an assemble call names (``*``
    any characters); ``context_window_min``/``max`` bound the context window
    the call reports. Every matcher given must match; a rule with none matches
    nothing. The first rule naming a ``model`` that matches wins, else the
    first window-only rule that matches.
    """

    model_config = ConfigDict(extra="forbid")

    model: str | None = Field(None, min_length=1, max_length=200)
    context_window_min: int | None = Field(None, ge=1, le=MAX_TOKENS)
    context_window_max: int | None = Field(None, ge=1, le=MAX_TOKENS)
    context_threshold: float | None = Field(None, gt=0, le=1)
    fresh_tail_count: int | None = Field(None, ge=1, le=1_000_000)
    leaf_chunk_tokens: int | None = Field(None, ge=256, le=MAX_TOKENS)


class SummaryModelOverride(BaseModel):
    """One rule of ``summary_model_overrides``: the summary model for some session keys.

    ``session_pattern`` is a session-key glob (:mod:`lcm.session_globs`, the
    syntax of ``ignore_session_patterns``). Rules are tried in order and the
    first whose pattern matches the conversation's session key wins; a key no
    rule matches keeps ``summary_model``. ``summary_fallback_models``, when
    given, replaces the fallbacks too; left out, the setting's fallbacks stay.
    """

    model_config = ConfigDict(extra="forbid")

    session_pattern: str
    summary_model: str = Field(min_length=1, max_length=200)
    summary_fallback_models: list[str] | None = Field(None, max_length=10)

    @field_validator("session_pattern")
    @classmethod
    def _glob(cls, value: str) -> str:
        if (problem := session_pattern_problem(value)) is not None:
            raise ValueError(problem)
        return value

    @field_validator("summary_fallback_models")
    @classmethod
    def _model_ids(cls, value: list[str] | None) -> list[str] | None:
        for model in value or []:
            if not model or len(model) > 200:
                raise ValueError("a model id is 1 to 200 characters")
        return value


__all__ = ["MAX_TOKENS", "ModelOverride", "SummaryModelOverride"]
