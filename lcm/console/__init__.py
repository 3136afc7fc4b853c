"""The operator console's reads and layouts (rendered by api/console)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lcm.exports import lazy_exports

if TYPE_CHECKING:
    from lcm.console.actions import (
        operate_on_summary,
        owe_manual_compaction,
        retry_conversation,
    )
    from lcm.console.dag_layout import lay_out
    from lcm.console.repository import ConsoleRepository
    from lcm.console.views import (
        PAGE_SIZE,
        context_window,
        conversation_of,
        conversation_table,
        leaf_sources,
        live_debts,
        message_page,
        run_timeline,
    )

__all__ = [
    "PAGE_SIZE",
    "ConsoleRepository",
    "context_window",
    "conversation_of",
    "conversation_table",
    "lay_out",
    "leaf_sources",
    "live_debts",
    "message_page",
    "operate_on_summary",
    "owe_manual_compaction",
    "retry_conversation",
    "run_timeline",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "lcm.console.actions": (
            "operate_on_summary",
            "owe_manual_compaction",
            "retry_conversation",
        ),
        "lcm.console.dag_layout": ("lay_out",),
        "lcm.console.repository": ("ConsoleRepository",),
        "lcm.console.views": (
            "PAGE_SIZE",
            "context_window",
            "conversation_of",
            "conversation_table",
            "leaf_sources",
            "live_debts",
            "message_page",
            "run_timeline",
        ),
    },
)
