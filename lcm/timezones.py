"""The IANA time zone names a deployment or a tenant may write times in."""

from __future__ import annotations

from functools import lru_cache
from zoneinfo import available_timezones

__all__ = ["DEFAULT_TIMEZONE", "is_timezone"]

DEFAULT_TIMEZONE = "UTC"


@lru_cache(maxsize=1)
def _known_zones() -> frozenset[str]:
    # The zone database's names (the system's, else the tzdata package's);
    # read once: the scan walks the whole database. ``localtime`` names the
    # host's own zone, not one place: refused.
    return (frozenset(available_timezones()) | {DEFAULT_TIMEZONE}) - {"localtime"}


def is_timezone(name: str) -> bool:
    """True for an IANA zone name the zone database knows (``Europe/Paris``, ``UTC``)."""
    return name in _known_zones()
