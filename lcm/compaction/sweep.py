"""The order of passes in a sweep (docs/design.md §3), as pure decisions.

A sweep is a chain of passes, one per job (:mod:`lcm.compaction.jobs`): the
first job asks :func:`next_pass` what to run from the committed context, and
every job after a pass asks :func:`plan_after_pass` whether and how the chain
goes on. Both are pure, so the chain's rules are tested without a database.

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
finite; a round also ends as soon as a pass saves no tokens, and a chain runs
at most ``max_rounds`` rounds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from lcm.compaction.planning import (
    PassPlan,
    oldest_leaf_chunk,
    shallowest_condensation,
    summarized_prefix_tokens,
)
from lcm.context import ContextEntry, context_tokens
from lcm.policy.threshold import evaluate_threshold
from lcm.settings import CompactionSettings


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
class ChainPosition:
    """Where a sweep chain stands: its round, its passes, and when it started.

    A round is a sweep: passes until none is eligible or one saves nothing.
    ``round_start_tokens`` is what the round began with; ``passes`` counts the
    chain's committed passes over all rounds; ``started_at`` is the wall clock
    (epoch seconds) of its first job, wall clock because the jobs of one chain
    run on any worker host. Travels with each chained job, so every job
    decides from the committed context plus these numbers.
    """

    round: int
    round_start_tokens: int
    passes: int = 0
    started_at: float = 0.0  # 0: unknown (a job sent before chains carried it)

    @classmethod
    def start(cls, entries: Sequence[ContextEntry], now: float = 0.0) -> ChainPosition:
        return cls(1, context_tokens(entries), 0, now)

    def counted(self) -> ChainPosition:
        """This position after one more committed pass."""
        return replace(self, passes=self.passes + 1)

    def as_args(self) -> list[float]:
        """The Celery task argument that carries it to the next job."""
        return [self.round, self.round_start_tokens, self.passes, self.started_at]

    @classmethod
    def from_args(cls, args: Sequence[float]) -> ChainPosition:
        """Inverse of :meth:`as_args`; a two-number list comes from an older sender."""
        passes = int(args[2]) if len(args) > 2 else 0
        started = float(args[3]) if len(args) > 3 else 0.0
        return cls(int(args[0]), int(args[1]), passes, started)


def chain_bound_reached(
    position: ChainPosition, settings: CompactionSettings, now: float | None
) -> str | None:
    """Which bound of the chain (``passes`` or ``seconds``) stops it now, if any."""
    if settings.sweep_max_passes is not None and position.passes >= settings.sweep_max_passes:
        return "passes"
    limit = settings.sweep_max_seconds
    elapsed = None if now is None or not position.started_at else now - position.started_at
    if limit is not None and elapsed is not None and elapsed >= limit:
        return "seconds"
    return None


def plan_after_pass(
    tokens_before: int,
    after: Sequence[ContextEntry],
    settings: CompactionSettings,
    token_budget: int,
    position: ChainPosition,
    *,
    target_tokens: int | None = None,
    now: float | None = None,
) -> tuple[PassPlan | None, ChainPosition]:
    """The chain's next pass after one took the context from ``tokens_before`` to ``after``.

    Within a round this is :func:`continue_after_pass` then :func:`next_pass`.
    A pass that saved nothing ends the round; while the context is still
    under pressure (over the threshold or the target), the round saved
    tokens and fewer than ``max_rounds`` rounds ran, a new round starts
    (docs/design.md §3: compact until under, up to ``max_rounds`` sweeps). A summarizer
    is not deterministic, so the next round's summaries may shrink again; a
    round that saved nothing at all ends the chain, since the next would
    only spend LLM calls on the same plans. Whatever the plan, the chain
    ends once it ran ``sweep_max_passes`` passes or ``sweep_max_seconds``
    (at ``now``, epoch seconds): a slow or rate-limited summarizer cannot
    keep one conversation's chain going for ever.
    """
    if chain_bound_reached(position, settings, now) is not None:
        return None, position
    tokens_after = context_tokens(after)
    if continue_after_pass(tokens_before, tokens_after, target_tokens):
        plan = next_pass(after, settings, token_budget, target_tokens=target_tokens)
        return plan, position
    another_round = (
        tokens_after >= tokens_before  # the round ended on a pass that saved nothing
        and position.round < settings.max_rounds
        and tokens_after < position.round_start_tokens
        and under_pressure(after, settings, token_budget, target_tokens)
    )
    if not another_round:
        return None, position
    plan = next_pass(after, settings, token_budget, target_tokens=target_tokens)
    return plan, replace(position, round=position.round + 1, round_start_tokens=tokens_after)


def applied(entries: list[ContextEntry], plan: PassPlan, entry: ContextEntry) -> list[ContextEntry]:
    """``entries`` with ``plan``'s range replaced by ``entry``: the context after the pass.

    Enough to decide whether another pass is due without reading the context
    again. Messages that arrived meanwhile are not in it; they re-arm the
    debt themselves, and the next job replans from the database anyway.
    """
    first = next(i for i, e in enumerate(entries) if e.ordinal == plan.first_ordinal)
    last = first + len(plan.entries)
    return [*entries[:first], entry, *entries[last:]]
