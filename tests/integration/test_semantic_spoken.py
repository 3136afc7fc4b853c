"""Which messages get a vector, on both databases: those that say something in
words (a text part). Tool calls, tool output and reasoning without a text part
are left to the full-text side, and migration 0034 removes such vectors stored
before the rule."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select, text

from lcm.db.engine import Database
from lcm.db.migrate import downgrade, upgrade
from lcm.db.models import Embedding, Message
from lcm.semantic.backfill import embed_conversation, vector_rows
from lcm.semantic.embedder import load_embedder
from lcm.semantic.pending import Pending
from lcm.semantic.repository import EmbeddingRepository
from tests.conftest import auth, new_tenant
from tests.integration.semantic_helpers import grep

TOOL_OUTPUT = "gradle wrapper finished: BUILD SUCCESSFUL in 41s, 12 actionable tasks"
TURNS: list[dict[str, Any]] = [
    {"role": "user", "content": "Please build the Android app and tell me if it worked."},
    {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "t1", "name": "bash", "input": {"cmd": "./gradlew"}}
        ],
    },
    {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "t1", "content": TOOL_OUTPUT}],
    },
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "The build passed; check the apk size next."},
            {"type": "tool_use", "id": "t2", "name": "bash", "input": {"cmd": "ls -l app.apk"}},
        ],
    },
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Summarise for the user."},
            {"type": "text", "text": "The Android build succeeded; the package is 8 MB."},
        ],
    },
]
SPOKEN_SEQS = {1, 5}  # the user's request and the answer with a text part


def _post(client: TestClient, who: Any) -> int:
    response = client.post(
        "/v1/conversations/agent:build/messages", json={"messages": TURNS}, headers=auth(who)
    )
    assert response.status_code == 200, response.text
    return int(response.json()["conversation_id"])


def _embedded_seqs(db: Database) -> set[int]:
    with db.read_session() as session:
        rows = session.execute(
            select(Message.seq).join(Embedding, Embedding.message_id == Message.id)
        ).all()
    return {seq for (seq,) in rows}


def test_only_messages_with_words_are_embedded_and_nothing_is_left_waiting(
    sdb: Database, sclient: TestClient
) -> None:
    who = new_tenant(sdb)
    cid = _post(sclient, who)
    model = load_embedder().model_name
    with sdb.read_session() as session:
        assert EmbeddingRepository(session).count_pending(model) == len(SPOKEN_SEQS)
    assert embed_conversation(sdb.transaction, load_embedder(), cid, 64) == len(SPOKEN_SEQS)
    assert _embedded_seqs(sdb) == SPOKEN_SEQS
    with sdb.read_session() as session:  # the wordless three do not wait for ever
        repo = EmbeddingRepository(session)
        assert repo.count_pending(model) == 0
        assert repo.pending(model, cid, 10) == []
    # Hybrid still finds the tool output, through its words.
    found = grep(sclient, who, "actionable gradle tasks", "hybrid")
    assert 3 in [m["seq"] for m in found["matches"]]


def test_migration_0034_removes_the_vectors_of_wordless_messages(
    sdb: Database, sclient: TestClient
) -> None:
    url = sdb.settings.database_url
    who = new_tenant(sdb)
    cid = _post(sclient, who)
    embedder = load_embedder()
    with sdb.transaction() as session:  # vectors for every message, as before the rule
        messages = session.execute(
            select(
                Message.id, Message.seq, Message.role, Message.content, Message.created_at
            ).where(Message.conversation_id == cid)
        ).all()
        pending = [
            Pending("message", f"msg_{i}", who.tenant_id, cid, i, at, content, role)
            for i, _seq, role, content, at in messages
        ]
        EmbeddingRepository(session).store(vector_rows(embedder, pending))
    assert _embedded_seqs(sdb) == {1, 2, 3, 4, 5}
    downgrade(url, "0033_embedding_scope_indexes")
    with sdb.transaction() as session:  # a message with no parts at all keeps its vector
        session.execute(
            text("DELETE FROM message_parts WHERE message_id = :i"), {"i": messages[1][0]}
        )
    upgrade(url)
    assert _embedded_seqs(sdb) == {1, 2, 5}
