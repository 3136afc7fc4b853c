"""How the recall cue fuses its identifier snippets with those recalled by meaning."""

from __future__ import annotations

from lcm.assembly import RecalledSnippet
from lcm.retrieval.prompt_cue import fuse_snippets


def named(message_id: int, name: str = "ORBIT_PORT") -> RecalledSnippet:
    return RecalledSnippet(message_id, message_id, "assistant", name, f"named {message_id}")


def near(message_id: int, similarity: float = 0.6) -> RecalledSnippet:
    return RecalledSnippet(message_id, message_id, "user", "", f"near {message_id}", similarity)


def test_ranks_interleave_the_identifier_first_on_a_tie() -> None:
    fused = fuse_snippets([named(1), named(2)], [near(3), near(4)], 4)
    assert [s.message_id for s in fused] == [1, 3, 2, 4]


def test_a_message_both_find_shows_once_with_its_identifier_sentence_first() -> None:
    fused = fuse_snippets([named(1), named(2)], [near(2), near(3)], 4)
    assert [(s.message_id, s.identifier) for s in fused] == [
        (2, "ORBIT_PORT"),
        (1, "ORBIT_PORT"),
        (3, ""),
    ]


def test_the_limit_holds_and_either_side_alone_is_kept_in_order() -> None:
    assert [s.message_id for s in fuse_snippets([], [near(5), near(6), near(7)], 2)] == [5, 6]
    assert [s.message_id for s in fuse_snippets([named(8), named(9)], [], 4)] == [8, 9]
