"""Histories for ``python -m bench growth``, generated inside Postgres.

Each statement is one ``INSERT … SELECT`` over ``generate_series``, so
millions of rows are written without a round trip per row: messages (with
their generated ``tsvector``), one text part each, context items, and for a
compacted conversation its summaries and links. Message text is drawn from
the grep scenario's vocabulary by a hash of the message id, with the rare
phrases the grep figures look for.

The shape of a compacted conversation is a long one's steady state: leaf
summaries (16 messages each) over all but a raw tail, condensed layers
(fanout 4) over the older leaves until at most 8 remain on top, and a run of
``LOOSE_LEAVES`` leaves not condensed yet, which the condensed passes take.

A big load sets the loaded tables' secondary indexes and constraints aside
and rebuilds them after, as an operator would for a bulk import
(:mod:`bench.growth_bulk`); each statement's seconds add up in
``Seeder.timings``.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime

from sqlalchemy import Connection, insert, select, text

from bench.grep import _vocabulary
from lcm.assembly.render import summary_context_tokens
from lcm.compaction.source_ranges import SourceRangeRepository
from lcm.context import SummaryView
from lcm.db.models import ContextItem, Conversation, Summary, SummaryParent

START = datetime(2026, 1, 1, tzinfo=UTC)
RAW_TAIL = 200
LOOSE_LEAVES = 32
LEAF_FANOUT = 16
CONDENSED_FANOUT = 4
VOCABULARY = _vocabulary(random.Random(7))

# Message ``id``'s text: its id, one of ``BODIES`` bodies of 24 words from the
# grep scenario's vocabulary (by the id), and now and then a phrase the grep
# queries match (1 in 500 / 1 in 300 messages). The bodies are a temporary table,
# so the text costs the database a join rather than a computation per row.
BODIES = 4099
_PHRASES = """CASE WHEN s.id % 500 = 7 THEN ' rollback of the payments service'
     WHEN s.id % 300 = 11 THEN ' timeout after ' || CAST(s.id % 9000 AS text) || ' ms'
     ELSE '' END"""


def bodies() -> list[dict[str, object]]:
    rng = random.Random(11)
    return [{"n": n, "body": " ".join(rng.choices(VOCABULARY, k=24))} for n in range(BODIES)]


class Dialect:
    """The few expressions the two databases spell differently."""

    def __init__(self, name: str) -> None:
        self.sqlite = name == "sqlite"

    def series(self, first: str, last: str, name: str) -> str:
        if self.sqlite:
            return (
                f"(WITH RECURSIVE s(v) AS (SELECT {first} UNION ALL SELECT v + 1 FROM s "
                f"WHERE v < {last}) SELECT v AS {name} FROM s) AS series_{name}"
            )
        return f"generate_series({first}, {last}) {name}"

    def summary_id(self, number: str) -> str:
        if self.sqlite:
            return f"printf('sum_%016x', {number})"
        return f"'sum_' || lpad(to_hex({number}), 16, '0')"

    def at(self, seconds: str) -> str:
        """``START`` plus ``seconds``, as the column type stores it."""
        if self.sqlite:
            epoch = f"{START.timestamp():.0f} + {seconds}"
            return f"strftime('%Y-%m-%d %H:%M:%S', {epoch}, 'unixepoch') || '.000000'"
        return f"CAST(:start AS timestamptz) + make_interval(secs => {seconds})"

    def messages(self) -> str:
        return f"""
INSERT INTO messages (id, tenant_id, conversation_id, seq, role, content, content_shape,
                      token_count, created_at)
SELECT m.id, :tenant, :first_cid + (m.g - 1) / :per_conv, :seq0 + (m.g - 1) % :per_conv + 1,
       CASE WHEN m.g % 2 = 1 THEN 'user' ELSE 'assistant' END, m.body, 'text',
       (length(m.body) + 3) / 4, {self.at("m.id")}
FROM (SELECT s.g, s.id, CAST(s.id AS text) || ': ' || b.body || {_PHRASES} AS body
      FROM (SELECT g, :first_id + g AS id FROM {self.series("1", ":n", "g")}) s
      JOIN bench_bodies b ON b.n = s.id % {BODIES}) m
"""

    def parts(self) -> str:
        payload = "json_object" if self.sqlite else "json_build_object"
        return f"""
INSERT INTO message_parts (tenant_id, message_id, ordinal, part_type, text, payload)
SELECT tenant_id, id, 0, 'text', content, {payload}('type', 'text', 'text', content)
FROM messages WHERE id > :lo AND id <= :hi
"""

    def summaries(self) -> str:
        start = self.at("0")
        return f"""
