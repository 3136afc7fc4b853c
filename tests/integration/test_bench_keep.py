"""``bench semantic --scale --keep DIR``: the private Postgres keeps its data in DIR
between runs, and a later run starts on it with the database migrated to head."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from bench.servers import kept_postgres
from lcm.db.migrate import current_revision, head_revision

pytestmark = pytest.mark.postgres


def _conninfo(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


def test_a_kept_data_directory_is_reused_and_migrated(tmp_path: Path) -> None:
    keep = tmp_path / "kept"
    with kept_postgres(keep) as url:
        assert current_revision(url) == head_revision()
        with psycopg.connect(_conninfo(url), autocommit=True) as conn:
            conn.execute("CREATE TABLE bench_kept (n int)")
            conn.execute("INSERT INTO bench_kept VALUES (40)")
            # As if seeded by an older tree: one migration behind head.
            conn.execute(
                "UPDATE alembic_version SET version_num = '0032_conversation_search_indexes'"
            )
            conn.execute("DROP INDEX ix_embeddings_tenant_model_target")
            conn.execute("CREATE INDEX ix_embeddings_tenant_model ON embeddings (tenant_id, model)")
    assert (keep / "pgdata" / "PG_VERSION").exists()  # stopped, not deleted
    with kept_postgres(keep) as url:
        assert current_revision(url) == head_revision()
        with psycopg.connect(_conninfo(url)) as conn:
            assert conn.execute("SELECT n FROM bench_kept").fetchall() == [(40,)]
            names = {
                r[0]
                for r in conn.execute(
                    "SELECT indexname FROM pg_indexes WHERE tablename = 'embeddings'"
                )
            }
    assert "ix_embeddings_tenant_model_target" in names
    assert "ix_embeddings_tenant_model" not in names
