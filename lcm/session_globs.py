"""Session-key globs, as every session-key setting reads them.

``ignore_session_patterns``, ``stateless_session_patterns`` and
``summary_model_overrides`` share one syntax: a glob over the whole session
key. ``*`` matches any run of characters within one segment (no ``:`` or
``/``); ``**`` matches anything, separators included; every other character
matches itself. So ``agent:*:cron:**`` matches ``agent:main:cron:nightly:1``
but not ``agent:main:sub:cron:x``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

MAX_PATTERN_CHARS = 512


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


def session_pattern_problem(pattern: str) -> str | None:
    """What is wrong with ``pattern`` as a session-key glob, or ``None``.

    Any string compiles, so this refuses what is surely a mistake: an empty
    or overlong pattern, ``***`` (neither ``*`` nor ``**``), and control
    characters (a session key never holds one).
    """
    if not pattern or len(pattern) > MAX_PATTERN_CHARS:
        return f"a session pattern is 1 to {MAX_PATTERN_CHARS} characters"
    if "***" in pattern:
        return f"{pattern[:60]!r}: use * (one segment) or ** (anything), not ***"
    if any(ord(c) < 32 or ord(c) == 127 for c in pattern):
        return f"{pattern[:60]!r}: a session pattern holds no control characters"
    return None


def matches_session_pattern(session_key: str, pattern: str) -> bool:
    return compile_session_pattern(pattern).fullmatch(session_key) is not None


def matches_any(session_key: str, patterns: Sequence[str]) -> bool:
    return any(matches_session_pattern(session_key, p) for p in patterns)
