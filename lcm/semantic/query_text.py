"""What the dense side of a grep embeds of the query (pure; unit-tested without a database).

A question about a conversation usually names a speaker ("what did Alice say
about the deploy?"). Embedded whole, it lands near turns that *address* that
person rather than turns that say the thing asked about: measured on a
two-person chat benchmark, plain dense search and a plain fusion with full
text both scored below full text alone, and taking names and role words out
of the dense query (or dropping words found in more than 10% of the texts)
is what made the fusion beat full text. The tenant's
``semantic_query_handling`` picks what is taken out:

- ``raw``: nothing;
- ``strip_roles``: role words (user, assistant, ...) and capitalised names;
- ``strip_frequent``: words in more than :data:`FREQUENT_SHARE` of a sample
  of the tenant's recent messages (its own role words and names, mostly);
- ``both``: the two (the default).

A query left with no word keeps its original text. The full-text side of a
hybrid grep always reads the query as given.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable

from lcm.semantic_settings import QueryHandling

FREQUENT_SHARE = 0.10
MIN_SAMPLE = 50  # fewer texts than this say nothing about what is frequent
_WORD = re.compile(r"[\w'\u2019-]+")
ROLE_WORDS = frozenset(
    {"user", "users", "assistant", "assistants", "system", "tool", "bot", "agent", "human"}
)
# Capitalised words that begin a question or a sentence without being a name.
_SENTENCE_WORDS = frozenset(
    """a an and are as at be but by can could did do does for from had has have he her his
    how i if in is it its may me might my no not of on or our she should so that the their
    them then there these they this those to was we were what when where which who whom whose
    why will with would you your yes please tell find show remember recall""".split()  # noqa: SIM905
)


def dense_query(
    query: str, handling: QueryHandling, frequent_words: Callable[[], frozenset[str]]
) -> str:
    """``query`` as the dense side embeds it under ``handling``."""
    words = _WORD.findall(query)
    kept = list(words)
    if handling in ("strip_roles", "both"):
        kept = [w for w in kept if not _is_role_or_name(w)]
    if handling in ("strip_frequent", "both"):
        frequent = frequent_words()
        kept = [w for w in kept if _bare(w) not in frequent]
    return " ".join(kept) if kept else query


def _bare(word: str) -> str:
    lowered = word.lower().replace("\u2019", "'")
    return lowered[:-2] if lowered.endswith("'s") else lowered


def _is_role_or_name(word: str) -> bool:
    bare = _bare(word)
    if bare in ROLE_WORDS:
        return True
    # A capitalised word that is not a sentence word is taken for a name
    # (a person, a product): the dense side then looks for what was said.
    return word[:1].isupper() and bare not in _SENTENCE_WORDS and not word.isupper()


def frequent_words(texts: Iterable[str], share: float = FREQUENT_SHARE) -> frozenset[str]:
    """Words found in more than ``share`` of ``texts`` (document frequency)."""
    counts: Counter[str] = Counter()
    total = 0
    for text in texts:
        total += 1
        counts.update({_bare(w) for w in _WORD.findall(text)})
    if total < MIN_SAMPLE:
        return frozenset()
    return frozenset(word for word, n in counts.items() if n / total > share)
