"""Persistence: models, engines, migrations."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lcm.exports import lazy_exports

if TYPE_CHECKING:
    from lcm.db.busy import is_busy
    from lcm.db.driver import DriverStatement
    from lcm.db.engine import Database, Transaction
    from lcm.db.migrate import current_revision, head_revision, upgrade
    from lcm.db.models import (
        ApiKey,
        Base,
        CompactionDebt,
        CompactionRun,
        ContextItem,
        Conversation,
        ConversationFork,
        ExpansionGrant,
        ExpansionLease,
        HostUsage,
        LargeFile,
        LlmUsage,
        Message,
        MessagePart,
        SecretSpan,
        Summary,
        SummaryMessage,
        SummaryOperation,
        SummaryParent,
        Tenant,
        TurnCommit,
        UtcDateTime,
        utcnow,
    )

__all__ = [
    "ApiKey",
    "Base",
    "CompactionDebt",
    "CompactionRun",
    "ContextItem",
    "Conversation",
    "ConversationFork",
    "Database",
    "DriverStatement",
    "ExpansionGrant",
    "ExpansionLease",
    "HostUsage",
    "LargeFile",
    "LlmUsage",
    "Message",
    "MessagePart",
    "SecretSpan",
    "Summary",
    "SummaryMessage",
    "SummaryOperation",
    "SummaryParent",
    "Tenant",
    "Transaction",
    "TurnCommit",
    "UtcDateTime",
    "current_revision",
    "head_revision",
    "is_busy",
    "upgrade",
    "utcnow",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "lcm.db.busy": ("is_busy",),
        "lcm.db.driver": ("DriverStatement",),
        "lcm.db.engine": ("Database", "Transaction"),
        "lcm.db.migrate": ("current_revision", "head_revision", "upgrade"),
        "lcm.db.models": (
            "ApiKey",
            "Base",
            "CompactionDebt",
            "CompactionRun",
            "ContextItem",
            "Conversation",
            "ConversationFork",
            "ExpansionGrant",
            "ExpansionLease",
            "HostUsage",
            "LargeFile",
            "LlmUsage",
            "Message",
            "MessagePart",
            "SecretSpan",
            "Summary",
            "SummaryMessage",
            "SummaryOperation",
            "SummaryParent",
            "Tenant",
            "TurnCommit",
            "UtcDateTime",
            "utcnow",
        ),
    },
)
