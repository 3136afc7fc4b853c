"""Laying the summary DAG out as a picture: one row per depth, deepest on top.

Plain geometry over :class:`~lcm.conversations.dag_view.ConversationDag`, no
drawing library. Nodes of a row are ordered by the history they cover (a
leaf by its first message, a condensed summary by its first source), so
edges mostly fan in without crossing. A row holds at most ``per_level``
nodes; longer rows are paged (page 0 is the newest nodes), which keeps a
page with thousands of summaries as light as one with ten.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from lcm.conversations.dag_view import ConversationDag, DagNode

PER_LEVEL = 60
SPACING = 26  # px between node centres at the widest row
ROW_HEIGHT = 90
MARGIN = 24
LABEL_WIDTH = 96  # the row labels left of the nodes


@dataclass(frozen=True, slots=True)
class PlacedNode:
    id: str
    kind: str
    depth: int
    x: float
    y: float
    token_count: int
    descendant_count: int
    fan_in: int
    earliest_at: datetime
    latest_at: datetime
    first_seq: int | None
    last_seq: int | None
    in_context: bool


@dataclass(frozen=True, slots=True)
class Edge:
    """A line from a summary (above) down to one of its sources."""

    x1: float
    y1: float
    x2: float
    y2: float


@dataclass(frozen=True, slots=True)
class Level:
    depth: int
    y: float
    total: int
    page: int  # 0 = the newest nodes
    pages: int


@dataclass(frozen=True, slots=True)
class DagPicture:
    width: float
    height: float
    nodes: list[PlacedNode]
    edges: list[Edge]
    levels: list[Level]
    total_nodes: int


def _order_keys(nodes: Mapping[str, DagNode]) -> dict[str, tuple[float, str]]:
    """Where each node sits in history: its first message seq, else its first source's."""
    keys: dict[str, tuple[float, str]] = {}
    for node in sorted(nodes.values(), key=lambda n: n.depth):
        if node.messages is not None:
            keys[node.id] = (float(node.messages.first_seq), node.id)
            continue
        below = [keys[s][0] for s in node.sources if s in keys]
        keys[node.id] = (min(below) if below else node.earliest_at.timestamp(), node.id)
    return keys


def lay_out(
    dag: ConversationDag, level_pages: Mapping[int, int], per_level: int = PER_LEVEL
) -> DagPicture:
    """Place the visible nodes of every depth row and the edges between visible nodes."""
    keys = _order_keys(dag.nodes)
    in_context = {row.summary_id for row in dag.context if row.summary_id}
    rows: dict[int, list[DagNode]] = {}
    for node in dag.nodes.values():
        rows.setdefault(node.depth, []).append(node)
    depths = sorted(rows, reverse=True)
    visible: dict[int, list[DagNode]] = {}
    levels: list[Level] = []
    for row_index, depth in enumerate(depths):
        ordered = sorted(rows[depth], key=lambda n: keys[n.id])
        pages = max(1, -(-len(ordered) // per_level))
        page = min(max(0, level_pages.get(depth, 0)), pages - 1)
        end = len(ordered) - page * per_level
        visible[depth] = ordered[max(0, end - per_level) : end]
        levels.append(Level(depth, MARGIN + row_index * ROW_HEIGHT, len(ordered), page, pages))
    widest = max((len(v) for v in visible.values()), default=1)
    width = 2 * MARGIN + LABEL_WIDTH + max(widest, 8) * SPACING
    placed: dict[str, PlacedNode] = {}
    for level in levels:
        row = visible[level.depth]
        step = (width - 2 * MARGIN - LABEL_WIDTH) / max(1, len(row))
        for i, node in enumerate(row):
            placed[node.id] = PlacedNode(
                node.id,
                node.kind,
                node.depth,
                round(MARGIN + LABEL_WIDTH + (i + 0.5) * step, 1),
                level.y,
                node.token_count,
                node.descendant_count,
                len(node.sources) if node.messages is None else node.messages.count,
                node.earliest_at,
                node.latest_at,
                node.messages.first_seq if node.messages else None,
                node.messages.last_seq if node.messages else None,
                node.id in in_context,
            )
    edges = [
        Edge(top.x, top.y, placed[source].x, placed[source].y)
        for top in placed.values()
        for source in dag.nodes[top.id].sources
        if source in placed
    ]
    height = 2 * MARGIN + max(0, len(levels) - 1) * ROW_HEIGHT
    return DagPicture(width, height, list(placed.values()), edges, levels, len(dag.nodes))
