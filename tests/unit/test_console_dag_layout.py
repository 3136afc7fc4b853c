"""The console's DAG layout: rows by depth, ordered by history, long rows paged."""

from __future__ import annotations

from datetime import UTC, datetime

from lcm.console.dag_layout import lay_out
from lcm.conversations.dag_view import ContextRow, ConversationDag, DagNode, MessageRange

AT = datetime(2026, 1, 1, tzinfo=UTC)


def _dag(leaves: int, fanout: int) -> ConversationDag:
    nodes: dict[str, DagNode] = {}
    # Leaf ids sort against history (z…a) so the layout must order by seq, not id.
    leaf_ids = [f"sum_leaf_{chr(ord('z') - i % 26)}{i:03d}" for i in range(leaves)]
    for i, sid in enumerate(leaf_ids):
        nodes[sid] = DagNode(
            sid, "leaf", 0, 10, 0, AT, AT, (), MessageRange(i * 4 + 1, i * 4 + 4, 4, 40)
        )
    tops = []
    for n in range(0, leaves, fanout):
        sid = f"sum_top_{n:03d}"
        nodes[sid] = DagNode(
            sid, "condensed", 1, 20, fanout, AT, AT, tuple(leaf_ids[n : n + fanout]), None
        )
        tops.append(sid)
    return ConversationDag([ContextRow(t, None) for t in tops], nodes)


def test_rows_by_depth_ordered_by_history_with_fan_in_edges() -> None:
    picture = lay_out(_dag(8, 4), {})
    assert [level.depth for level in picture.levels] == [1, 0]
    leaves = sorted((n for n in picture.nodes if n.depth == 0), key=lambda n: n.x)
    assert [n.first_seq for n in leaves] == [1, 5, 9, 13, 17, 21, 25, 29]
    assert len(picture.edges) == 8  # every leaf hangs under its condensed summary
    top = next(n for n in picture.nodes if n.id == "sum_top_000")
    assert (top.fan_in, top.in_context) == (4, True)
    assert all(n.y < leaves[0].y for n in picture.nodes if n.depth == 1)


def test_a_long_row_is_paged_newest_first_and_edges_stay_inside_the_page() -> None:
    dag = _dag(100, 4)
    newest = lay_out(dag, {}, per_level=30)
    row = [n for n in newest.nodes if n.depth == 0]
    assert len(row) == 30
    assert max(n.last_seq or 0 for n in row) == 400  # page 0 holds the newest leaves
    leaf_level = next(level for level in newest.levels if level.depth == 0)
    assert (leaf_level.total, leaf_level.pages) == (100, 4)
    last = lay_out(dag, {0: 9}, per_level=30)  # past the end: the oldest page
    oldest = [n for n in last.nodes if n.depth == 0]
    assert min(n.first_seq or 0 for n in oldest) == 1
    assert len(oldest) == 10
    visible = {n.id for n in last.nodes}
    kept = {(round(e.x2), round(e.y2)) for e in last.edges}
    assert len(kept) == len(last.edges) <= len(visible)
    assert last.total_nodes == 125
