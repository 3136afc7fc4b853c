"""Conversations and session families."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lcm.exports import lazy_exports

if TYPE_CHECKING:
    from lcm.conversations.carry_over_repository import CarryOverRepository
    from lcm.conversations.compact import CompactRequest, compact_on_request
    from lcm.conversations.dag_repository import DagRepository
    from lcm.conversations.dag_view import ConversationDag, DagNode, MessageRange, load_dag
    from lcm.conversations.host_cursor import read_host_cursor
    from lcm.conversations.listing import list_conversations
    from lcm.conversations.patterns import WriteSkip, compile_session_pattern, write_skip
    from lcm.conversations.repository import ConversationRepository
    from lcm.conversations.reset import new_session, reset_session
    from lcm.conversations.service import (
        conversation_in_family,
        get_conversation,
        resolve_for_read,
        resolve_for_write,
        target_for_assembly,
        target_for_read,
        target_for_write,
    )
    from lcm.conversations.session_keys import normalized_session_key, printable_session_key

__all__ = [
    "CarryOverRepository",
    "CompactRequest",
    "ConversationDag",
    "ConversationRepository",
    "DagNode",
    "DagRepository",
    "MessageRange",
    "WriteSkip",
    "compact_on_request",
    "compile_session_pattern",
    "conversation_in_family",
    "get_conversation",
    "list_conversations",
    "load_dag",
    "new_session",
    "normalized_session_key",
    "printable_session_key",
    "read_host_cursor",
    "reset_session",
    "resolve_for_read",
    "resolve_for_write",
    "target_for_assembly",
    "target_for_read",
    "target_for_write",
    "write_skip",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "lcm.conversations.carry_over_repository": ("CarryOverRepository",),
        "lcm.conversations.compact": ("CompactRequest", "compact_on_request"),
        "lcm.conversations.dag_repository": ("DagRepository",),
        "lcm.conversations.dag_view": ("ConversationDag", "DagNode", "MessageRange", "load_dag"),
        "lcm.conversations.host_cursor": ("read_host_cursor",),
        "lcm.conversations.listing": ("list_conversations",),
        "lcm.conversations.patterns": ("WriteSkip", "compile_session_pattern", "write_skip"),
        "lcm.conversations.repository": ("ConversationRepository",),
        "lcm.conversations.reset": ("new_session", "reset_session"),
        "lcm.conversations.service": (
            "conversation_in_family",
            "get_conversation",
            "resolve_for_read",
            "resolve_for_write",
            "target_for_assembly",
            "target_for_read",
            "target_for_write",
        ),
        "lcm.conversations.session_keys": ("normalized_session_key", "printable_session_key"),
    },
)
