"""The one read of a conversation's context, shared by compaction, assembly,
retrieval, the doctor and transfer, so a message reads back exactly as it was
sent whoever asks. The views it returns are in the ground module ``lcm.context``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lcm.exports import lazy_exports

if TYPE_CHECKING:
    from lcm.context_store.repository import (
        load_context,
        load_message_views,
        load_parts,
        summary_view,
        window_entries,
    )

__all__ = ["load_context", "load_message_views", "load_parts", "summary_view", "window_entries"]

__getattr__ = lazy_exports(
    __name__,
    {
        "lcm.context_store.repository": (
            "load_context",
            "load_message_views",
            "load_parts",
            "summary_view",
            "window_entries",
        )
    },
)
