"""How the console reads what a browser sends: numbers and text, one rule each.

Every number (path parts, query strings, form fields; the cookie's in
``lcm/tenants/console_sessions.py``) goes through :func:`lcm.int64.parse_int64`:
ASCII digits within 64 bits, so ``²``, U+0661, ``1_0``, ``+1`` or 30 digits are a
400 page rather than a 500 or a silently different id. Every text parameter is
``Text`` (no NUL, no lone surrogate), so nothing unstorable reaches a query.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

from fastapi import Path, Query
from pydantic import BeforeValidator
from pydantic_core import PydanticCustomError

from api.contract import Text
from lcm.errors import InvalidInput
from lcm.int64 import INT64_MAX, parse_int64

NUMBER_RULE = "must be ASCII digits (0-9) within 64 bits"


def _int64(value: object) -> object:
    if isinstance(value, str):
        parsed = parse_int64(value)
        if parsed is None:
            raise PydanticCustomError("invalid_number", NUMBER_RULE)
        return parsed
    return value


Int64 = Annotated[int, BeforeValidator(_int64)]
PageNumber = Annotated[Int64, Query(ge=1, le=1_000_000)]
ConversationId = Annotated[Int64, Path(ge=1, le=INT64_MAX)]
QueryText = Annotated[Text, Query(max_length=1000)]


def number(raw: object, name: str) -> int:
    """A form field or query value as an int64; ``InvalidInput`` otherwise."""
    parsed = parse_int64(raw) if isinstance(raw, str) else None
    if parsed is None:
        raise InvalidInput(f"{name} {NUMBER_RULE}")
    return parsed


def level_pages(query: Mapping[str, str]) -> dict[int, int]:
    """``?level3=1``: the DAG page shown per depth; any other ``level…`` parameter is a 400."""
    pages = {}
    for name, value in query.items():
        if name.startswith("level"):
            pages[number(name[5:], "the depth of a level parameter")] = number(value, name)
    return pages
