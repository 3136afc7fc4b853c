"""How a time is written wherever the model or a caller reads one."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from lcm.timezones import DEFAULT_TIMEZONE

__all__ = ["format_timestamp"]


def format_timestamp(value: datetime, timezone: str = DEFAULT_TIMEZONE) -> str:
    """ISO-8601 in ``timezone`` (an IANA name); a naive value is taken as UTC.

    UTC is written with a ``Z`` suffix, any other zone with its offset at
    that instant (``2026-07-01T14:00:00+02:00``), so the text is unambiguous.
    """
    aware = value.replace(tzinfo=UTC) if value.tzinfo is None else value
    local = aware.astimezone(UTC if timezone == DEFAULT_TIMEZONE else ZoneInfo(timezone))
    return local.isoformat().replace("+00:00", "Z")
