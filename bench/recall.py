"""Recall that survives paraphrase: ``python -m bench recall``.

Imports every session the recall set (``bench/recall_set.jsonl``, see
``bench/recall_set.py``) refers to from ``../shared/data`` into a fresh
``lcm serve`` (SQLite by default, ``--postgres`` for a private embedded
Postgres) through ``POST …/bootstrap``, maps each answer line to the message
lcm stored for it (the transcript entry's own id, read back from the
export), waits until the search backlog is indexed, then asks every question
through ``POST /v1/grep`` (``lcm_client``), scoped to its session, top 10,
and prints recall@10 and MRR per query form, per kind and per style.

Full text is measured in three forms, so the baseline is fair: the question
as typed, its keywords (stop words removed mechanically, ANDed as the tool
reads words) and the same keywords ORed (what a BM25 engine ranks). The
baseline is the best of the three.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from bench.recall_audit import report_compliant
from bench.recall_dense import DenseIndex, dense_rankers
from bench.recall_import import (
    Imported,
    answer_groups,
    imported_sources,
)
from bench.recall_set import KINDS, SET_PATH, STYLES, RecallQuestion, keywords, load, recall_at
from bench.recall_set import reciprocal_rank as rr
from bench.servers import kept_postgres, postgres
from bench.transcripts import DATA
from lcm.db.engine import Database
from lcm.db.migrate import upgrade
from lcm.errors import LcmError
from lcm.settings import Settings
from lcm.tenants.service import create_tenant
from lcm_client import ApiError, LcmClient, Timeouts
from lcm_client.models import GrepIn
from tests import servers

K = 10
DEPTH = 50  # what hybrid fuses of each ranking
Position = tuple[int, int]  # (conversation id, seq): what grep's matches and the export share
Ranker = Callable[[RecallQuestion], list[Position]]


def wait_for_search_index(sqlite_file: Path | None, timeout: float = 600) -> None:
    """Until SQLite's search backlog is empty (Postgres indexes in the ingest transaction)."""
    if sqlite_file is None:
        return
    deadline = time.monotonic() + timeout
    while True:
        with sqlite3.connect(f"file:{sqlite_file}?mode=ro", uri=True) as conn:
            (left,) = conn.execute("SELECT count(*) FROM search_backlog").fetchone()
        if left == 0:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{left} messages still in the search backlog")
        time.sleep(1)


FORMS: dict[str, Callable[[str], str]] = {
    "question": lambda q: q,
    "keywords AND": lambda q: " ".join(keywords(q)),
    "keywords OR": lambda q: " OR ".join(keywords(q)),
}


class FullText:
    """grep's full-text ranking (by relevance, messages, the question's session), kept per
    question and query form: hybrid fuses the same lists the full-text rows score."""

    def __init__(self, lcm: LcmClient, keys: dict[str, str]) -> None:
        self._lcm, self._keys = lcm, keys
        self._seen: dict[tuple[str, str], list[Position]] = {}

    def ranking(self, question: RecallQuestion, form: str) -> list[Position]:
        key = (question.question, form)  # by text: two sets may share an id
        if key not in self._seen:
            self._seen[key] = self._grep(question, FORMS[form](question.question))
        return self._seen[key]

    def _grep(self, question: RecallQuestion, pattern: str) -> list[Position]:
        if not pattern.strip():
            return []
        body = GrepIn(
            pattern=pattern,
            mode="full_text",
            scope="messages",
            sort="relevance",
            limit=DEPTH,
            session_key=self._keys[question.source],
        )
        try:
            result = self._lcm.grep(body)
        except ApiError as error:  # a query the tool refuses finds nothing
            print(f"    {question.id}: grep refused {pattern!r}: {error}", flush=True)
            return []
        return [(m.conversation_id, m.seq) for m in result.matches if m.seq is not None]

    def rankers(self) -> dict[str, Ranker]:
        def top(form: str) -> Ranker:
            return lambda q: self.ranking(q, form)[:K]

        return {f"full text: {form}": top(form) for form in FORMS}


Scores = dict[str, list[tuple[RecallQuestion, float, float]]]  # ranker -> (q, recall@K, RR)


