"""What is embedded for a message or a summary: the text, cut into chunks the model reads whole.

A message with words (:data:`lcm.semantic.repository.SPOKEN`) is embedded as
``"role: text"``, so a question about what the user said leans to the user's
turns. The model reads at most 256 word pieces (about 1,000 characters of
English); a longer text is cut into chunks of :data:`CHUNK_CHARS` on word
boundaries, each embedded apart, and a search scores a text by its best chunk.
Past :data:`MAX_CHUNKS` chunks the rest is not embedded (full text still finds
it): a 2 MB paste would otherwise cost minutes of CPU for vectors that say "a
log file".
"""

from __future__ import annotations

CHUNK_CHARS = 1_000
MAX_CHUNKS = 16


def message_text(role: str, content: str) -> str:
    return f"{role}: {content}"


def chunks(text: str, *, size: int = CHUNK_CHARS, limit: int = MAX_CHUNKS) -> list[str]:
    """``text`` in pieces of at most ``size`` characters, cut at whitespace where possible."""
    text = " ".join(text.split())
    if not text:
        return [""]
    out: list[str] = []
    start = 0
    while start < len(text) and len(out) < limit:
        end = min(start + size, len(text))
        if end < len(text):
            space = text.rfind(" ", start + size // 2, end)
            end = space if space > start else end
        out.append(text[start:end].strip())
        start = end
    return out
