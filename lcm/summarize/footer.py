"""The "Expand for details about:" footer every summary ends with.

The footer tells the agent what the summary compressed away, so it knows what
is worth an ``expand`` call. Models usually write it when asked; when one does
not, the summarizer derives a footer from the source deterministically.
"""

from __future__ import annotations

from lcm.summarize.entities import find_names, find_paths, frequent_words, unique
from lcm.tokens import estimate_tokens

FOOTER_PREFIX = "Expand for details about:"
MAX_TOPICS = 6
_MAX_TOPIC_CHARS = 48
_NO_TOPICS = "this span"


def has_footer(text: str) -> bool:
    """Whether the last non-blank line of ``text`` is a footer with at least one topic."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines or not lines[-1].startswith(FOOTER_PREFIX):
        return False
    return bool(lines[-1][len(FOOTER_PREFIX) :].strip(" ,."))


def footer_topics_in(text: str) -> list[str]:
    """Topics listed by footers already inside ``text`` (child summaries of a condensed node)."""
    topics: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(FOOTER_PREFIX):
            rest = stripped[len(FOOTER_PREFIX) :]
            topics.extend(topic.strip(" .") for topic in rest.split(","))
    return unique(topics)


def derive_topics(source_text: str, limit: int = MAX_TOPICS) -> list[str]:
    """Topics for a footer, derived from the source alone (same source, same topics).

    Earlier footers come first because they already name what lower summaries
    compressed; then file paths, names and frequent words fill the list.
    """
    candidates = [
        *footer_topics_in(source_text),
        *find_paths(source_text),
        *find_names(source_text),
        *frequent_words(source_text, limit),
    ]
    topics: list[str] = []
    seen: set[str] = set()
    for candidate in candidates:
        topic = candidate.strip()[:_MAX_TOPIC_CHARS]
        if topic and topic.lower() not in seen:
            seen.add(topic.lower())
            topics.append(topic)
        if len(topics) == limit:
            break
    return topics


def footer_line(topics: list[str], max_tokens: int | None = None) -> str:
    """The footer for ``topics``, dropping trailing topics until it fits ``max_tokens``."""
    kept = list(topics)
    while True:
        line = f"{FOOTER_PREFIX} {', '.join(kept) if kept else _NO_TOPICS}"
        if max_tokens is None or not kept or estimate_tokens(line) <= max_tokens:
            return line
        kept.pop()


def ensure_footer(summary: str, source_text: str) -> str:
    """``summary`` ending with a footer: the model's own if present, else one derived."""
    text = summary.rstrip()
    if has_footer(text):
        return text
    line = footer_line(derive_topics(source_text))
    return f"{text}\n\n{line}" if text else line
