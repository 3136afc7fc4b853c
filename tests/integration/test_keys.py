"""API keys in the domain: scopes of old keys, concurrent rotation, scope validation."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from sqlalchemy import create_engine, select, text

from lcm.db.engine import Database, normalize_url
from lcm.db.migrate import upgrade
from lcm.db.models import ApiKey
from lcm.errors import Conflict, Forbidden, InvalidInput, LcmError
from lcm.tenants.keys import (
    DEFAULT_SCOPES,
    IssuedKey,
    authenticate,
    checked_scopes,
    create_key,
    hash_key,
    rotate_key,
)
from tests.conftest import new_tenant, settings_for


def test_keys_from_before_scopes_keep_every_scope(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    upgrade(url, "0003")
    engine = create_engine(normalize_url(url))
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO tenants (id, name, settings_overrides, created_at) "
                "VALUES ('ten_old', 'old', '{}', CURRENT_TIMESTAMP)"
            )
        )
        conn.execute(
            text(
                "INSERT INTO api_keys (tenant_id, key_hash, prefix, name, created_at) "
                "VALUES ('ten_old', :hash, 'lcm_old', 'default', CURRENT_TIMESTAMP)"
            ),
            {"hash": hash_key("lcm_old-key")},
        )
    engine.dispose()
    upgrade(url)
    database = Database(settings_for(url))
    try:
        with database.read_session() as session:
            principal = authenticate(session, "lcm_old-key")
        assert principal.tenant_id == "ten_old"
        assert principal.scopes == set(DEFAULT_SCOPES)  # every scope but secrets
        for scope in DEFAULT_SCOPES:
            principal.require(scope)
        with pytest.raises(Forbidden):
            principal.require("secrets")
    finally:
        database.dispose()


def test_concurrent_rotations_of_one_key_make_one_new_key(db: Database) -> None:
    tenant = new_tenant(db)
    outcome: dict[str, IssuedKey | LcmError] = {}

    def rotate_again() -> None:
        with db.session() as session:
            try:
                outcome["second"] = rotate_key(session, tenant.tenant_id, tenant.key.id)
                session.commit()
            except LcmError as exc:
                outcome["second"] = exc

    with db.session() as first:
        winner = rotate_key(first, tenant.tenant_id, tenant.key.id)
        second = threading.Thread(target=rotate_again)
        second.start()
        second.join(0.5)
        # Blocked on the first rotation's row lock (Postgres) or write lock (SQLite).
        assert second.is_alive()
        first.commit()
    second.join(10)
    assert isinstance(outcome["second"], Conflict), outcome
    with db.read_session() as session:
        active = session.scalars(select(ApiKey.id).where(ApiKey.revoked_at.is_(None))).all()
        assert active == [winner.key.id]
        assert authenticate(session, winner.api_key).scopes == set(DEFAULT_SCOPES)


def test_scopes_are_checked_and_canonical() -> None:
    assert checked_scopes(["admin", "read", "read"]) == ("read", "admin")
    for bad in ([], ["write"], ["read", "Admin"]):
        with pytest.raises(InvalidInput):
            checked_scopes(bad)


def test_a_principal_without_the_scope_is_forbidden(db: Database) -> None:
    tenant = new_tenant(db)
    with db.session() as session:
        reader = create_key(session, tenant.tenant_id, "tools", ["read"])
        session.commit()
    with db.read_session() as session:
        principal = authenticate(session, reader.api_key)
    principal.require("read")
    with pytest.raises(Forbidden):
        principal.require("ingest")
