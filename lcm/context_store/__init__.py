"""The one read of a conversation's context, shared by compaction, assembly,
retrieval, the doctor and transfer, so a message reads back exactly as it was
sent whoever asks. The views it returns are in the ground module ``lcm.context``.
"""

from lcm.context_store.repository import (
    load_context,
    load_message_views,
    load_parts,
    summary_view,
    window_entries,
)

__all__ = ["load_context", "load_message_views", "load_parts", "summary_view", "window_entries"]