def score(
    rankers: dict[str, Ranker], questions: Sequence[RecallQuestion], groups: dict[str, list]
) -> Scores:
    scores: Scores = defaultdict(list)
    for label, rank in rankers.items():
        started = time.perf_counter()
        for q in questions:
            ranked = rank(q)
            scores[label].append((q, recall_at(ranked, groups[q.id], K), rr(ranked, groups[q.id])))
        took = (time.perf_counter() - started) * 1000 / max(1, len(questions))
        print(f"  {label}: {took:.1f} ms a question", flush=True)
    return scores


def _mean(values: Sequence[float]) -> str:
    return f"{sum(values) / len(values):.3f}" if values else "    -"


def _columns() -> list[tuple[str, str | None, str | None]]:
    """Report columns: (name, style kept or None for all, kind kept or None for all)."""
    columns: list[tuple[str, str | None, str | None]] = [("all", None, None)]
    columns += [(s, s, None) for s in STYLES]
    columns += [(k, "paraphrase", k) for k in KINDS]  # per kind: paraphrase questions
    return columns


def _kept(q: RecallQuestion, style: str | None, kind: str | None) -> bool:
    return style in (None, q.style) and kind in (None, q.kind)


def report(scores: Scores) -> None:
    """recall@K (MRR) per ranker: overall, per style, per kind (paraphrase questions)."""
    columns = _columns()
    any_rows = next(iter(scores.values()))
    counts = [sum(1 for q, _, _ in any_rows if _kept(q, s, k)) for _, s, k in columns]
    header = "  " + f"{'recall@10 (MRR)':36}"
    header += "".join(f"{c[0]} n={n}".rjust(17) for c, n in zip(columns, counts, strict=True))
    print(header, flush=True)
    for label, rows in scores.items():
        cells = []
        for _, style, kind in columns:
            kept = [(r, m) for q, r, m in rows if _kept(q, style, kind)]
            recall, mrr = _mean([r for r, _ in kept]), _mean([m for _, m in kept])
            cells.append(f"{recall} ({mrr})".rjust(17))
        print(f"  {label:36}" + "".join(cells), flush=True)
    _report_misses(scores)


def _report_misses(scores: Scores) -> None:
    """Questions no ranking answered at all: the first place to look for a wrong answer line."""
    best: dict[str, float] = {}
    for rows in scores.values():
        for q, recall, _ in rows:
            best[q.id] = max(best.get(q.id, 0.0), recall)
    missed = sorted(qid for qid, recall in best.items() if recall == 0.0)
    print(f"  answered by no ranking ({len(missed)}): {', '.join(missed) or '-'}", flush=True)


@contextmanager
def serve(
    use_postgres: bool, semantic: bool, keep: Path | None = None
) -> Iterator[tuple[str, str, str, Path | None]]:
    """An ``lcm serve``: its base URL, an API key, its database URL and SQLite file
    (None on Postgres); ``semantic`` turns semantic recall on. Fresh, or with
    ``keep`` its home and database in that folder, reused by the next run."""
    workdir = keep or Path(servers.make_workdir())
    home = workdir / "home"
    home.mkdir(parents=True, exist_ok=True)
    try:
        with _database(use_postgres, home, keep) as (url, sqlite_file):
            api_key = _api_key(url, keep)
            env = {"LCM_HOME": str(home), "ANTHROPIC_API_KEY": "", "LCM_LOG_LEVEL": "WARNING"}
            if use_postgres:
                env["LCM_DATABASE_URL"] = url
            if semantic:
                env["LCM_SEMANTIC"] = "on"
            handle = servers.start_serve(env, log=workdir / "serve.log")
            try:
                yield handle.base_url, api_key, url, sqlite_file
            finally:
                handle.stop()
    finally:
        if keep is None:
            shutil.rmtree(workdir, ignore_errors=True)


def _api_key(url: str, keep: Path | None) -> str:
    """The recall tenant's key: a new tenant, or the kept one."""
    held = keep / "api_key" if keep else None
    if held is not None and held.exists():
        return held.read_text(encoding="utf-8").strip()
    db = Database(Settings(database_url=url))
    with db.transaction() as s:
        api_key = create_tenant(s, "recall").api_key
    db.dispose()
    if held is not None:
        held.write_text(api_key, encoding="utf-8")
    return api_key


