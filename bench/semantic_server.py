"""How fast ``lcm serve`` embeds real sessions, against the embedder alone on the same texts.

``python -m bench semantic --server fasthooks 02- [--against DIR]``: a fresh
``lcm serve`` (SQLite, in-process worker, ``LCM_SEMANTIC=on``) bootstraps the
named sessions of ``../shared/data`` and the clock runs from the first
bootstrap until no message or summary waits for a vector. Then the same
texts (messages with words as ``role: text``, in the chunks the job cuts) are embedded
in this process, one call, as a floor. ``--against DIR`` runs the same with
the server code of another tree (``git archive <rev> | tar -x -C DIR``) too.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from sqlalchemy import select

from bench.recall_import import import_source
from bench.recall_server import wait_for_embeddings
from bench.recall_set import load
from lcm.db.engine import Database
from lcm.db.migrate import upgrade
from lcm.db.models import Embedding, Message
from lcm.semantic import load_embedder
from lcm.semantic.repository import SPOKEN
from lcm.semantic.texts import chunks, message_text
from lcm.settings import Settings
from lcm.tenants.service import create_tenant
from lcm_client import LcmClient, Timeouts
from tests import servers


def run_server(parts: list[str], against: str | None) -> None:
    sources = sorted({q.source for q in load() if any(part in q.source for part in parts)})
    print(f"  sessions: {', '.join(sources)}", flush=True)
    for label, cwd in [("this tree", None), ("against", against)]:
        if label == "against" and not against:
            continue
        url, workdir = _measure(sources, Path(cwd) if cwd else None, label)
        _floor(url)
        shutil.rmtree(workdir, ignore_errors=True)


def _measure(sources: list[str], cwd: Path | None, label: str) -> tuple[str, Path]:
    workdir = Path(servers.make_workdir())
    home = workdir / "home"
    home.mkdir()
    url = f"sqlite:///{home / 'lcm.db'}"
    upgrade(url)
    db = Database(Settings(database_url=url))
    with db.transaction() as session:
        api_key = create_tenant(session, "embed").api_key
    env = {"LCM_HOME": str(home), "ANTHROPIC_API_KEY": "", "LCM_LOG_LEVEL": "WARNING"}
    env["LCM_SEMANTIC"] = "on"
    handle = servers.start_serve(env, log=workdir / "serve.log", cwd=cwd)
    try:
        with LcmClient(handle.base_url, api_key, timeouts=Timeouts(read=300, write=300)) as lcm:
            started = time.monotonic()
            for source in sources:
                import_source(lcm, source)
            imported = time.monotonic() - started
            took = wait_for_embeddings(url, timeout=3600) + imported
    finally:
        handle.stop()
    with db.read_session() as session:
        messages = len(session.execute(select(Message.id)).all())
        vectors = len(session.execute(select(Embedding.id)).all())
    db.dispose()
    print(
        f"  {label}: {messages} messages ({vectors} vectors) embedded {took:.0f} s after the "
        f"first bootstrap (imports {imported:.0f} s): {messages / took * 60:.0f} messages/min, "
        f"{vectors / took:.1f} vectors/s",
        flush=True,
    )
    return url, workdir


def _floor(url: str) -> None:
    db = Database(Settings(database_url=url))
    with db.read_session() as session:
        rows = session.execute(select(Message.role, Message.content).where(SPOKEN)).all()
    db.dispose()
    texts = [piece for role, content in rows for piece in chunks(message_text(role, content))]
    embedder = load_embedder()
    started = time.perf_counter()
    embedder.embed(texts)
    took = time.perf_counter() - started
    print(
        f"    the embedder alone, same {len(texts)} message chunks in one call: {took:.0f} s "
        f"({len(texts) / took:.1f} chunks/s)",
        flush=True,
    )