INSERT INTO summaries (id, tenant_id, conversation_id, kind, depth, content, token_count,
                       source_token_count, earliest_at, latest_at, descendant_count, file_ids,
                       created_at, escalation, model, rewrites)
SELECT {self.summary_id(":base + j")}, :tenant, :cid, :kind, :depth, c, (length(c) + 3) / 4,
       1000, {start}, {start}, :fanout, '[]', {start}, 'normal', 'instant', 0
FROM (SELECT j, 'Summary ' || CAST(j AS text) || ' at depth ' || CAST(:depth AS text)
             || ': the deploy of the cache server was checked and the config fixed.' AS c
      FROM {self.series("0", ":n - 1", "j")}) summary_text
"""

    def leaf_links(self) -> str:
        return f"""
INSERT INTO summary_messages (summary_id, message_id, tenant_id, ordinal)
SELECT {self.summary_id(":base + (g - 1) / :fanout")}, :first_id + g, :tenant, (g - 1) % :fanout
FROM {self.series("1", ":n", "g")}
"""

    def parent_links(self) -> str:
        return f"""
INSERT INTO summary_parents (summary_id, parent_id, tenant_id, ordinal)
SELECT {self.summary_id(":base + j / :fanout")}, {self.summary_id(":child_base + j")}, :tenant,
       j % :fanout
FROM {self.series("0", ":n - 1", "j")}
"""

    def summary_items(self) -> str:
        return f"""