@contextmanager
def _database(
    use_postgres: bool, home: Path, keep: Path | None
) -> Iterator[tuple[str, Path | None]]:
    if use_postgres:
        with kept_postgres(keep) if keep else postgres() as url:
            yield url, None
        return
    sqlite_file = home / "lcm.db"
    url = f"sqlite:///{sqlite_file}"
    upgrade(url)
    yield url, sqlite_file


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--postgres",
        action="store_true",
        help="recall: lcm serve on a private embedded Postgres instead of SQLite",
    )
    parser.add_argument(
        "--semantic",
        action="store_true",
        help="recall: also the server's semantic / hybrid grep (LCM_SEMANTIC=on; waits "
        "until every message has its vector, which takes long on a busy machine)",
    )
    parser.add_argument(
        "--semantic-wait",
        type=float,
        default=3600.0,
        help="recall --semantic: seconds to wait for the server's embedding",
    )
    # Each --set is read once the server is ready: a set can be edited while it embeds.
    parser.add_argument("--set", action="append", help="recall: a set file (repeatable)")
    parser.add_argument("--dump", help="recall: write every question's scores to this JSON file")
    parser.add_argument(
        "--audit", action="store_true", help="recall: only audit the set (bench/recall_audit.py)"
    )
    parser.add_argument(
        "--sources",
        nargs="+",
        default=None,
        help="recall: only the sessions whose path contains one of these strings",
    )


def run(args: argparse.Namespace) -> None:
    if args.audit:
        from bench.recall_audit import run as audit

        return audit(args, DATA)
    paths = [Path(p) for p in args.set or [SET_PATH]]
    questions = _selected(paths[0], args.sources)
    sources = sorted({q.source for q in questions})
    if not all((DATA / s).exists() for s in sources):
        print(f"  the recall set's sessions are not under {DATA}: nothing to measure", flush=True)
        return
    timeouts = Timeouts(read=300, write=300)  # a 4 MB session's bootstrap
    keep = Path(args.keep) if args.keep else None
    with (
        serve(args.postgres, args.semantic, keep) as (base, api_key, url, sqlite_file),
        LcmClient(base, api_key, timeouts=timeouts) as lcm,
    ):
        imported = imported_sources(lcm, sources, keep)
        wait_for_search_index(sqlite_file)
        keys = {s: i.key for s, i in imported.items()}
        full_text = FullText(lcm, keys)
        rankers = full_text.rankers()
        rankers.update(_dense_rankers(imported, full_text))
        if args.semantic:
            from bench.recall_server import SemanticGrep, wait_for_embeddings

            took = wait_for_embeddings(url, timeout=args.semantic_wait)
            print(f"  the server embedded every text in {took:.0f} s", flush=True)
            rankers.update(SemanticGrep(lcm, keys, K).rankers())
        dumped = {}
        for path in paths:  # read now: the sets' questions, not the sessions, may have changed
            chosen = [q for q in _selected(path, args.sources) if q.source in imported]
            groups = {q.id: answer_groups(q, imported[q.source]) for q in chosen}
            scores = score(rankers, chosen, groups)
            report(scores)
            report_compliant(scores)
            dumped[str(path)] = {
                label: [[q.id, q.style, q.kind, r, m] for q, r, m in rows]
                for label, rows in scores.items()
            }
    if args.dump:
        Path(args.dump).write_text(json.dumps(dumped, indent=1), encoding="utf-8")


def _selected(path: Path, sources: Sequence[str] | None) -> list[RecallQuestion]:
    questions = load(path)
    if sources:
        questions = [q for q in questions if any(part in q.source for part in sources)]
    print(
        f"  {path.name}: {len(questions)} questions over {len({q.source for q in questions})} "
        f"sessions ({sum(q.style == 'paraphrase' for q in questions)} paraphrase, "
        f"{sum(q.style == 'identifier' for q in questions)} identifier); top {K}",
        flush=True,
    )
    return questions


def _dense_rankers(imported: dict[str, Imported], full_text: FullText) -> dict[str, Ranker]:
    """Dense and hybrid, computed here with the project's embedder (an approximation)."""
    try:
        from lcm.semantic import load_embedder

        embedder = load_embedder()
    except (ImportError, LcmError) as error:
        print(f"  dense / hybrid not measured: {error}", flush=True)
        return {}
    messages = {p: m for i in imported.values() for p, m in i.messages.items()}
    started = time.perf_counter()
    index = DenseIndex(embedder, messages)
    print(
        f"  embedded {len(messages)} messages in-process in {time.perf_counter() - started:.0f} s "
        "(dense and hybrid below are the harness's approximation, not the server's grep)",
        flush=True,
    )
    conversation_of = {s: i.conversation_id for s, i in imported.items()}
    return dense_rankers(index, conversation_of, full_text.ranking, K)
