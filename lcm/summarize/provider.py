"""The one interface every summary backend implements.

The request carries structured inputs rather than a finished prompt so that a
backend that is not an LLM (the offline extractive one) can still honour the
depth, the budget and the aggressive flag; LLM backends render the prompt with
:func:`lcm.summarize.prompts.build_prompt`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

SummaryKind = Literal["leaf", "condensed"]

# Temperatures of the two LLM steps of escalation (docs/design.md §3).
NORMAL_TEMPERATURE = 0.2
AGGRESSIVE_TEMPERATURE = 0.1


@dataclass(frozen=True, slots=True)
class Thinking:
    """Extended thinking asked for a summary call (``enable_summary_thinking``).

    Anthropic gets ``budget_tokens`` of thinking on top of the summary's own
    output; an OpenAI-compatible model gets ``effort`` as ``reasoning_effort``.
    The thinking itself never becomes part of the summary; its tokens are
    billed as output and counted so.
    """

    budget_tokens: int
    effort: str = "low"


@dataclass(frozen=True, slots=True)
class SummaryRequest:
    """Everything a backend needs to write one summary.

    ``source_text`` is already rendered by the caller (messages with their
    timestamps for a leaf, child summaries for a condensed node).
    ``previous_context`` is the most recent prior summary, given for continuity
    only: it must not be summarized again.
    """

    source_text: str
    depth: int
    target_tokens: int
    previous_context: str | None = None
    temperature: float = NORMAL_TEMPERATURE
    aggressive: bool = False
    custom_instructions: str = ""
    # The tenant's model order (primary, then fallbacks); empty means the
    # provider's own configured models.
    models: tuple[str, ...] = ()
    # The provider to ask ("anthropic", "openai"); None: the deployment's.
    provider: str | None = None
    thinking: Thinking | None = None

    def __post_init__(self) -> None:
        # These are programming errors in the compaction engine, not bad user input.
        if self.depth < 0:
            raise ValueError(f"depth must be >= 0, got {self.depth}")
        if self.target_tokens < 1:
            raise ValueError(f"target_tokens must be >= 1, got {self.target_tokens}")

    @property
    def kind(self) -> SummaryKind:
        """Depth 0 summarizes raw messages (a leaf); anything deeper condenses summaries."""
        return "leaf" if self.depth == 0 else "condensed"


@dataclass(frozen=True, slots=True)
class Completion:
    """One backend answer and what it cost (for the ``llm_usage`` rows)."""

    text: str
    model: str
    input_tokens: int
    output_tokens: int
    provider: str = ""  # who answered: "anthropic", "openai", "offline"


class SummaryProvider(Protocol):
    """Turns a :class:`SummaryRequest` into a :class:`Completion`.

    Implementations raise :class:`lcm.errors.SummarizerError` (or a subclass)
    for every failure they cannot recover from themselves, so the summarizer
    can fall back to truncation without catching arbitrary exceptions.
    """

    def complete(self, request: SummaryRequest) -> Completion: ...
