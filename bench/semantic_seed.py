"""Vectors for ``python -m bench semantic --scale``: 100k to 1M embeddings, as a bulk load.

Embedding a million texts is out of reach on a small host (~120 short texts/s
on 2 idle cores), so the load embeds :data:`CENTRES` real texts (the prose of
the sessions under ``../shared/data``, first 300 characters) and derives
every stored vector from one of them: ``l2_normalize(centre + noise)``,
the noise one of :data:`NOISES` Gaussian vectors of norm :data:`NOISE_NORM`
(cosine to its centre about 0.9; the centre vectors are cached in the temp
directory between runs). The result is clustered like real data
(many texts near each topic, topics spread as real prose spreads them),
which is what an HNSW graph meets in practice; uniform random vectors would
be the worst case for its recall and say little about its speed.

Messages and leaf summaries are written by :class:`bench.growth_seed.Seeder`
(one ``INSERT … SELECT`` each), their vectors by one ``INSERT … SELECT``
joining the two small tables of centres and noise: no row leaves the
database. The HNSW index is dropped for the load and built after it with
``maintenance_work_mem`` raised, then ``ANALYZE``, as a bulk import would.

Several tenants of unequal size (:data:`SHARES`) and conversations of
:data:`PER_CONVERSATION` messages (one leaf summary per 16) give grep's
scopes their real selectivity: one conversation is 0.2% of the table at 1M,
the largest tenant 40%, the smallest 5%.
"""

from __future__ import annotations

import hashlib
import json
import random
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, text

from bench.growth_bulk import bulk_load
from bench.growth_seed import LEAF_FANOUT, Seeder
from bench.transcripts import DATA
from lcm.semantic import Embedder

CENTRES = 1_024
NOISES = 1_024  # CENTRES x NOISES distinct vectors before one repeats
NOISE_NORM = 0.5
PER_CONVERSATION = 2_000
SHARES = (0.40, 0.20, 0.10, 0.10, 0.05, 0.05, 0.05, 0.05)
_TEXT_CHARS = 300

_MESSAGE_VECTORS = """
INSERT INTO embeddings (tenant_id, conversation_id, target, source, message_id, chunk, model,
                        dimension, at, created_at, embedding)
SELECT m.tenant_id, m.conversation_id, 'message', 'msg_' || m.id, m.id, 0, :model, 384,
       m.created_at, m.created_at, l2_normalize(c.v + z.v)
FROM messages m
JOIN bench_centres c ON c.n = m.id % :centres
JOIN bench_noise z ON z.n = (m.id / :centres) % :noises
WHERE m.id > :lo AND m.id <= :hi
"""
_SUMMARY_VECTORS = """
INSERT INTO embeddings (tenant_id, conversation_id, target, source, message_id, chunk, model,
                        dimension, at, created_at, embedding)
SELECT s.tenant_id, s.conversation_id, 'summary', s.id, NULL, 0, :model, 384,
       s.latest_at, s.created_at, l2_normalize(c.v + z.v)
FROM summaries s
JOIN bench_centres c ON c.n = abs(hashtext(s.id)) % :centres
JOIN bench_noise z ON z.n = abs(hashtext(s.id || '-z')) % :noises
WHERE s.conversation_id = ANY(:cids)
"""


def real_texts(limit: int = CENTRES) -> list[str]:
    """Up to ``limit`` distinct prose texts of the real sessions (first 300 characters)."""
    seen: dict[str, None] = {}
    for path in sorted(DATA.rglob("*.jsonl")):
        for line in path.read_text(errors="replace").splitlines():
            try:
                _collect(json.loads(line), seen)
            except ValueError:
                continue
            if len(seen) >= limit:
                return list(seen)[:limit]
    return list(seen)


def _collect(node: object, seen: dict[str, None]) -> None:
    if isinstance(node, dict):
        value = node.get("text")
        if isinstance(value, str) and len(value.strip()) >= 20:
            seen[" ".join(value.split())[:_TEXT_CHARS]] = None
        for child in node.values():
            if isinstance(child, dict | list):
                _collect(child, seen)
    elif isinstance(node, list):
        for child in node:
            _collect(child, seen)


def _literal(values: list[float]) -> str:
    return "[" + ",".join(f"{x:.6g}" for x in values) + "]"


