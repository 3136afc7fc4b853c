"""Which sessions LCM leaves alone: ``ignore_session_patterns`` and ``stateless_session_patterns``.

Patterns are session-key globs (:mod:`lcm.session_globs`).

* An **ignored** session stores nothing and compacts nothing: writes answer
  as usual with nothing ingested and ``ignored: true``; no conversation row is
  created.
* A **stateless** session may read (assemble, status, grep) what exists under
  its key, but its writes are dropped the same way, with ``stateless: true``.

Ignoring wins when a key matches both lists.
"""

from __future__ import annotations

from typing import Literal

from lcm.session_globs import compile_session_pattern, matches_any
from lcm.settings import CompactionSettings

WriteSkip = Literal["ignored", "stateless"]


def write_skip(settings: CompactionSettings, session_key: str) -> WriteSkip | None:
    """Why writes to ``session_key`` are dropped, or ``None`` when they are stored."""
    if matches_any(session_key, settings.ignore_session_patterns):
        return "ignored"
    if matches_any(session_key, settings.stateless_session_patterns):
        return "stateless"
    return None


__all__ = ["WriteSkip", "compile_session_pattern", "matches_any", "write_skip"]
