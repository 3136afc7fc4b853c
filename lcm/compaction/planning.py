"""What to summarize next: pure selection rules over a list of context entries.

Every function takes the entries of one conversation in ``ordinal`` order and
the compaction settings, and answers from those alone, so the rules are
unit-tested without a database and the database-backed engine and the tests
agree by construction. The sweep order built on top of these lives in
:mod:`lcm.compaction.sweep`.

Rules chosen where docs/design.md §3 is silent (each is tested):

* **Fresh tail.** See :mod:`lcm.policy.fresh_tail`.
* **Leaf chunk.** The oldest run of raw messages outside the tail that holds
  at least ``leaf_min_fanout`` messages (a shorter run stranded between
  summaries is skipped, it cannot grow) and whose chunk holds more than
  ``LEAF_MIN_SOURCE_TOKENS`` (no summary could be smaller). The chunk takes the first
  ``leaf_min_fanout`` messages whatever their size (so a pass always makes
  progress, even over oversized messages) and then more while the chunk stays
  within ``leaf_chunk_tokens``. If its end would split a tool call from its
  result, it ends at the nearest earlier boundary that does not (keeping the
  minimum fanout), else the nearest later one inside the run, else it splits.
* **Condensation.** Runs of contiguous summaries of one depth; the shallowest
  depth with a run of at least ``fanout`` wins, the oldest such run first. The
  chunk is sized like a leaf chunk: ``fanout`` summaries, then more while
  within ``leaf_chunk_tokens`` (the one bound on a summarizer's input).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from lcm.context import ContextEntry, MessageView, SummaryView
from lcm.policy.fresh_tail import fresh_tail_start, unsafe_cuts
from lcm.settings import CompactionSettings

# A leaf chunk must hold more than this many tokens. Its summary costs the
# ``<summary …>`` wrapper (~45 tokens) plus at least the truncation marker
# and a footer (~18): a chunk this small cannot be replaced by anything
# smaller, so summarizing it would only grow the context. Left raw, it grows
# as messages leave the fresh tail (a stranded run never does, and stays raw,
# as short runs do). tests/unit/compaction/test_leaf_chunk.py checks the margin
# against the real wrapper.
LEAF_MIN_SOURCE_TOKENS = 96

PassKind = Literal["leaf", "condensed"]
SweepPhase = Literal["leaf", "routine", "pressure"]


@dataclass(frozen=True, slots=True)
class PassPlan:
    """One compaction pass: replace ``entries`` (contiguous) with one summary.

    ``depth`` is the depth of the summary the pass creates (0 for a leaf).
    ``previous_summary`` (leaf passes) is the nearest summary before the chunk,
    handed to the summarizer as ``previous_context``. The engine commits a pass
    only if these entries are still exactly the context range it read.
    """

    kind: PassKind
    phase: SweepPhase
    depth: int
    entries: tuple[ContextEntry, ...]
    previous_summary: SummaryView | None = None

    def __post_init__(self) -> None:
        if not self.entries:
            raise ValueError("a pass needs at least one source entry")

    @property
    def first_ordinal(self) -> int:
        return self.entries[0].ordinal

    @property
    def last_ordinal(self) -> int:
        return self.entries[-1].ordinal

    @property
    def source_tokens(self) -> int:
        return sum(entry.token_count for entry in self.entries)

    @property
    def message_ids(self) -> tuple[int, ...]:
        return tuple(e.message.id for e in self.entries if e.message is not None)

    @property
    def summary_ids(self) -> tuple[str, ...]:
        return tuple(e.summary.id for e in self.entries if e.summary is not None)


def summarized_prefix_tokens(entries: Sequence[ContextEntry], settings: CompactionSettings) -> int:
    """Tokens of the summary entries in the evictable prefix.

    The fresh tail holds raw messages only, so this is every summary in the
    context; it is what routine condensation compares with
    ``prefix_target_tokens(budget)``.
    """
    start = fresh_tail_start(entries, settings)
    return sum(e.token_count for e in entries[:start] if e.is_summary)


def oldest_leaf_chunk(
    entries: Sequence[ContextEntry], settings: CompactionSettings
) -> PassPlan | None:
    """The next leaf pass, or None when no run outside the tail is long enough."""
    tail = fresh_tail_start(entries, settings)
    index = 0
    while index < tail:
        if not entries[index].is_message:
            index += 1
            continue
        run_end = index
        while run_end < tail and entries[run_end].is_message:
            run_end += 1
        if run_end - index >= settings.leaf_min_fanout:
            plan = _leaf_plan(entries, index, run_end, settings)
            if plan.source_tokens > LEAF_MIN_SOURCE_TOKENS:
                return plan
        index = run_end
    return None


def _leaf_plan(
    entries: Sequence[ContextEntry], start: int, run_end: int, settings: CompactionSettings
) -> PassPlan:
    # Pairs may continue past the run into the fresh tail: look at the whole
    # contiguous stretch of raw messages when judging where a cut is safe.
    stretch_end = run_end
    while stretch_end < len(entries) and entries[stretch_end].is_message:
        stretch_end += 1
    unsafe = unsafe_cuts(_messages(entries[start:stretch_end]))

    min_stop = start + settings.leaf_min_fanout
    stop = _grow(entries, start, min_stop, run_end, settings.leaf_chunk_tokens)
    if unsafe[stop - start]:
        # Prefer shrinking (the chunk stays within its cap) over growing.
        earlier = range(stop - 1, min_stop - 1, -1)
        later = range(stop + 1, run_end + 1)
        stop = next((cut for cut in (*earlier, *later) if not unsafe[cut - start]), stop)

    previous = next((e.summary for e in reversed(entries[:start]) if e.summary is not None), None)
    return PassPlan(
        kind="leaf",
        phase="leaf",
        depth=0,
        entries=tuple(entries[start:stop]),
        previous_summary=previous,
    )


def shallowest_condensation(
    entries: Sequence[ContextEntry],
    settings: CompactionSettings,
    *,
    fanout: int,
    max_result_depth: int | None,
    phase: SweepPhase,
) -> PassPlan | None:
    """The condensed pass at the shallowest eligible depth, or None.

    A run is eligible when it holds at least ``fanout`` contiguous summaries of
    one depth ``d`` and ``d + 1`` does not exceed ``max_result_depth`` (None:
    no limit). Among eligible runs the shallowest wins, then the oldest.
    """
    if fanout < 2:
        raise ValueError("condensing fewer than two summaries saves nothing")
    best: tuple[int, int, int] | None = None  # depth, start, end
    index = 0
    while index < len(entries):
        depth = entries[index].summary_depth
        if depth is None:
            index += 1
            continue
        run_end = index
        while run_end < len(entries) and entries[run_end].summary_depth == depth:
            run_end += 1
        allowed = max_result_depth is None or depth + 1 <= max_result_depth
        if allowed and run_end - index >= fanout and (best is None or depth < best[0]):
            best = (depth, index, run_end)
        index = run_end
    if best is None:
        return None
    depth, start, run_end = best
    stop = _grow(entries, start, start + fanout, run_end, settings.leaf_chunk_tokens)
    return PassPlan(
        kind="condensed", phase=phase, depth=depth + 1, entries=tuple(entries[start:stop])
    )


def _grow(
    entries: Sequence[ContextEntry], start: int, min_stop: int, run_end: int, cap: int
) -> int:
    """End of a chunk: at least ``min_stop``, then grown while within ``cap`` tokens."""
    tokens = sum(e.token_count for e in entries[start:min_stop])
    stop = min_stop
    while stop < run_end and tokens + entries[stop].token_count <= cap:
        tokens += entries[stop].token_count
        stop += 1
    return stop


def _messages(entries: Sequence[ContextEntry]) -> list[MessageView]:
    return [e.message for e in entries if e.message is not None]
