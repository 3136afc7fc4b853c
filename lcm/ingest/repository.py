"""All SQL of the write path: messages, their parts, their context items."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from sqlalchemy import ARRAY, String, Table, any_, bindparam, func, insert, select, text
from sqlalchemy.orm import Session

from lcm.db.driver import DriverStatement, among_json
from lcm.db.models import ContextItem, Message, MessagePart

MESSAGES: Table = Message.__table__  # type: ignore[assignment]
PARTS: Table = MessagePart.__table__  # type: ignore[assignment]
CONTEXT_ITEMS: Table = ContextItem.__table__  # type: ignore[assignment]


class NewPart(NamedTuple):
    """A part of a message being ingested, which it names by seq (its id is not known yet)."""

    seq: int
    ordinal: int
    part_type: str
    text: str
    tool_call_id: str | None
    payload: dict[str, Any]

    def columns(self) -> dict[str, Any]:
        """Its ``message_parts`` columns but the two it does not know (tenant, message)."""
        return {
            "ordinal": self.ordinal,
            "part_type": self.part_type,
            "text": self.text,
            "tool_call_id": self.tool_call_id,
            "payload": self.payload,
        }


class MessageRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def existing_client_ids(self, conversation_id: int, client_ids: Iterable[str]) -> set[str]:
        connection = self.session.connection()
        wanted = list(set(client_ids))
        if connection.dialect.name == "postgresql":
            params = {"conversation": conversation_id, "client_ids": wanted}
            return set(_CLIENT_IDS_ANY.run(self.session, params).scalars())
        params = {"conversation": conversation_id, "client_ids": json.dumps(wanted)}
        return set(_CLIENT_IDS_JSON.run(self.session, params).scalars())

    def insert_batch(
        self,
        tenant_id: str,
        conversation_id: int,
        first_ordinal: int,
        messages: Sequence[dict[str, Any]],
        parts: Sequence[NewPart],
    ) -> list[int]:
        """A batch's messages, their parts and one context item each; ids in seq order.

        ``messages`` are rows of the ``messages`` table without the two
        columns every row shares, consecutive seqs from the first; ``parts``
        name their message by seq. The items take consecutive ordinals from
        ``first_ordinal`` and the messages' token counts.

        On Postgres one statement (data-modifying ``WITH``): every ingest runs
        it, and three statements of one ``executemany`` each cost three round
        trips and the driver's work per row three times over. The foreign key
        of a part to its new message is checked at the statement's end, when
        the message is there. Elsewhere (SQLite, in process) three statements.
        """
        if self.session.connection().dialect.name == "postgresql":
            params = _batch_params(tenant_id, conversation_id, first_ordinal, messages, parts)
            return [int(row[0]) for row in _INSERT_BATCH.run(self.session, params)]
        shared = {"tenant_id": tenant_id, "conversation_id": conversation_id}
        ids = self.insert_messages([{**shared, **m} for m in messages])
        by_seq = {m["seq"]: message_id for m, message_id in zip(messages, ids, strict=True)}
        self.insert_parts(
            [{"tenant_id": tenant_id, "message_id": by_seq[p.seq], **p.columns()} for p in parts]
        )
        self.insert_context_items(
            [
                {
                    **shared,
                    "ordinal": first_ordinal + i,
                    "item_type": "message",
                    "message_id": message_id,
                    "token_count": m["token_count"],
                }
                for i, (message_id, m) in enumerate(zip(ids, messages, strict=True))
            ]
        )
        return ids

    def insert_messages(self, rows: Sequence[dict[str, Any]]) -> list[int]:
        """Insert message rows in one statement batch; ids in the order given."""
        return [int(r[0]) for r in _INSERT_MESSAGES.run_each(self.session, rows)]

    def insert_parts(self, rows: Sequence[dict[str, Any]]) -> None:
        _INSERT_PARTS.run_each(self.session, rows)

    def insert_context_items(self, rows: Sequence[dict[str, Any]]) -> None:
        _INSERT_CONTEXT_ITEMS.run_each(self.session, rows)

    def count(self, conversation_id: int) -> int:
        return int(
            self.session.scalar(
                select(func.count())
                .select_from(Message)
                .where(Message.conversation_id == conversation_id)
            )
            or 0
        )


# Every ingest runs these statements: they are built once, with bound
# parameters (building a statement and its cache key per call costs more CPU
# than running it), and run as Core on the session's connection (its
# transaction), past the ORM: these rows are never loaded as objects here,
# and the ORM's bulk bookkeeping was a third of the write path's time.
_IN_CONVERSATION = MESSAGES.c.conversation_id == bindparam("conversation")
# Postgres: one array parameter, so the statement text is the same for every
# batch size and the driver prepares it once instead of parsing an IN list of
# a different length each time.
_CLIENT_IDS_ANY = DriverStatement(
    select(MESSAGES.c.client_id).where(
        _IN_CONVERSATION,
        MESSAGES.c.client_id == any_(bindparam("client_ids", type_=ARRAY(String))),
    )
)
# SQLite: the ids as one JSON array, so the statement text is the same for
# every batch size and runs on the driver (an expanding IN list would not),
# with no bind limit for a 1,000-message batch; the (conversation, client id)
# index answers each.
_CLIENT_IDS_JSON = DriverStatement(
    select(MESSAGES.c.client_id).where(
        _IN_CONVERSATION, among_json(MESSAGES.c.client_id, "client_ids")
    )
)
# SQLite: one row per call on the driver (``DriverStatement.run_each``); the
# rows give every column these name.
_INSERT_MESSAGES = DriverStatement(
    insert(MESSAGES).returning(MESSAGES.c.id, sort_by_parameter_order=True),
    (
        "tenant_id",
        "conversation_id",
        "seq",
        "role",
        "content",
        "content_shape",
        "token_count",
        "created_at",
        "client_id",
        "provider",
        "model",
    ),
)
_INSERT_PARTS = DriverStatement(
    insert(PARTS),
    ("tenant_id", "message_id", "ordinal", "part_type", "text", "tool_call_id", "payload"),
)
_INSERT_CONTEXT_ITEMS = DriverStatement(
    insert(CONTEXT_ITEMS),
    ("tenant_id", "conversation_id", "ordinal", "item_type", "message_id", "token_count"),
)


# Postgres: a batch in one statement (``MessageRepository.insert_batch``). The
# messages are inserted in seq order, so their ids (from the sequence) ascend
# with their seqs, as one INSERT per message would give them.
_MESSAGE_ARRAYS = (
    ("seq", "BIGINT"),
    ("role", "VARCHAR"),
    ("content", "TEXT"),
    ("content_shape", "VARCHAR"),
    ("token_count", "INTEGER"),
    ("created_at", "TIMESTAMP WITH TIME ZONE"),
    ("client_id", "VARCHAR"),
    ("provider", "VARCHAR"),
    ("model", "VARCHAR"),
)
_PART_ARRAYS = (
    ("seq", "BIGINT"),
    ("ordinal", "INTEGER"),
    ("part_type", "VARCHAR"),
    ("text", "TEXT"),
    ("tool_call_id", "VARCHAR"),
    ("payload", "TEXT"),  # JSON text, made JSONB in the statement
)


def _unnest(prefix: str, arrays: Sequence[tuple[str, str]]) -> str:
    return (
        "unnest("
        + ", ".join(f"CAST(:{prefix}{name} AS {sql_type}[])" for name, sql_type in arrays)
        + f") AS {prefix.rstrip('_')}({', '.join(name for name, _ in arrays)})"
    )


_INSERT_BATCH = DriverStatement(
    text(
        "WITH new AS ("
        "INSERT INTO messages (tenant_id, conversation_id, "
        + ", ".join(name for name, _ in _MESSAGE_ARRAYS)
        + ") SELECT :tenant_id, :conversation_id, "
        + ", ".join(f"m.{name}" for name, _ in _MESSAGE_ARRAYS)
        + f" FROM {_unnest('m_', _MESSAGE_ARRAYS)} ORDER BY m.seq "
        "RETURNING id, seq, token_count), "
        "parts AS (INSERT INTO message_parts "
        "(tenant_id, message_id, ordinal, part_type, text, tool_call_id, payload) "
        "SELECT :tenant_id, new.id, p.ordinal, p.part_type, p.text, p.tool_call_id, "
        "CAST(p.payload AS JSONB) "
        f"FROM {_unnest('p_', _PART_ARRAYS)} JOIN new ON new.seq = p.seq), "
        "items AS (INSERT INTO context_items "
        "(tenant_id, conversation_id, ordinal, item_type, message_id, token_count) "
        "SELECT :tenant_id, :conversation_id, "
        "CAST(:first_ordinal AS BIGINT) + new.seq - CAST(:first_seq AS BIGINT), "
        "'message', new.id, new.token_count FROM new) "
        "SELECT id FROM new ORDER BY seq"
    )
)


def _batch_params(
    tenant_id: str,
    conversation_id: int,
    first_ordinal: int,
    messages: Sequence[dict[str, Any]],
    parts: Sequence[NewPart],
) -> dict[str, Any]:
    params: dict[str, Any] = {
        "tenant_id": tenant_id,
        "conversation_id": conversation_id,
        "first_ordinal": first_ordinal,
        "first_seq": messages[0]["seq"],
    }
    for name, _ in _MESSAGE_ARRAYS:
        params[f"m_{name}"] = [m[name] for m in messages]
    for index, (name, _) in enumerate(_PART_ARRAYS):
        params[f"p_{name}"] = [part[index] for part in parts]
    params["p_payload"] = [json.dumps(part.payload) for part in parts]
    return params
