"""embeddings: a message's vector only where the message has words (a text part)

Semantic recall embeds a message when it says something in words
(``lcm.semantic.repository.SPOKEN``): tool calls, tool output and reasoning
without a text part are left to the full-text side, which finds them by
their words. Vectors stored for such messages before that rule would keep
crowding the dense side; this removes them. A message with no parts at all
keeps its vector (nothing says what it was). The downgrade restores nothing:
an older release's next embedding job embeds those messages again.

Revision ID: 0034_spoken_message_vectors
Revises: 0033_embedding_scope_indexes
Create Date: 2026-11-29
"""

from __future__ import annotations

from alembic import op

revision = "0034_spoken_message_vectors"
down_revision = "0033_embedding_scope_indexes"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "DELETE FROM embeddings WHERE target = 'message' AND message_id IS NOT NULL "
        "AND EXISTS (SELECT 1 FROM message_parts p WHERE p.message_id = embeddings.message_id) "
        "AND NOT EXISTS (SELECT 1 FROM message_parts p WHERE p.message_id = embeddings.message_id "
        "AND p.part_type = 'text' AND p.text <> '')"
    )


def downgrade() -> None:
    pass  # the removed vectors are not rebuilt (see above)
