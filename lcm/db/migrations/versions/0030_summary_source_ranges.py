"""summaries.source_message_count/source_first_seq/source_last_seq: each summary's source range

describe reports the raw messages a summary covers, through every level
below it: how many, the first and the last seq. It walked the summary's
subtree to find them, so describing the top summary of a long
conversation read every summary and message link below it (~125,000
messages at 1M). The range is now stored with the summary: a leaf's from
its messages, a condensed summary's the union of its parents'.

The backfill runs bottom-up by depth (a summary's parents are shallower
than it), each depth in batches of conversations, in SQL on both
databases. A summary with parents takes the union of theirs; one without
takes its linked messages (the describe walk's leaves are exactly the
summaries without parents). A count of NULL means "not known" (describe
walks again); after this migration every row has one.

Revision ID: 0030_summary_source_ranges
Revises: 0029_context_appends
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0030_summary_source_ranges"
down_revision = "0029_context_appends"
branch_labels = None
depends_on = None

BATCH_CONVERSATIONS = 500

_HAS_PARENTS = "EXISTS (SELECT 1 FROM summary_parents sp WHERE sp.summary_id = summaries.id)"
_PARENTS = (
    "FROM summary_parents sp JOIN summaries p ON p.id = sp.parent_id "
    "WHERE sp.summary_id = summaries.id"
)
_MESSAGES = (
    "FROM summary_messages sm JOIN messages m ON m.id = sm.message_id "
    "WHERE sm.summary_id = summaries.id"
)
# A parent without a count leaves its child's unknown (no such parent after
# a bottom-up pass; the same rule as lcm/compaction/source_ranges.py).
_BACKFILL = f"""
UPDATE summaries SET
    source_message_count = CASE WHEN {_HAS_PARENTS}
        THEN (SELECT CASE WHEN count(*) = count(p.source_message_count)
                THEN coalesce(sum(p.source_message_count), 0) END {_PARENTS})
        ELSE (SELECT count(*) {_MESSAGES}) END,
    source_first_seq = CASE WHEN {_HAS_PARENTS}
        THEN (SELECT min(p.source_first_seq) {_PARENTS})
        ELSE (SELECT min(m.seq) {_MESSAGES}) END,
    source_last_seq = CASE WHEN {_HAS_PARENTS}
        THEN (SELECT max(p.source_last_seq) {_PARENTS})
        ELSE (SELECT max(m.seq) {_MESSAGES}) END
WHERE depth = :depth AND conversation_id IN :conversations
"""


def upgrade() -> None:
    # Plain ADD COLUMNs on both databases: a batch rebuild of ``summaries``
    # on SQLite would drop the search triggers of migration 0002.
    op.add_column("summaries", sa.Column("source_message_count", sa.Integer(), nullable=True))
    op.add_column("summaries", sa.Column("source_first_seq", sa.BigInteger(), nullable=True))
    op.add_column("summaries", sa.Column("source_last_seq", sa.BigInteger(), nullable=True))
    backfill(op.get_bind())


def backfill(conn: sa.Connection) -> None:
    """Every summary's range, shallowest depth first, ``BATCH_CONVERSATIONS`` at a time."""
    statement = sa.text(_BACKFILL).bindparams(sa.bindparam("conversations", expanding=True))
    depths = conn.execute(sa.text("SELECT DISTINCT depth FROM summaries ORDER BY depth"))
    for depth in [int(d) for (d,) in depths]:
        conversations = [
            int(c)
            for (c,) in conn.execute(
                sa.text(
                    "SELECT DISTINCT conversation_id FROM summaries WHERE depth = :depth "
                    "ORDER BY conversation_id"
                ),
                {"depth": depth},
            )
        ]
        for start in range(0, len(conversations), BATCH_CONVERSATIONS):
            batch = conversations[start : start + BATCH_CONVERSATIONS]
            conn.execute(statement, {"depth": depth, "conversations": batch})


def downgrade() -> None:
    # Plain DROP COLUMNs (SQLite 3.35+), for the same reason as above.
    op.execute("ALTER TABLE summaries DROP COLUMN source_last_seq")
    op.execute("ALTER TABLE summaries DROP COLUMN source_first_seq")
    op.execute("ALTER TABLE summaries DROP COLUMN source_message_count")
