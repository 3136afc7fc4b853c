"""Where assembly's window stops, and a kept window grown by appended items.

The window (:meth:`lcm.assembly.repository.AssemblyRepository.window`) is
the newest items, walking back from the newest, up to and including the one
that takes their tokens past the budget once at least ``min_items`` are
taken (:func:`reaches_budget`); ``whole`` when the walk ran out of items
first. :func:`grown` gives the same window for a context that grew by
appends alone, from the window kept before them (``lcm.window_cache``).
"""

from __future__ import annotations

from collections.abc import Sequence

from lcm.context import ContextEntry


def reaches_budget(total: int, count: int, token_budget: int, min_items: int) -> bool:
    """``count`` newest items of ``total`` tokens end the window: past the budget, enough items."""
    return total > token_budget and count >= min_items


def grown(
    entries: Sequence[ContextEntry],
    whole: bool,
    appended: Sequence[ContextEntry],
    token_budget: int,
    min_items: int,
) -> tuple[tuple[ContextEntry, ...], bool] | None:
    """The window of ``entries`` (a window, ``whole`` or not) followed by ``appended``.

    Walks back from the newest as a read does, over the kept entries and the
    appended ones (all oldest first). A window that was not whole reached
    the budget with its own entries, so the longer walk reaches it too,
    within them: what a read would give is here. None if it somehow does not
    (the caller reads instead).
    """
    combined = (*entries, *appended)
    total = 0
    for start in range(len(combined) - 1, -1, -1):
        total += combined[start].token_count
        if reaches_budget(total, len(combined) - start, token_budget, min_items):
            return combined[start:], False
    return (combined, True) if whole else None
