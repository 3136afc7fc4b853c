"""Run an expansion plan: one loop per conversation, one deadline, one reading budget.

The conversations are expanded one after the other in rank order, each by
its own loop confined to that conversation (``GrantedTools.only``), all
debiting the one grant: the budget is shared, so a wider scope never reads
more than a narrow one may. A conversation not reached before the deadline
is ``timed_out``, one reached after the budget is spent ``skipped_budget``;
either marks the answer ``truncated``. A loop that times out or fails
contributes no answer text and no citations; the conversations that answered
still do.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from lcm.errors import LcmError, SummarizerError
from lcm.retrieval.agent_tools import GrantedTools
from lcm.retrieval.answers import (
    ANSWERED,
    FAILED,
    NO_MATCH,
    SKIPPED_BUDGET,
    TIMED_OUT,
    ConversationOutcome,
    ExpandQueryAnswer,
    ExpandQueryRequest,
    OutcomeError,
    Usage,
)
from lcm.retrieval.expand_query import DeadlinePassed, LoopLlm, run_expand_query
from lcm.retrieval.expansion_plan import ExpansionPlan, PlannedConversation


@dataclass(frozen=True, slots=True)
class LoopLimits:
    max_turns: int
    budget: int


@dataclass(frozen=True, slots=True)
class Loop:
    """What every conversation's loop shares, and where its usage goes."""

    request: ExpandQueryRequest
    llm: LoopLlm | None
    limits: LoopLimits
    clock: Callable[[], float]
    spent: list[Usage]


def run_plan(
    tools_for: Callable[[int], GrantedTools],
    plan: ExpansionPlan,
    request: ExpandQueryRequest,
    llm: LoopLlm | None,
    limits: LoopLimits,
    clock: Callable[[], float] = time.time,
    spent: list[Usage] | None = None,
) -> ExpandQueryAnswer:
    """Expand the plan's conversations in order; one answer with a per-conversation breakdown.

    Every model call's usage, failed loops' too, is appended to ``spent``
    (the caller records it even when this raises) and is the answer's ``usage``.
    """
    spent = [] if spent is None else spent
    outcomes: list[ConversationOutcome] = []
    answered: list[tuple[PlannedConversation, ExpandQueryAnswer]] = []
    failures: list[LcmError] = []
    for planned in plan.expand:
        mine: list[Usage] = []
        run = Loop(request, llm, limits, clock, mine)
        outcome, answer = _expand_one(tools_for, planned, plan, run)
        spent += mine
        outcomes.append(outcome)
        if isinstance(answer, LcmError):
            failures.append(answer)
        elif answer is not None:
            answered.append((planned, answer))
    outcomes += [
        ConversationOutcome(c.conversation_id, c.session_key, NO_MATCH) for c in plan.unmatched
    ]
    if failures and not answered:
        # Nothing to answer with and a loop failed (the model is down, the grant
        # ended): the call fails with that error, as a one-conversation call did.
        raise failures[0]
    truncated = plan.not_expanded > 0 or any(
        o.status in (TIMED_OUT, SKIPPED_BUDGET, FAILED) for o in outcomes
    )
    return _combine(answered, outcomes, truncated, plan, llm, spent)


def _expand_one(
    tools_for: Callable[[int], GrantedTools],
    planned: PlannedConversation,
    plan: ExpansionPlan,
    run: Loop,
) -> tuple[ConversationOutcome, ExpandQueryAnswer | LcmError | None]:
    """One conversation's outcome, with its answer, or the error that ended its loop.

    ``None`` instead when it did not run (deadline, budget) or the deadline
    cut it: no answer text, and nothing for the caller to raise.
    """
    base = ConversationOutcome(
        planned.conversation_id, planned.session_key, ANSWERED, planned.score
    )
    clock = run.clock
    if clock() >= plan.deadline_at:
        error = OutcomeError("deadline_passed", "not reached before the deadline")
        return replace(base, status=TIMED_OUT, error=error), None
    tools = tools_for(planned.conversation_id)
    started = time.monotonic()
    try:
        if tools.remaining() == 0:
            error = OutcomeError("budget_spent", "the shared reading budget was spent")
            return replace(base, status=SKIPPED_BUDGET, error=error), None
        asked = replace(run.request, summary_ids=planned.summary_ids)
        answer = run_expand_query(
            tools,
            asked,
            run.llm,
            max_turns=run.limits.max_turns,
            budget=run.limits.budget,
            deadline_at=plan.deadline_at,
            clock=clock,
            spent=run.spent,
        )
    except LcmError as exc:
        late = isinstance(exc, DeadlinePassed | SummarizerError) and clock() >= plan.deadline_at
        status = TIMED_OUT if late else FAILED
        error = OutcomeError(exc.code, _short(exc.message))
        failed = _spent(replace(base, status=status, error=error), tools, started)
        return failed, (None if late else exc)
    return _spent(base, tools, started), answer


def _spent(
    outcome: ConversationOutcome, tools: GrantedTools, started: float
) -> ConversationOutcome:
    elapsed_ms = int((time.monotonic() - started) * 1000)
    return replace(outcome, elapsed_ms=elapsed_ms, tokens=tools.tokens_read)


def _short(message: str, limit: int = 300) -> str:
    """An error for the breakdown: its first line, bounded (never a traceback)."""
    first = message.strip().splitlines()[0] if message.strip() else ""
    return first[:limit]


def _combine(
    answered: list[tuple[PlannedConversation, ExpandQueryAnswer]],
    outcomes: list[ConversationOutcome],
    truncated: bool,
    plan: ExpansionPlan,
    llm: LoopLlm | None,
    spent: list[Usage],
) -> ExpandQueryAnswer:
    answers = [a for _, a in answered]
    if len(answers) == 1:  # source_conversation_ids says which
        text = answers[0].answer
    elif answers:
        text = "\n\n".join(f"{_heading(p)}\n{a.answer}" for p, a in answered)
    else:
        text = _nothing(outcomes)
    return ExpandQueryAnswer(
        answer=text,
        cited_ids=list(dict.fromkeys(ref for a in answers for ref in a.cited_ids)),
        offline=llm is None,
        model=llm.model if llm is not None else (answers[0].model if answers else "offline"),
        turns=sum(a.turns for a in answers),
        tokens_read=sum(o.tokens for o in outcomes),
        usage=list(spent),
        source_conversation_ids=[p.conversation_id for p, _ in answered],
        conversations=outcomes,
        truncated=truncated,
        timeout_ms=plan.timeout_ms,
    )


def _heading(planned: PlannedConversation) -> str:
    key = f" ({planned.session_key})" if planned.session_key else ""
    return f"Conversation {planned.conversation_id}{key}:"


def _nothing(outcomes: list[ConversationOutcome]) -> str:
    if not outcomes:
        return "Nothing in scope matches the query."
    counts: dict[str, int] = {}
    for outcome in outcomes:
        counts[outcome.status] = counts.get(outcome.status, 0) + 1
    summary = ", ".join(f"{status}: {n}" for status, n in counts.items())
    return f"No conversation in scope answered ({summary})."
