"""How a time is written wherever the model or a caller reads one."""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["format_timestamp"]


def format_timestamp(value: datetime) -> str:
    """ISO-8601 in UTC with a ``Z`` suffix; a naive value is taken as UTC."""
    aware = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    return aware.isoformat().replace("+00:00", "Z")
