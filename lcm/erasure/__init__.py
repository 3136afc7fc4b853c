"""Erasing data: conversations, session families, tenants, and retention.

``service``: the erases, one transaction each, stored file contents removed
after commit. ``retention``: beat's sweep of conversations idle longer than a
tenant's ``retention_days``. ``junk``: ``lcm doctor-clean``'s cron, heartbeat
and subagent conversations (its SQL in ``junk_repository``). ``repository``: all their SQL.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lcm.exports import lazy_exports

if TYPE_CHECKING:
    from lcm.erasure.junk import (
        DEFAULT_JUNK_PATTERNS,
        CleanOutcome,
        JunkConversation,
        JunkCriteria,
        clean_junk,
        find_junk,
    )
    from lcm.erasure.retention import sweep_retention
    from lcm.erasure.service import (
        Erased,
        erase_conversation,
        erase_family,
        erase_in_family,
        erase_own_tenant,
        erase_tenant,
        erase_tenant_named,
        erase_then_release,
        remove_released_blobs,
    )

__all__ = [
    "DEFAULT_JUNK_PATTERNS",
    "CleanOutcome",
    "Erased",
    "JunkConversation",
    "JunkCriteria",
    "clean_junk",
    "erase_conversation",
    "erase_family",
    "erase_in_family",
    "erase_own_tenant",
    "erase_tenant",
    "erase_tenant_named",
    "erase_then_release",
    "find_junk",
    "remove_released_blobs",
    "sweep_retention",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "lcm.erasure.junk": (
            "DEFAULT_JUNK_PATTERNS",
            "CleanOutcome",
            "JunkConversation",
            "JunkCriteria",
            "clean_junk",
            "find_junk",
        ),
        "lcm.erasure.retention": ("sweep_retention",),
        "lcm.erasure.service": (
            "Erased",
            "erase_conversation",
            "erase_family",
            "erase_in_family",
            "erase_own_tenant",
            "erase_tenant",
            "erase_tenant_named",
            "erase_then_release",
            "remove_released_blobs",
        ),
    },
)
