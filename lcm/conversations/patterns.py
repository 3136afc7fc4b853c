"""Which sessions LCM leaves alone: ``ignore_session_patterns`` and ``stateless_session_patterns``.

Patterns are globs over the whole session key. ``*`` matches any run of
characters within one segment (no ``:`` or ``/``); ``**`` matches anything,
separators included; every other character matches itself. So
``agent:*:cron:**`` matches ``agent:main:cron:nightly:1`` but not
``agent:main:sub:cron:x``.

* An **ignored** session stores nothing and compacts nothing: writes answer
  as usual with nothing ingested and ``ignored: true``; no conversation row is
  created.
* A **stateless** session may read (assemble, status, grep) what exists under
  its key, but its writes are dropped the same way, with ``stateless: true``.

Ignoring wins when a key matches both lists.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Literal

from lcm.settings import CompactionSettings

WriteSkip = Literal["ignored", "stateless"]


@lru_cache(maxsize=1024)
def compile_session_pattern(pattern: str) -> re.Pattern[str]:
    """The regular expression of one session-key glob (anchored at both ends)."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^:/]*")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out), re.DOTALL)


def matches_any(session_key: str, patterns: Sequence[str]) -> bool:
    return any(compile_session_pattern(p).fullmatch(session_key) for p in patterns)


def write_skip(settings: CompactionSettings, session_key: str) -> WriteSkip | None:
    """Why writes to ``session_key`` are dropped, or ``None`` when they are stored."""
    if matches_any(session_key, settings.ignore_session_patterns):
        return "ignored"
    if matches_any(session_key, settings.stateless_session_patterns):
        return "stateless"
    return None
