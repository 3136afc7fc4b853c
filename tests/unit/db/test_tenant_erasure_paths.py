"""Erasing a tenant finds each of its rows through an index, in every table.

``ErasureRepository.delete_tenant`` deletes by ``tenant_id`` wherever an
index leads with it, and deletes the rows of ``OWNED_THROUGH`` tables by
their parents' ids. A table that is neither would be read whole, every
tenant's rows, on each tenant's erasure; so would a table with a foreign
key to ``tenants`` and no such index, when the tenant row goes. These
checks read the models' metadata, the schema the migrations must match
(``tests/integration/test_migrations.py``).
"""

from __future__ import annotations

from sqlalchemy import PrimaryKeyConstraint, Table, UniqueConstraint

from lcm.db.models import Base
from lcm.erasure.repository import OWNED_THROUGH


def _leading_columns(table: Table) -> set[str]:
    """The first column of each of the table's indexes, unique constraints and primary key."""
    keys = [list(index.columns) for index in table.indexes]
    keys += [
        list(c.columns)
        for c in table.constraints
        if isinstance(c, PrimaryKeyConstraint | UniqueConstraint)
    ]
    return {columns[0].name for columns in keys if columns}


def _tenant_tables() -> list[Table]:
    return [t for t in Base.metadata.sorted_tables if "tenant_id" in t.c]


OWNED = {column.table.name for column, _, _ in OWNED_THROUGH}


def test_every_tenant_table_is_erased_through_an_index() -> None:
    unreached = [
        t.name
        for t in _tenant_tables()
        if "tenant_id" not in _leading_columns(t) and t.name not in OWNED
    ]
    assert unreached == [], "add an index leading with tenant_id, or an OWNED_THROUGH entry"


def test_owned_tables_are_reached_from_an_indexed_parent() -> None:
    for column, parent_id, parent_tenant in OWNED_THROUGH:
        assert column.table.name in {t.name for t in _tenant_tables()}
        # The parents are found by tenant, then the rows by their parent.
        assert "tenant_id" in _leading_columns(parent_tenant.table), parent_tenant.table.name
        assert column.key in _leading_columns(column.table), column.table.name
        # The column names the parent's id (a foreign key, or by design for links).
        assert parent_id.key == "id"
        assert column.table.name != parent_tenant.table.name


def test_owned_tables_have_no_index_and_no_key_on_tenant_id() -> None:
    for name in OWNED:
        table = Base.metadata.tables[name]
        assert "tenant_id" not in _leading_columns(table), name
        assert not table.c.tenant_id.foreign_keys, name


def test_no_unindexed_foreign_key_to_tenants() -> None:
    # Deleting a tenant row makes Postgres look up each table that references
    # it: without an index leading with the column, that is a whole-table scan.
    for table in _tenant_tables():
        for fk in table.foreign_keys:
            if fk.column.table.name == "tenants":
                assert fk.parent.name in _leading_columns(table), table.name