@dataclass
class VectorLoad:
    """Grows the embeddings table tenant by tenant; remembers what it wrote."""

    conn: Connection
    embedder: Embedder
    tenants: list[str]
    loaded: int = 0
    conversations: dict[str, list[int]] = field(default_factory=dict)

    def prepare(self) -> float:
        """The centres (embedded now) and the noise as two tables; seconds spent embedding."""
        texts = real_texts()
        started = time.perf_counter()
        vectors = _embedded(self.embedder, texts)
        spent = time.perf_counter() - started
        rng = random.Random(40)
        sigma = NOISE_NORM / 384**0.5
        self.conn.execute(text("CREATE TABLE IF NOT EXISTS bench_centres (n int, v vector(384))"))
        self.conn.execute(text("CREATE TABLE IF NOT EXISTS bench_noise (n int, v vector(384))"))
        centres = [
            {"n": n, "v": _literal(vectors[n % len(texts)].tolist())} for n in range(CENTRES)
        ]
        noise = [
            {"n": n, "v": _literal([rng.gauss(0, sigma) for _ in range(384)])}
            for n in range(NOISES)
        ]
        insert = "INSERT INTO {} VALUES (:n, CAST(:v AS vector))"
        self.conn.execute(text(insert.format("bench_centres")), centres)
        self.conn.execute(text(insert.format("bench_noise")), noise)
        return spent

    def grow(self, total: int) -> dict[str, float]:
        """Add vectors until the table holds about ``total``; seconds per step."""
        timings: dict[str, float] = {}
        started = time.perf_counter()
        self.conn.execute(text("DROP INDEX IF EXISTS ix_embeddings_embedding_hnsw"))
        rebuilt: dict[str, float] = {}
        with bulk_load(self.conn, True, rebuilt):
            for tenant_id, share in zip(self.tenants, SHARES, strict=True):
                self._tenant(tenant_id, int((total - self.loaded) * share))
            timings["rows"] = time.perf_counter() - started
            started = time.perf_counter()
        timings["search indexes"] = time.perf_counter() - started
        started = time.perf_counter()
        self.conn.execute(text("SET maintenance_work_mem = '3GB'"))
        self.conn.execute(text("SET max_parallel_maintenance_workers = 1"))
        self.conn.execute(
            text(
                "CREATE INDEX ix_embeddings_embedding_hnsw ON embeddings "
                "USING hnsw (embedding vector_ip_ops)"
            )
        )
        self.conn.execute(text("ANALYZE embeddings"))
        timings["hnsw"] = time.perf_counter() - started
        self.loaded = int(
            self.conn.execute(text("SELECT count(*) FROM embeddings")).scalar_one() or 0
        )
        return timings

    def _tenant(self, tenant_id: str, vectors: int) -> None:
        per_conversation = PER_CONVERSATION + PER_CONVERSATION // LEAF_FANOUT
        count = max(1, round(vectors / per_conversation))
        seeder = Seeder(self.conn, tenant_id)
        done = len(self.conversations.get(tenant_id, []))
        keys = [f"vec-{tenant_id[:8]}-{done + i}" for i in range(count)]
        cids = seeder.raw(keys, PER_CONVERSATION)
        self.conversations.setdefault(tenant_id, []).extend(cids)
        lo, hi = seeder.next_message_id - PER_CONVERSATION * count - 1, seeder.next_message_id
        for cid in cids:
            seeder._summaries(cid, "leaf", 0, PER_CONVERSATION // LEAF_FANOUT)
        params = {"model": self.embedder.model_name, "centres": CENTRES, "noises": NOISES}
        self.conn.execute(text(_MESSAGE_VECTORS), {**params, "lo": lo, "hi": hi})
        self.conn.execute(text(_SUMMARY_VECTORS), {**params, "cids": cids})


def _embedded(embedder: Embedder, texts: list[str]) -> Any:
    """``texts`` embedded, kept in the temp directory between runs (minutes on a busy host)."""
    import numpy as np

    digest = hashlib.sha256("\n".join([embedder.model_name, *texts]).encode()).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / f"lcm-bench-centres-{digest}.npy"
    if path.exists():
        return np.load(path)
    vectors = embedder.embed(texts)
    np.save(path, vectors)
    return vectors
