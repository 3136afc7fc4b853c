"""What the databases can store faithfully: the one rule for client text and JSON.

Every string a client sends (message text, block fields, ids, session keys,
settings, search patterns) is refused if it holds a NUL character (Postgres
``text`` and ``jsonb`` reject it) or a lone UTF-16 surrogate (not encodable as
UTF-8, so it could be stored only altered). Refusing keeps the promise that what
is stored is exactly what was sent, and that everything stored can be served
back. Nested JSON is bounded in depth so that no recursive walk over it (ours,
the JSON encoder's, a summarizer's) can run out of stack.
"""

from __future__ import annotations

import re
from typing import Any

from lcm.errors import InvalidInput

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")

# Deeper than any real message (a tool result holding blocks holding text is
# about six levels) and far below Python's recursion limit.
MAX_JSON_DEPTH = 64


def unstorable_text(value: str) -> str | None:
    """Why ``value`` cannot be stored faithfully, or None when it can."""
    bad = _UNSTORABLE.search(value)
    if bad is None:
        return None
    what = "a NUL character" if bad.group() == "\x00" else "a lone UTF-16 surrogate"
    return f"contains {what} at offset {bad.start()}"


def find_unstorable(value: Any, where: str) -> str | None:
    """The first string inside ``value`` (keys included) that cannot be stored, as a message."""
    stack: list[tuple[Any, str]] = [(value, where)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            problem = unstorable_text(item)
            if problem:
                return f"{path} {problem}; it cannot be stored faithfully"
        elif isinstance(item, dict):
            for key, inner in reversed(item.items()):
                if isinstance(key, str) and unstorable_text(key):
                    return f"{path} has a key that {unstorable_text(key)}"
                stack.append((inner, f"{path}.{key}"))
        elif isinstance(item, list):
            stack.extend((inner, f"{path}[{i}]") for i, inner in reversed(list(enumerate(item))))
    return None


def json_depth(value: Any) -> int:
    """Nesting depth of lists and objects in ``value`` (a scalar is 0), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            stack.extend((inner, depth + 1) for inner in item.values())
            deepest = max(deepest, depth + 1)
        elif isinstance(item, list):
            stack.extend((inner, depth + 1) for inner in item)
            deepest = max(deepest, depth + 1)
    return deepest


def too_deep(value: Any, where: str, limit: int = MAX_JSON_DEPTH) -> str | None:
    """A message when ``value`` nests deeper than ``limit``, else None."""
    if json_depth(value) > limit:
        return f"{where} nests lists and objects deeper than {limit} levels"
    return None


def check_storable(value: Any, where: str) -> None:
    """Refuse NUL characters and lone surrogates anywhere inside ``value``, and deep nesting."""
    deep = too_deep(value, where)
    if deep:
        raise InvalidInput(deep, code="too_deep")
    problem = find_unstorable(value, where)
    if problem:
        raise InvalidInput(
            f"{problem} (send the text escaped or base64-encoded)", code="invalid_text"
        )
