"""The write path: validate what a gateway sends and store it, exactly once."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lcm.exports import lazy_exports

if TYPE_CHECKING:
    from lcm.ingest.repository import MessageRepository
    from lcm.ingest.service import ReplayFloodLimits, ingest_messages, prepare_batch
    from lcm.ingest.turns import LivePrompt, TurnResult, after_turn, record_turn, store_messages

__all__ = [
    "LivePrompt",
    "MessageRepository",
    "ReplayFloodLimits",
    "TurnResult",
    "after_turn",
    "ingest_messages",
    "prepare_batch",
    "record_turn",
    "store_messages",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "lcm.ingest.repository": ("MessageRepository",),
        "lcm.ingest.service": ("ReplayFloodLimits", "ingest_messages", "prepare_batch"),
        "lcm.ingest.turns": (
            "LivePrompt",
            "TurnResult",
            "after_turn",
            "record_turn",
            "store_messages",
        ),
    },
)
