"""The tags of blocks memory and context plugins inject into prompts (settings' defaults).

Such a block is retrieval context of one turn, not conversation, and is kept
out of summaries (``strip_injected_context_tags``).
"""

from __future__ import annotations

import re

_TAG_NAME = re.compile(r"[A-Za-z_][-A-Za-z0-9_.]{0,99}")

DEFAULT_INJECTED_CONTEXT_TAGS = [
    "active_memory_plugin",
    "relevant-memories",
    "relevant_memories",
    "hindsight_memories",
]


def check_tag_names(tags: list[str]) -> list[str]:
    """``tags`` unchanged, or ``ValueError`` naming the first that is not an XML tag name."""
    for tag in tags:
        if not _TAG_NAME.fullmatch(tag):
            raise ValueError(f"not an XML tag name: {tag[:60]!r}")
    return tags
