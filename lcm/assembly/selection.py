"""Prompt-aware eviction: which evictable entries to keep when the prompt says what matters.

Used by :func:`lcm.assembly.assemble_context` only when the tenant turned
``prompt_aware_eviction`` on, the prompt has searchable terms and some
entry of the evictable prefix matched them (``relevance``: ordinal to the
score grep's full-text relevance gave it). Rules:

* The prefix is cut into **units** that are kept or dropped whole: a summary
  alone, or a run of raw messages no cut of which separates a tool call from
  its result (:func:`lcm.policy.unsafe_cuts`).
* If every unit fits, all are kept (the same window as without a prompt).
* Otherwise units holding a match are taken best score first (a newer unit
  first among equal scores), each if it fits; then the rest of the budget is
  filled newest-first from the end of the prefix, stopping at the first unit
  that does not fit, as plain assembly does. What is kept is returned in
  chronological order.
* ``priority`` ranks the kept entries (0 = taken first): the assembler drops
  the last-taken unit first when repairs push the result over the budget.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from lcm.assembly.render import RenderedEntry, render_entry
from lcm.context import ContextEntry
from lcm.policy.fresh_tail import unsafe_cuts

Chosen = list[tuple[ContextEntry, RenderedEntry]]


def choose_by_relevance(
    prefix: Sequence[ContextEntry], room: int, relevance: Mapping[int, float], timezone: str
) -> tuple[Chosen, dict[int, int]]:
    """The prefix entries kept within ``room`` tokens, oldest first, and each one's priority."""
    rendered = [render_entry(entry, timezone) for entry in prefix]
    units = tool_safe_units(prefix)
    costs = [sum(rendered[i].tokens for i in unit) for unit in units]
    if sum(costs) <= room:
        return list(zip(prefix, rendered, strict=True)), {e.ordinal: 0 for e in prefix}

    scores = [max(relevance.get(prefix[i].ordinal, 0.0) for i in unit) for unit in units]
    matched = sorted(
        (u for u, score in enumerate(scores) if score > 0), key=lambda u: (-scores[u], -u)
    )
    taken: list[int] = []
    for u in matched:
        if costs[u] <= room:
            taken.append(u)
            room -= costs[u]
    kept = set(taken)
    for u in range(len(units) - 1, -1, -1):
        if u in kept:
            continue
        if costs[u] > room:
            break
        taken.append(u)
        room -= costs[u]
    priority = {prefix[i].ordinal: rank for rank, u in enumerate(taken) for i in units[u]}
    chosen = [(prefix[i], rendered[i]) for u in sorted(taken) for i in units[u]]
    return chosen, priority


def drop_last_taken(chosen: Chosen, priority: Mapping[int, int]) -> Chosen:
    """``chosen`` without the unit taken last (the lowest priority)."""
    last = max(priority[entry.ordinal] for entry, _ in chosen)
    return [(entry, r) for entry, r in chosen if priority[entry.ordinal] != last]


def tool_safe_units(entries: Sequence[ContextEntry]) -> list[list[int]]:
    """``entries`` cut into runs of indexes that keep every tool call with its result."""
    units: list[list[int]] = []
    run: list[int] = []  # indexes of the current run of raw messages

    def close_run() -> None:
        messages = [m for i in run if (m := entries[i].message) is not None]
        unsafe = unsafe_cuts(messages)
        for position, index in enumerate(run):
            if position == 0 or not unsafe[position]:
                units.append([])
            units[-1].append(index)
        run.clear()

    for index, entry in enumerate(entries):
        if entry.is_message:
            run.append(index)
            continue
        close_run()
        units.append([index])
    close_run()
    return units
