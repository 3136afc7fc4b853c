"""A conversation's compaction status: what it holds (conversations, ingest)
against what it owes (compaction), so it sits above all three."""

from lcm.status.service import ConversationStatus, conversation_status

__all__ = ["ConversationStatus", "conversation_status"]