INSERT INTO context_items (tenant_id, conversation_id, ordinal, item_type, summary_id, token_count)
SELECT :tenant, :cid, :ordinal0 + j + 1, 'summary', {self.summary_id(":base + j")}, 100
FROM {self.series("0", ":n - 1", "j")}
"""


_RAW_ITEMS = """
INSERT INTO context_items (tenant_id, conversation_id, ordinal, item_type, message_id, token_count)
SELECT tenant_id, conversation_id, seq - :seq_shift, 'message', id, token_count
FROM messages WHERE id > :lo AND id <= :hi
"""


@dataclass
class Seeder:
    """Writes histories through one connection; ids are handed out from here."""

    conn: Connection
    tenant_id: str
    next_message_id: int = 0
    next_summary: int = 0
    timings: dict[str, float] = field(default_factory=dict)  # seconds per statement kind

    def __post_init__(self) -> None:
        self.sql = Dialect(self.conn.dialect.name)
        self.conn.execute(
            text("CREATE TEMP TABLE IF NOT EXISTS bench_bodies (n integer PRIMARY KEY, body text)")
        )
        if not self.conn.execute(text("SELECT count(*) FROM bench_bodies")).scalar_one():
            self.conn.execute(text("INSERT INTO bench_bodies VALUES (:n, :body)"), bodies())
        top = self.conn.execute(text("SELECT coalesce(max(id), 0) FROM messages")).scalar_one()
        self.next_message_id = int(top) + 1_000_000  # clear of what ingest writes meanwhile
        self.next_summary = random.randrange(1 << 40, 1 << 48)  # apart from random sum_ ids

    def conversations(self, keys: list[str]) -> list[int]:
        rows = [{"tenant_id": self.tenant_id, "session_key": k} for k in keys]
        ids = sorted(
            self.conn.execute(insert(Conversation).returning(Conversation.id), rows).scalars()
        )
        assert ids == list(range(ids[0], ids[0] + len(ids))), "conversation ids not contiguous"
        return ids

    def messages(self, first_cid: int, per_conv: int, n: int, seq0: int = 0) -> tuple[int, int]:
        """``n`` messages, ``per_conv`` to a conversation from ``first_cid`` on, after
        ``seq0`` messages each; the range of their ids (``lo < id <= hi``)."""
        first = self.next_message_id
        self.next_message_id += n + 1
        params = {"tenant": self.tenant_id, "first_cid": first_cid, "per_conv": per_conv}
        params |= {"seq0": seq0, "start": START, "first_id": first, "n": n}
        with self.timed("insert messages"):
            self.conn.execute(text(self.sql.messages()), params)
        with self.timed("insert message_parts"):
            self.conn.execute(text(self.sql.parts()), {"lo": first, "hi": first + n})
        if not self.sql.sqlite:  # SQLite's AUTOINCREMENT follows explicit ids by itself
            self._sync_sequence()
        return first, first + n

    def raw(self, keys: list[str], per_conv: int) -> list[int]:
        """Never-compacted conversations: every message a context item."""
        cids = self.conversations(keys)
        self.extend(cids, 0, per_conv)
        return cids

    def extend(self, cids: list[int], seq0: int, per_conv: int) -> None:
        """``per_conv`` more messages for each of the never-compacted ``cids`` (contiguous)."""
        lo, hi = self.messages(cids[0], per_conv, per_conv * len(cids), seq0)
        with self.timed("insert context_items"):
            self.conn.execute(text(_RAW_ITEMS), {"lo": lo, "hi": hi, "seq_shift": 0})
        self.conn.execute(
            text(
                "UPDATE conversations SET last_seq = :n, last_ordinal = :n "
                "WHERE id BETWEEN :a AND :b"
            ),
            {"n": seq0 + per_conv, "a": cids[0], "b": cids[-1]},
        )

    def compacted(self, key: str, n: int) -> int:
        """One conversation of ``n`` messages in a compacted steady state (module doc)."""
        (cid,) = self.conversations([key])
        lo, _hi = self.messages(cid, n, n)
        summarized = n - RAW_TAIL
        leaves = -(-summarized // LEAF_FANOUT)
        leaf_base = self._summaries(cid, "leaf", 0, leaves)
        self._execute(
            self.sql.leaf_links(), base=leaf_base, fanout=LEAF_FANOUT, first_id=lo, n=summarized
        )
        loose = min(LOOSE_LEAVES, leaves)
        level_base, level_n, depth = leaf_base, leaves - loose, 0
        while level_n > 8:
            depth += 1
            parents = -(-level_n // CONDENSED_FANOUT)
            base = self._summaries(cid, "condensed", depth, parents)
            self._execute(
                self.sql.parent_links(),
                base=base,
                child_base=level_base,
                fanout=CONDENSED_FANOUT,
                n=level_n,
            )
            level_base, level_n = base, parents
        # What a pass would have stored with each summary (migration 0030).
        SourceRangeRepository(self.conn).recompute_conversation(cid)
        self._execute(self.sql.summary_items(), cid=cid, ordinal0=0, base=level_base, n=level_n)
        loose_base = leaf_base + leaves - loose
        self._execute(self.sql.summary_items(), cid=cid, ordinal0=level_n, base=loose_base, n=loose)
        shift = summarized - level_n - loose  # the tail's first seq lands after the summaries
        self.conn.execute(
            text(_RAW_ITEMS), {"lo": lo + summarized, "hi": lo + n, "seq_shift": shift}
        )
        self.conn.execute(
            text("UPDATE conversations SET last_seq = :n, last_ordinal = :o WHERE id = :c"),
            {"n": n, "o": level_n + loose + RAW_TAIL, "c": cid},
        )
        self._price_summary_items(cid)
        return cid

    def _price_summary_items(self, cid: int) -> None:
        """Each summary item's cost as assembly renders it (as a pass would store it)."""
        items = ContextItem.__table__
        summaries = Summary.__table__
        rows = self.conn.execute(
            select(summaries)
            .join(items, items.c.summary_id == summaries.c.id)
            .where(items.c.conversation_id == cid)
        ).all()
        links = SummaryParent.__table__
        parents: dict[str, list[str]] = {}
        for sid, parent in self.conn.execute(
            select(links.c.summary_id, links.c.parent_id)
            .where(links.c.summary_id.in_([r.id for r in rows]))
            .order_by(links.c.summary_id, links.c.ordinal)
        ):
            parents.setdefault(sid, []).append(parent)
        priced = [
            {
                "c": cid,
                "s": r.id,
                "t": summary_context_tokens(
                    SummaryView(
                        id=r.id,
                        kind=r.kind,
                        depth=r.depth,
                        content=r.content,
                        token_count=r.token_count,
                        earliest_at=r.earliest_at,
                        latest_at=r.latest_at,
                        descendant_count=r.descendant_count,
                        parent_ids=tuple(parents.get(r.id, [])),
                    )
                ),
            }
            for r in rows
        ]
        self.conn.execute(
            text(
                "UPDATE context_items SET token_count = :t "
                "WHERE conversation_id = :c AND summary_id = :s"
            ),
            priced,
        )

    def _summaries(self, cid: int, kind: str, depth: int, n: int) -> int:
        base = self.next_summary
        self.next_summary += n
        fanout = LEAF_FANOUT if kind == "leaf" else CONDENSED_FANOUT
        self._execute(
            self.sql.summaries(), base=base, cid=cid, kind=kind, depth=depth, n=n, fanout=fanout
        )
        return base

    def _execute(self, sql: str, **params: object) -> None:
        self.conn.execute(text(sql), {"tenant": self.tenant_id, "start": START, **params})

    @contextmanager
    def timed(self, what: str) -> Iterator[None]:
        started = time.perf_counter()
        yield
        self.timings[what] = self.timings.get(what, 0.0) + time.perf_counter() - started

    def _sync_sequence(self) -> None:
        self.conn.execute(
            text(
                "SELECT setval(pg_get_serial_sequence('messages', 'id'), "
                "(SELECT max(id) FROM messages))"
            )
        )
