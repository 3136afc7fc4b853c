"""The shape of ``summary_model_rules`` (a settings field): which provider and models by depth.

Kept apart from :mod:`lcm.settings` only for size; :mod:`lcm.summarize.routing`
applies the rules.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

SummaryProviderName = Literal["anthropic", "openai"]


class SummaryModelRule(BaseModel):
    """One rule of ``summary_model_rules``: the provider and models for a range of depths.

    Depth 0 is a leaf (raw messages); 1 and up condense summaries. The first
    rule whose range holds the summary's depth wins; none matching keeps
    ``summary_provider``/``summary_model``/``summary_fallback_models``.
    ``provider`` unset means ``summary_provider``.
    """

    model_config = ConfigDict(extra="forbid")

    depth_min: int = Field(0, ge=0, le=1_000)
    depth_max: int | None = Field(None, ge=0, le=1_000)
    provider: SummaryProviderName | None = None
    model: str = Field(min_length=1, max_length=200)
    fallback_models: list[str] = Field(default_factory=list, max_length=10)

    @model_validator(mode="after")
    def _ordered_range(self) -> SummaryModelRule:
        if self.depth_max is not None and self.depth_max < self.depth_min:
            raise ValueError("depth_max must be at least depth_min")
        return self

    def holds(self, depth: int) -> bool:
        """True when ``depth`` is inside this rule's range."""
        return depth >= self.depth_min and (self.depth_max is None or depth <= self.depth_max)


__all__ = ["SummaryModelRule", "SummaryProviderName"]
