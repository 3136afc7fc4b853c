"""llm_usage.provider: which provider answered each LLM call

Summaries, large-file summaries and expand-query may each run on another
provider (Anthropic, an OpenAI-compatible server), so usage is reported by
purpose and provider as well as by model. Earlier rows were all Anthropic's,
except the offline extractive summarizer's, which are marked ``offline``.

Revision ID: 0022_llm_usage_provider
Revises: 0021_summary_surgery
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022_llm_usage_provider"
down_revision = "0021_summary_surgery"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("llm_usage") as batch:
        batch.add_column(
            sa.Column("provider", sa.String(length=32), nullable=False, server_default="")
        )
    op.execute("UPDATE llm_usage SET provider = 'anthropic' WHERE model <> 'extractive'")
    op.execute("UPDATE llm_usage SET provider = 'offline' WHERE model = 'extractive'")
    # The default only filled the rows already there: the compaction pass's
    # one statement writes every column, and the model declares no server default.
    with op.batch_alter_table("llm_usage") as batch:
        batch.alter_column("provider", server_default=None)


def downgrade() -> None:
    with op.batch_alter_table("llm_usage") as batch:
        batch.drop_column("provider")
