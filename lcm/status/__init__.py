"""A conversation's compaction status: what it holds (conversations, ingest)
against what it owes (compaction), so it sits above all three. Also the
operator's read-only views: a conversation's messages and summaries, and the
database's figures.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lcm.exports import lazy_exports

if TYPE_CHECKING:
    from lcm.status.browse import (
        DatabaseStatus,
        MessageFilter,
        MessagePage,
        SummaryRow,
        conversation_summaries,
        database_status,
        message_page,
    )
    from lcm.status.service import ConversationStatus, conversation_status

__all__ = [
    "ConversationStatus",
    "DatabaseStatus",
    "MessageFilter",
    "MessagePage",
    "SummaryRow",
    "conversation_status",
    "conversation_summaries",
    "database_status",
    "message_page",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "lcm.status.browse": (
            "DatabaseStatus",
            "MessageFilter",
            "MessagePage",
            "SummaryRow",
            "conversation_summaries",
            "database_status",
            "message_page",
        ),
        "lcm.status.service": ("ConversationStatus", "conversation_status"),
    },
)
