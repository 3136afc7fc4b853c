"""A SQLite writer passes the write gate on only once its transaction has ended."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

from lcm.db.sqlite_setup import configure_sqlite
from lcm.db.write_gate import WriteGate


class ProbingGate(WriteGate):
    """A gate that, each time it is released, tries to take SQLite's write lock at once."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self.lock_free_at_release: list[bool] = []

    def release(self) -> None:
        probe = sqlite3.connect(self.path, timeout=0, isolation_level=None)
        try:
            probe.execute("BEGIN IMMEDIATE")
            probe.execute("ROLLBACK")
            self.lock_free_at_release.append(True)
        except sqlite3.OperationalError:  # "database is locked": the writer still holds it
            self.lock_free_at_release.append(False)
        finally:
            probe.close()
        super().release()


def _engine(path: Path, gate: WriteGate) -> Engine:
    engine = create_engine(f"sqlite:///{path}", connect_args={"check_same_thread": False})
    configure_sqlite(engine, busy_timeout_ms=2000, cache_mb=0, gate=gate)
    return engine


def test_the_gate_passes_on_after_commit_and_rollback_not_before(tmp_path: Path) -> None:
    """Released before COMMIT, the next writer's BEGIN IMMEDIATE met the lock and slept."""
    path = tmp_path / "gate.db"
    gate = ProbingGate(path)
    engine = _engine(path, gate)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE t (n INTEGER)"))
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO t VALUES (1)"))
    conn = engine.connect()
    conn.begin()
    conn.execute(text("INSERT INTO t VALUES (2)"))
    conn.rollback()
    conn.close()
    assert gate.lock_free_at_release == [True, True, True]
    with engine.connect() as conn:
        assert conn.execute(text("SELECT n FROM t")).scalars().all() == [1]
    engine.dispose()


def test_a_failed_commit_rolls_back_raises_its_error_and_frees_the_gate(tmp_path: Path) -> None:
    """A deferred foreign key broken at COMMIT: IntegrityError, nothing kept, next writer in."""
    path = tmp_path / "gate.db"
    gate = WriteGate()
    engine = _engine(path, gate)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE parent (id INTEGER PRIMARY KEY)"))
        conn.execute(
            text(
                "CREATE TABLE child (parent_id INTEGER REFERENCES parent (id)"
                " DEFERRABLE INITIALLY DEFERRED)"
            )
        )
    with pytest.raises(IntegrityError), engine.begin() as conn:
        conn.execute(text("INSERT INTO child VALUES (7)"))
    # The gate is free at once (no writer holds it), and so is SQLite's lock.
    assert gate.acquire(0)
    gate.release()
    done = threading.Event()

    def writer() -> None:
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO parent VALUES (7)"))
            conn.execute(text("INSERT INTO child VALUES (7)"))
        done.set()

    thread = threading.Thread(target=writer)
    thread.start()
    thread.join(10)
    assert done.is_set()
    with engine.connect() as conn:
        assert conn.execute(text("SELECT parent_id FROM child")).scalars().all() == [7]
    engine.dispose()
