"""How long-running domain work reports its progress: a plain callable.

A use case that may take long (erasing a big tenant, exporting a long
conversation) takes an optional ``on_progress(done, total)`` and calls it as
it goes; ``total`` is in the same unit as ``done`` (statements, messages).
What shows it (a terminal bar in the CLI, nothing for scripts) is the
caller's business: the domain never draws anything.
"""

from __future__ import annotations

from collections.abc import Callable

OnProgress = Callable[[int, int], None]


def no_progress(done: int, total: int) -> None:
    """The default: progress goes nowhere."""


__all__ = ["OnProgress", "no_progress"]
