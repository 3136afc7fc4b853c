"""What a compaction job did, as its task reads it: the next step to take."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from lcm.compaction.engine import PassOutcome
from lcm.compaction.sweep import ChainPosition


class StepAction(StrEnum):
    """What the task does after a wake-up or a pass (and how an inline run ended)."""

    NOOP = "noop"
    PASS = "pass"
    DONE = "done"
    RETRY = "retry"
    FAILED = "failed"
    PAUSED = "paused"


@dataclass(frozen=True, slots=True)
class Step:
    """What the entrypoint does next: enqueue a pass, a delayed wake-up, or nothing."""

    action: StepAction
    conversation_id: int
    kind: str | None = None  # "leaf" | "condensed" | "repair" when action == "pass"
    fencing_token: int | None = None
    countdown: float = 0.0
    follow_up: bool = False  # debt re-armed meanwhile: send a wake-up
    outcome: PassOutcome | None = None
    position: ChainPosition | None = None  # handed to the next pass job with the lease
    queue_lag_seconds: float | None = None  # set on a wake-up's claim
