"""Where a gateway's write or read goes: one value instead of three arguments."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SessionAddress:
    """The tenant, the session key (a session family) and the session id within it.

    ``session_id`` ``None`` means the family's live conversation; a new one
    starts a new conversation (the live one is archived).
    """

    tenant_id: str
    session_key: str
    session_id: str | None = None


__all__ = ["SessionAddress"]
