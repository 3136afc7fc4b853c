"""The declarative base, column types and conventions every model shares."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    JSON,
    BigInteger,
    DateTime,
    ForeignKey,
    Integer,
    MetaData,
    String,
    TypeDecorator,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_N_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# SQLite only auto-increments INTEGER PRIMARY KEY; Postgres gets a real bigint.
BigId = BigInteger().with_variant(Integer(), "sqlite")
Json = JSON().with_variant(JSONB(), "postgresql")


def utcnow() -> datetime:
    return datetime.now(UTC)


class UtcDateTime(TypeDecorator[datetime]):
    """A timestamp that is always timezone-aware UTC in Python.

    SQLite has no time zone type and hands back naive values; Postgres stores
    ``timestamptz``. This makes both look the same to the domain.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


def tenant_fk(*, index: bool = True) -> Mapped[str]:
    """The owning tenant. Indexed unless a composite index of the table leads with it.

    Such an index serves everything a single-column one would (a tenant's
    rows, and the cascade when a tenant is deleted), and a second one would
    only cost an entry on every insert and every update that is not HOT.
    """
    return mapped_column(String(40), ForeignKey("tenants.id", ondelete="CASCADE"), index=index)


def owned_tenant() -> Mapped[str]:
    """The tenant of a row that belongs to it through a parent row: no foreign key, no index.

    The parent (a message, a conversation, a summary) names the same tenant
    and is written with the row, in the same statement or transaction. On
    these tables, which grow fastest, a foreign key to ``tenants`` would
    repeat that check on every row, and an index would cost an entry per
    row. The column stays: rows are distributed by it (docs/operations.md, "Past one Postgres").
    Erasing a tenant deletes these rows through their parents' indexed ids
    (``lcm/erasure/repository.py``), never by a scan for ``tenant_id``.
    """
    return mapped_column(String(40))


def conversation_fk() -> Mapped[int]:
    return mapped_column(BigId, ForeignKey("conversations.id", ondelete="CASCADE"))
