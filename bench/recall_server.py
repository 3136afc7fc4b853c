"""The server's own ``semantic`` and ``hybrid`` grep for ``bench recall --semantic``.

``lcm serve`` runs with ``LCM_SEMANTIC=on``; the harness waits until its
background embedding has a vector for every message and summary, then asks
grep in both modes once per ``semantic_query_handling`` (set on the tenant
through ``PATCH /v1/tenant/settings`` before each pass).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from bench.recall_dense import HANDLINGS
from bench.recall_set import RecallQuestion
from lcm.db.engine import Database
from lcm.semantic.embedder import MODEL_NAME
from lcm.semantic.repository import EmbeddingRepository
from lcm.settings import Settings
from lcm_client import ApiError, LcmClient
from lcm_client.models import GrepIn

Position = tuple[int, int]


def wait_for_embeddings(database_url: str, timeout: float) -> float:
    """Until no message or summary waits for a vector; the seconds it took."""
    db = Database(Settings(database_url=database_url))
    started = last = time.monotonic()
    try:
        while True:
            with db.session() as session:
                left = EmbeddingRepository(session).count_pending(MODEL_NAME)
            now = time.monotonic()
            if left == 0:
                return now - started
            if now - started > timeout:
                raise TimeoutError(f"{left} texts still wait for a vector after {timeout:.0f} s")
            if now - last >= 60:
                print(f"    {left} texts wait for a vector ({now - started:.0f} s)", flush=True)
                last = now
            time.sleep(2)
    finally:
        db.dispose()


class SemanticGrep:
    """grep in ``semantic`` / ``hybrid`` mode under each query handling, top ``k``."""

    def __init__(self, lcm: LcmClient, keys: dict[str, str], k: int) -> None:
        self._lcm, self._keys, self._k = lcm, keys, k
        self._handling: str | None = None

    def ranking(self, question: RecallQuestion, mode: str, handling: str) -> list[Position]:
        if handling != self._handling:
            self._lcm.update_settings({"semantic_query_handling": handling})
            self._handling = handling
        body = GrepIn(
            pattern=question.question,
            mode=mode,  # "semantic" | "hybrid"
            scope="messages",
            limit=self._k,
            session_key=self._keys[question.source],
        )
        try:
            result = self._lcm.grep(body)
        except ApiError as error:
            print(f"    {question.id}: {mode} grep refused: {error}", flush=True)
            return []
        return [(m.conversation_id, m.seq) for m in result.matches if m.seq is not None]

    def rankers(self) -> dict[str, Callable[[RecallQuestion], list[Position]]]:
        def ranker(mode: str, handling: str) -> Callable[[RecallQuestion], list[Position]]:
            return lambda q: self.ranking(q, mode, handling)

        return {
            f"server {mode}: {handling}": ranker(mode, handling)
            for handling in HANDLINGS
            for mode in ("semantic", "hybrid")
        }
