"""The order of passes in a sweep (DESIGN §3), as pure decisions.

A sweep is a chain of passes. The database-backed engine runs one pass per
job and asks :func:`next_pass` what comes next from the committed state, and
:func:`continue_after_pass` whether to go on at all; :func:`run_sweep` and
:func:`compact_until_under` drive the same decisions in a loop for callers
(and tests) that execute passes in-process through a ``run_pass`` callable.

Phases, each tried only when the previous one has nothing eligible:

1. **leaf**: the oldest eligible leaf chunk, until none is left;
2. **routine**: while the summarized prefix exceeds
   ``prefix_target_tokens(budget)``, condensation with
   ``condensed_min_fanout`` creating summaries no deeper than
   ``sweep_max_depth`` (0: no routine condensation; -1: no depth limit);
3. **pressure**: while the context is at or over the threshold, or over an
   explicit target, condensation with ``condensed_min_fanout_hard`` at any
   depth. ``sweep_max_depth`` does not bound this phase: it exists to get the
   context under the budget when routine work was not enough.

Every pass replaces at least two entries with one, so any chain of passes is
finite; the driver also stops as soon as a pass saves no tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from lcm.compaction.planning import (
    PassPlan,
    evaluate_threshold,
    oldest_leaf_chunk,
    shallowest_condensation,
    summarized_prefix_tokens,
)
from lcm.context import ContextEntry, context_tokens
from lcm.settings import CompactionSettings

RunPass = Callable[[PassPlan], Sequence[ContextEntry]]
"""Executes one pass and returns the conversation's entries afterwards."""

SweepStop = Literal["nothing_eligible", "no_savings", "under_target"]


def under_pressure(
    entries: Sequence[ContextEntry],
    settings: CompactionSettings,
    token_budget: int,
    target_tokens: int | None = None,
) -> bool:
    """At or over the threshold, or over an explicit target."""
    tokens = context_tokens(entries)
    if evaluate_threshold(tokens, token_budget, settings).over_threshold:
        return True
    return target_tokens is not None and tokens > target_tokens


def next_pass(
    entries: Sequence[ContextEntry],
    settings: CompactionSettings,
    token_budget: int,
    *,
    target_tokens: int | None = None,
) -> PassPlan | None:
    """The pass a sweep runs next over ``entries``, or None when it is done."""
    leaf = oldest_leaf_chunk(entries, settings)
    if leaf is not None:
        return leaf

    max_depth = settings.sweep_max_depth
    prefix_tokens = summarized_prefix_tokens(entries, settings)
    if max_depth != 0 and prefix_tokens > settings.prefix_target_tokens(token_budget):
        routine = shallowest_condensation(
            entries,
            settings,
            fanout=settings.condensed_min_fanout,
            max_result_depth=None if max_depth < 0 else max_depth,
            phase="routine",
        )
        if routine is not None:
            return routine

    if under_pressure(entries, settings, token_budget, target_tokens):
        return shallowest_condensation(
            entries,
            settings,
            fanout=settings.condensed_min_fanout_hard,
            max_result_depth=None,
            phase="pressure",
        )
    return None


def continue_after_pass(
    tokens_before: int, tokens_after: int, target_tokens: int | None = None
) -> bool:
    """Whether a sweep goes on after a pass took the context from before to after.

    It stops when an explicit target has been reached, or when the pass saved
    nothing: the summaries are no longer shrinking what they replace, and
    pressing on would only spend LLM calls (or grow the context).
    """
    if tokens_after >= tokens_before:
        return False
    return target_tokens is None or tokens_after > target_tokens


@dataclass(frozen=True, slots=True)
class SweepResult:
    entries: tuple[ContextEntry, ...]
    passes: tuple[PassPlan, ...]
    tokens_before: int
    tokens_after: int
    stop: SweepStop


def run_sweep(
    entries: Sequence[ContextEntry],
    settings: CompactionSettings,
    token_budget: int,
    run_pass: RunPass,
    *,
    target_tokens: int | None = None,
) -> SweepResult:
    """Run passes chosen by :func:`next_pass` until it has none or a stop rule fires."""
    current = tuple(entries)
    tokens_before = context_tokens(current)
    passes: list[PassPlan] = []
    stop: SweepStop = "nothing_eligible"
    tokens = tokens_before
    while True:
        plan = next_pass(current, settings, token_budget, target_tokens=target_tokens)
        if plan is None:
            break
        passes.append(plan)
        current = tuple(run_pass(plan))
        tokens, previous = context_tokens(current), tokens
        if not continue_after_pass(previous, tokens, target_tokens):
            stop = "no_savings" if tokens >= previous else "under_target"
            break
    return SweepResult(current, tuple(passes), tokens_before, tokens, stop)


@dataclass(frozen=True, slots=True)
class CompactUntilUnderResult:
    entries: tuple[ContextEntry, ...]
    sweeps: tuple[SweepResult, ...]
    tokens_before: int
    tokens_after: int
    target_tokens: int

    @property
    def reached_target(self) -> bool:
        return self.tokens_after <= self.target_tokens

    @property
    def passes(self) -> tuple[PassPlan, ...]:
        return tuple(plan for sweep in self.sweeps for plan in sweep.passes)


def compact_until_under(
    entries: Sequence[ContextEntry],
    settings: CompactionSettings,
    token_budget: int,
    target_tokens: int,
    run_pass: RunPass,
    *,
    max_rounds: int | None = None,
) -> CompactUntilUnderResult:
    """Sweep until the context is at most ``target_tokens``, up to ``max_rounds`` sweeps.

    ``max_rounds`` defaults to ``settings.max_rounds``. A round that saves
    nothing ends the loop early: the planner is deterministic, so the next
    round would choose the same passes again.
    """
    rounds = settings.max_rounds if max_rounds is None else max_rounds
    current = tuple(entries)
    tokens_before = context_tokens(current)
    sweeps: list[SweepResult] = []
    while len(sweeps) < rounds and context_tokens(current) > target_tokens:
        sweep = run_sweep(current, settings, token_budget, run_pass, target_tokens=target_tokens)
        sweeps.append(sweep)
        current = sweep.entries
        if sweep.tokens_after >= sweep.tokens_before:
            break
    return CompactUntilUnderResult(
        current, tuple(sweeps), tokens_before, context_tokens(current), target_tokens
    )
