"""SQLAlchemy 2 typed models for the whole data model of docs/design.md §2.

Every row carries ``tenant_id``. There are no ORM relationships: every load
is an explicit query in a repository, so no lazy N+1 query hides on the hot
path. Schema changes go through Alembic (``lcm/db/migrations``); these
classes are the source the migrations are written against. One module per
concept; everything is imported here, so ``Base.metadata`` always holds the
whole schema.
"""

from lcm.db.models.base import (
    NAMING_CONVENTION,
    Base,
    BigId,
    Json,
    UtcDateTime,
    utcnow,
)
from lcm.db.models.conversations import (
    ApiKey,
    Conversation,
    Tenant,
)
from lcm.db.models.history import (
    ContextItem,
    LargeFile,
    Message,
    MessagePart,
    Summary,
    SummaryMessage,
    SummaryParent,
)
from lcm.db.models.lifecycle import (
    ConversationFork,
    TurnCommit,
)
from lcm.db.models.secrets import SecretRead, SecretScanMark, SecretScanRun, SecretSpan
from lcm.db.models.semantic import Embedding, EmbeddingRun
from lcm.db.models.work import (
    CompactionDebt,
    CompactionRun,
    ExpansionGrant,
    ExpansionLease,
    HostUsage,
    LlmUsage,
    SummaryOperation,
    UsageCall,
)

__all__ = [
    "NAMING_CONVENTION",
    "ApiKey",
    "Base",
    "BigId",
    "CompactionDebt",
    "CompactionRun",
    "ContextItem",
    "Conversation",
    "ConversationFork",
    "Embedding",
    "EmbeddingRun",
    "ExpansionGrant",
    "ExpansionLease",
    "HostUsage",
    "Json",
    "LargeFile",
    "LlmUsage",
    "Message",
    "MessagePart",
    "SecretRead",
    "SecretScanMark",
    "SecretScanRun",
    "SecretSpan",
    "Summary",
    "SummaryMessage",
    "SummaryOperation",
    "SummaryParent",
    "Tenant",
    "TurnCommit",
    "UsageCall",
    "UtcDateTime",
    "utcnow",
]
