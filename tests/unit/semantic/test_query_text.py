"""What the dense side embeds of a query, and how texts are cut into chunks (pure)."""

from __future__ import annotations

from lcm.semantic.query_text import MIN_SAMPLE, dense_query, frequent_words
from lcm.semantic.texts import CHUNK_CHARS, MAX_CHUNKS, chunks, message_text


def no_frequent() -> frozenset[str]:
    return frozenset()


def test_raw_keeps_the_query_as_given() -> None:
    query = "What did Alice tell the assistant about her car?"
    assert dense_query(query, "raw", no_frequent) == query


def test_strip_roles_takes_out_role_words_and_names() -> None:
    query = "What did Alice tell the assistant about Bob's car?"
    assert dense_query(query, "strip_roles", no_frequent) == "What did tell the about car"


def test_strip_frequent_takes_out_words_most_texts_hold() -> None:
    texts = [f"user: note {i} about lunch" for i in range(MIN_SAMPLE)] + ["user: the car died"]
    frequent = frequent_words(texts)
    assert {"user", "note", "about", "lunch"} <= frequent
    assert "car" not in frequent
    assert dense_query("user note about the car", "strip_frequent", lambda: frequent) == "the car"


def test_both_strips_roles_and_frequent_words() -> None:
    frequent = frozenset({"said"})
    assert (
        dense_query("what Carol said about taxes", "both", lambda: frequent) == "what about taxes"
    )


def test_a_query_left_with_no_word_is_embedded_as_given() -> None:
    assert dense_query("Alice", "strip_roles", no_frequent) == "Alice"


def test_too_few_texts_name_no_frequent_word() -> None:
    assert frequent_words(["user: hi"] * (MIN_SAMPLE - 1)) == frozenset()


def test_a_long_text_is_cut_at_spaces_into_at_most_max_chunks() -> None:
    text = " ".join(f"word{i}" for i in range(10_000))
    pieces = chunks(text)
    assert len(pieces) == MAX_CHUNKS
    assert all(0 < len(p) <= CHUNK_CHARS for p in pieces)
    assert all(not p.startswith(" ") and not p.endswith(" ") for p in pieces)
    assert " ".join(pieces) == text[: len(" ".join(pieces))]
    assert chunks("") == [""]
    assert message_text("user", "hi") == "user: hi"
