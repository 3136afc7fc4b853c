"""What the semantic recall tests share besides their fixtures (those are in
``tests/integration/conftest.py``): the texts they seed, posting and grepping
through the API, counting vectors and running the recorded embed jobs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import func, select

from lcm.db.engine import Database
from lcm.db.models import Embedding
from lcm.outbox import EmbedConversation
from lcm.semantic.backfill import embed_conversation
from lcm.semantic.embedder import load_embedder
from lcm.tenants.service import IssuedKey
from tests.conftest import RecordingSender, auth

CAR = "My car would not start this morning, the battery was completely dead."
FILLER = [
    "We adopted a kitten from the shelter last week.",
    "The quarterly budget review moved to Thursday afternoon.",
    "Can you recommend a good recipe for lentil soup?",
    "The new office plants need watering twice a week.",
    "I finished reading the novel about the lighthouse keeper.",
]


def post_messages(client: TestClient, who: IssuedKey, key: str, texts: Sequence[str]) -> int:
    body = {"messages": [{"role": "user", "content": t} for t in texts]}
    response = client.post(f"/v1/conversations/{key}/messages", json=body, headers=auth(who))
    assert response.status_code == 200, response.text
    return int(response.json()["conversation_id"])


def grep(client: TestClient, who: IssuedKey, pattern: str, mode: str, **extra: Any) -> Any:
    body = {"pattern": pattern, "mode": mode, "scope": "messages", "all_conversations": True}
    response = client.post("/v1/grep", json={**body, **extra}, headers=auth(who))
    assert response.status_code == 200, response.text
    return response.json()


def plain(snippet: str) -> str:
    """A snippet without its highlight marks."""
    return snippet.replace("«", "").replace("»", "")


def vectors(db: Database, model: str | None = None) -> int:
    with db.read_session() as session:
        query = select(func.count()).select_from(Embedding)
        if model is not None:
            query = query.where(Embedding.model == model)
        return int(session.scalar(query) or 0)


def run_jobs(db: Database, sender: RecordingSender) -> None:
    """What the worker does with the recorded embed jobs."""
    for job in sender.jobs:
        if isinstance(job, EmbedConversation):
            embed_conversation(db.transaction, load_embedder(), job.conversation_id, 64)
    sender.jobs.clear()
