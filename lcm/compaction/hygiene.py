"""What the summarizer should not read: context that plugins injected into a turn.

Memory and retrieval plugins prepend blocks such as
``<relevant-memories>…</relevant-memories>`` to a user's prompt. They are
recalled context of that one turn, often recalled from earlier summaries, so
summarizing them again would fold stale retrieval into the conversation's
history. ``strip_injected_context`` removes each such block (the tags, their
attributes and everything between them) from the summarizer's input; the
stored message keeps them, so describe, grep and expand still show them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache


@lru_cache(maxsize=64)
def _block_pattern(tags: tuple[str, ...]) -> re.Pattern[str]:
    names = "|".join(re.escape(t) for t in tags)
    # Non-greedy up to the first matching closing tag; an unclosed block is
    # left alone (nothing proves where it ends). Blank lines left behind collapse.
    return re.compile(
        rf"[ \t]*<({names})(?:\s[^>]*)?>.*?</\1\s*>[ \t]*\n?", re.DOTALL | re.IGNORECASE
    )


def strip_injected_context(text: str, tags: Sequence[str]) -> str:
    """``text`` without the blocks of ``tags``; unchanged when no tag is named or present."""
    if not tags or "<" not in text:
        return text
    return _block_pattern(tuple(tags)).sub("", text)
