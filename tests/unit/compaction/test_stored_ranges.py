"""A summary's stored source range as a pass computes it (``lcm.compaction.source``)."""

from __future__ import annotations

from lcm.compaction.source import leaf_range, union_ranges


def test_a_leaf_covers_its_messages() -> None:
    assert leaf_range([4, 5, 7]) == (3, 4, 7)


def test_a_condensed_summary_covers_the_union_of_its_parents() -> None:
    assert union_ranges([(3, 1, 3), (0, None, None), (2, 7, 8)]) == (5, 1, 8)


def test_a_parent_without_a_range_leaves_the_union_unknown() -> None:
    """Written by a server older than migration 0030: describe walks, the doctor repairs."""
    assert union_ranges([(3, 1, 3), (None, None, None)]) == (None, None, None)
