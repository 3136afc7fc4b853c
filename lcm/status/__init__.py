"""A conversation's compaction status: what it holds (conversations, ingest)
against what it owes (compaction), so it sits above all three.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lcm.exports import lazy_exports

if TYPE_CHECKING:
    from lcm.status.service import ConversationStatus, conversation_status

__all__ = ["ConversationStatus", "conversation_status"]

__getattr__ = lazy_exports(
    __name__, {"lcm.status.service": ("ConversationStatus", "conversation_status")}
)
