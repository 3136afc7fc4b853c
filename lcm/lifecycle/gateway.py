"""A gateway's turn as one use case: store it, owe compaction, then (inline mode) sweep.

The turn's messages and debt commit first, in a unit of work this module
opens (the wake-up leaves with that commit); inline mode then runs the sweep
over the committed turn in the calling thread, holding the same lease a
worker would.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from lcm.address import SessionAddress
from lcm.compaction.inline import run_inline
from lcm.compaction.jobs import CompactionJobs
from lcm.compaction.service import context_token_total
from lcm.content import PreparedMessage
from lcm.db.engine import Transaction
from lcm.files.storage import FileStorage
from lcm.ingest.turns import LivePrompt, TurnResult, after_turn
from lcm.lifecycle.commits import CommitResult, commit_turn
from lcm.policy.overrides import ModelInfo
from lcm.settings import Settings

Compaction = Literal["none", "scheduled", "ran"]
InlineJobs = Callable[[], CompactionJobs]


@dataclass(frozen=True, slots=True)
class TurnInput:
    """What a gateway sends with a turn, besides its messages."""

    token_budget: int
    model: ModelInfo
    live: LivePrompt


@dataclass(frozen=True, slots=True)
class TurnTaken:
    """A stored turn, what became of its compaction, and (after an inline sweep) the total."""

    turn: TurnResult
    compaction: Compaction
    tokens_after: int | None = None


def sweep_outcome(
    over_threshold: bool, mode: str, conversation_id: int, inline_jobs: InlineJobs
) -> Compaction:
    """``none`` / ``scheduled`` / ``ran`` for a committed turn; inline mode runs the sweep here.

    Call it only after the turn's unit of work committed: the sweep reads
    the turn's messages and debt from the database.
    """
    if not over_threshold:
        return "none"
    if mode == "inline" and run_inline(inline_jobs(), conversation_id):
        return "ran"
    return "scheduled"  # deferred: the wake-up left with the commit; or a worker holds the lease


def take_turn(
    transaction: Transaction,
    read: Transaction,
    inline_jobs: InlineJobs,
    address: SessionAddress,
    batch: Sequence[PreparedMessage],
    given: TurnInput,
    settings: Settings,
    storage: FileStorage,
) -> TurnTaken:
    """``POST …/turns``: store the turn, then sweep inline or leave it to a worker.

    ``settings`` are the tenant's effective settings. After an inline sweep
    the context's new total is read, so the host retries with what it left.
    """
    with transaction() as session:
        turn = after_turn(
            session, address, batch, given.token_budget, settings, storage, given.model, given.live
        )
    if turn.ingest is None:
        return TurnTaken(turn, "none")
    conversation_id = turn.ingest.conversation_id
    compaction = sweep_outcome(turn.over_threshold, turn.mode, conversation_id, inline_jobs)
    if compaction != "ran":
        return TurnTaken(turn, compaction)
    with read() as fresh:
        return TurnTaken(turn, compaction, context_token_total(fresh, conversation_id))


def commit_host_turn(
    transaction: Transaction,
    inline_jobs: InlineJobs,
    address: SessionAddress,
    advancement_key: str,
    batch: Sequence[PreparedMessage],
    given: TurnInput,
    settings: Settings,
    storage: FileStorage,
) -> tuple[CommitResult, Compaction]:
    """``POST …/commits``: :func:`commit_turn` in its own unit of work, then the sweep's outcome."""
    with transaction() as session:
        result = commit_turn(
            session,
            address,
            advancement_key,
            batch,
            given.token_budget,
            settings,
            storage,
            given.model,
            given.live,
        )
    turn = result.turn
    if turn is None or result.conversation_id is None:
        return result, "none"
    return result, sweep_outcome(
        turn.over_threshold, turn.mode, result.conversation_id, inline_jobs
    )


__all__ = [
    "Compaction",
    "TurnInput",
    "TurnTaken",
    "commit_host_turn",
    "sweep_outcome",
    "take_turn",
]
