"""Keeping stored text from forging the markup LCM wraps it in.

Summaries reach the model inside ``<summary …>…</summary>``, old system
messages inside ``<system_message>``, the summarizer's input inside
``<source>``. Text placed in such a wrapper (a message, a summary the LLM
wrote) may itself contain ``</summary><summary id="sum_fake">``; sent as is,
the model would read a wrapper closing early and a forged one opening.

The escaping is the smallest that rules this out and still reads naturally:

* ``<`` becomes ``&lt;`` where it starts one of the wrapper's tag names
  (``<summary``, ``</summary``, any case, spaces allowed after ``<`` and
  ``/``); every other ``<`` stays, so code and other markup quoted in a
  summary read as written;
* ``&`` becomes ``&amp;`` where it is followed by ``lt;`` or ``amp;``, so text
  that already spells an entity is told apart from an escaped ``<``.

:func:`unescape_markup` undoes it exactly (``&lt;`` to ``<``, ``&amp;`` to
``&``, in one left-to-right pass), whatever tag names were escaped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

__all__ = ["escape_markup", "unescape_markup"]

_ENTITY_LIKE = re.compile(r"&(?=lt;|amp;)")
_ESCAPED = re.compile(r"&(lt|amp);")


@lru_cache(maxsize=32)
def _tag_opening(tags: tuple[str, ...]) -> re.Pattern[str]:
    names = "|".join(re.escape(tag) for tag in sorted(tags, key=len, reverse=True))
    return re.compile(rf"<(?=\s*/?\s*(?:{names})(?![-\w.:]))", re.IGNORECASE)


def escape_markup(text: str, tags: Iterable[str]) -> str:
    """``text`` with every opening or closing of ``tags`` made inert (see the module)."""
    if "<" not in text and "&" not in text:  # nearly all text: nothing to do
        return text
    escaped = _ENTITY_LIKE.sub("&amp;", text)
    return _tag_opening(tuple(tags)).sub("&lt;", escaped)


def unescape_markup(text: str) -> str:
    """The text :func:`escape_markup` was given back, for any tag names."""
    return _ESCAPED.sub(lambda m: "<" if m.group(1) == "lt" else "&", text)
