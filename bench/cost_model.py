"""What a turn costs in model tokens: the cacheable prefix and the rolling-summary baseline.

Plain functions over plain data (no server): :func:`cacheable_chars` measures
how much of a request repeats the previous request as a prefix (what a
provider's prompt cache can serve), :class:`Replay` accumulates it per turn,
and :func:`rolling_replay` simulates a gateway's built-in compaction (one
rolling summary) over the same turns, for ``python -m bench cost``.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.workload import Step
from lcm.tokens import estimate_tokens

# A turn whose cacheable prefix is shorter than this share of the previous
# request, by at least BREAK_MIN_CHARS (~250 tokens), lost part of what the
# cache held. Smaller losses are the request's closing characters, or its
# last user message extended by the next input (roles alternate).
BREAK_SHARE = 0.99
BREAK_MIN_CHARS = 1_000
_THINKING = '"type":"thinking"'


def serialized(messages: Sequence[Any]) -> str:
    """A request's messages as the provider receives them (compact JSON)."""
    return json.dumps(list(messages), ensure_ascii=False, separators=(",", ":"))


def cacheable_chars(previous: str, current: str) -> int:
    """Characters of ``current`` that repeat ``previous`` from its start.

    A binary search over slice comparisons (each done in C): requests run to
    hundreds of kilobytes, and a character loop in Python would dominate.
    """
    same, differ = 0, min(len(previous), len(current))
    if previous[:differ] == current[:differ]:
        return differ
    while differ - same > 1:  # previous[:same] == current[:same], [:differ] differs
        middle = (same + differ) // 2
        if previous[:middle] == current[:middle]:
            same = middle
        else:
            differ = middle
    return same


@dataclass(frozen=True, slots=True)
class TurnCost:
    """One assembled request: its tokens, the part a prompt cache serves, a break."""

    tokens: int
    cached_tokens: int
    broke: bool  # the prefix kept less than BREAK_SHARE of the previous request
    compacted: bool  # compaction ran since the previous request
    session: int = 0  # which replayed session, in order
    # Where a break is: "compaction"; "thinking" (the previous request's
    # last assistant message lost its thinking block); "other"; "" (no break).
    cause: str = ""


@dataclass
class Replay:
    """Every turn of one replay, and the summarization it needed."""

    name: str
    turns: list[TurnCost] = field(default_factory=list)
    summary_input_tokens: int = 0
    summary_output_tokens: int = 0
    summary_calls: int = 0
    _previous: str = ""
    _session: int = -1

    def request(self, text: str, compacted: bool = False) -> TurnCost:
        """Record the next request (serialized); a session's first starts cold."""
        tokens = estimate_tokens(text)
        common = cacheable_chars(self._previous, text) if self._previous else 0
        cached = tokens * common // len(text) if text else 0
        lost = len(self._previous) - common
        broke = bool(self._previous) and lost > (1 - BREAK_SHARE) * len(self._previous)
        broke = broke and lost >= BREAK_MIN_CHARS
        cause = _cause(self._previous, common, compacted) if broke else ""
        turn = TurnCost(tokens, cached, broke, compacted, max(0, self._session), cause)
        self.turns.append(turn)
        self._previous = text
        return turn

    def new_session(self) -> None:
        self._previous = ""
        self._session += 1

    def csv_rows(self) -> list[str]:
        """One line a turn: replay, session, turn, tokens, cacheable tokens, break, compacted."""
        return [
            f"{self.name},{t.session},{n},{t.tokens},{t.cached_tokens},{int(t.broke)},"
            f"{int(t.compacted)},{t.cause}"
            for n, t in enumerate(self.turns)
        ]

    def per_thousand(self, value: int) -> float:
        return 1000 * value / max(1, len(self.turns))

    def overall_share(self) -> float:
        """Cacheable tokens over all request tokens (what the bill weighs)."""
        total = sum(t.tokens for t in self.turns)
        return sum(t.cached_tokens for t in self.turns) / max(1, total)

    def median_share(self) -> float:
        shares = [t.cached_tokens / t.tokens for t in self.turns if t.tokens]
        return statistics.median(shares) if shares else 0.0

    def breaks(self) -> list[TurnCost]:
        return [t for t in self.turns if t.broke]

    def compaction_breaks(self) -> list[TurnCost]:
        """Breaks right after a compaction (the others: the assembly itself changed)."""
        return [t for t in self.turns if t.broke and t.compacted]

    def breaks_by(self, cause: str) -> list[TurnCost]:
        return [t for t in self.turns if t.cause == cause]

    def lost_share(self, cause: str) -> float:
        """Request tokens the cache could not serve at breaks of ``cause``, of all tokens."""
        lost = sum(t.tokens - t.cached_tokens for t in self.breaks_by(cause))
        return lost / max(1, sum(t.tokens for t in self.turns))

    def mean_break_share(self, cause: str = "compaction") -> float:
        broken = self.breaks_by(cause)
        return statistics.fmean(t.cached_tokens / t.tokens for t in broken) if broken else 1.0

    def mean_tokens(self) -> float:
        return statistics.fmean(t.tokens for t in self.turns) if self.turns else 0.0

    def max_tokens(self) -> int:
        return max((t.tokens for t in self.turns), default=0)


@dataclass(frozen=True, slots=True)
class Rolling:
    """A gateway's built-in compaction: over the threshold, one summary replaces all
    but the last ``keep_turns`` turns (the previous summary included)."""

    token_budget: int
    threshold: float = 0.75
    keep_turns: int = 20
    summary_tokens: int = 2_000


def rolling_replay(sessions: Sequence[Sequence[Step]], rolling: Rolling) -> Replay:
    """Replay ``sessions`` under one rolling summary; count its tokens as the fake model does."""
    replay = Replay("rolling summary")
    for steps in sessions:
        replay.new_session()
        summary: list[dict[str, Any]] = []
        turns: list[list[dict[str, Any]]] = []  # each turn's messages, oldest first
        compacted = False
        for step in steps:
            turns.append([{"role": r, "content": c} for r, c in step.inputs])
            replay.request(serialized([*summary, *(m for t in turns for m in t)]), compacted)
            compacted = False
            turns[-1].extend({"role": r, "content": c} for r, c in step.outputs)
            context = [*summary, *(m for t in turns for m in t)]
            if estimate_tokens(serialized(context)) < rolling.threshold * rolling.token_budget:
                continue
            dropped = [*summary, *(m for t in turns[: -rolling.keep_turns] for m in t)]
            if not turns[: -rolling.keep_turns]:
                continue  # the kept turns alone are over: nothing a rolling summary can drop
            summary = [_summary_message(replay.summary_calls, rolling.summary_tokens)]
            compacted = True
            replay.summary_calls += 1
            replay.summary_input_tokens += estimate_tokens(serialized(dropped))
            replay.summary_output_tokens += rolling.summary_tokens
            turns = turns[-rolling.keep_turns :]
    return replay


def _cause(previous: str, common: int, compacted: bool) -> str:
    if compacted:
        return "compaction"
    return "thinking" if _THINKING in previous[common - 16 : common + 24] else "other"


def _summary_message(number: int, tokens: int) -> dict[str, Any]:
    # Each compaction writes a new summary: its text differs from the first
    # character on, as a rewritten summary does.
    text = f"<summary n={number}>" + " ".join(f"fact{number}-{i}" for i in range(tokens * 4 // 9))
    return {"role": "user", "content": text + "</summary>"}
