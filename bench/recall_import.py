"""The recall set's sessions in ``lcm serve``: bootstrapped, their lines mapped
to the messages stored for them, and (``--keep``) remembered between runs."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.recall_set import RecallQuestion
from bench.transcripts import DATA
from lcm.transcripts.openclaw import content_id
from lcm_client import LcmClient
from lcm_client.models import BootstrapIn

Position = tuple[int, int]  # (conversation id, seq): what grep's matches and the export share


@dataclass(slots=True)
class Imported:
    key: str  # the conversation key the session was bootstrapped under
    conversation_id: int
    line_positions: dict[int, Position]  # source line -> the stored message
    # Stored user / assistant messages with prose -> (role, their text parts): what the
    # harness embeds (tool calls and tool output are left to full text, see recall_dense).
    messages: dict[Position, tuple[str, str]]


def line_client_ids(path: Path) -> dict[int, str]:
    """Each line's transcript entry id, as the importers name the message they store for it.

    A Claude Code line's ``uuid``, a pi v2+ entry's ``id``, else (pi v1) the
    hash of the entry the importer uses. Lines that store no message (headers,
    progress, compaction records) get an id too; they just never match.
    """
    ids = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if not isinstance(value, dict):
            continue
        own = value.get("uuid") if isinstance(value.get("uuid"), str) else value.get("id")
        ids[number] = own if isinstance(own, str) and own else content_id(value)
    return ids


def _session_key(source: str) -> str:
    return "recall-" + re.sub(r"[^a-z0-9]+", "-", Path(source).stem.lower()).strip("-")


def import_source(lcm: LcmClient, source: str) -> Imported:
    """Bootstrap ``source`` into its own conversation; map its lines to stored messages."""
    path = DATA / source
    key = _session_key(source)
    out = lcm.bootstrap(key, BootstrapIn(transcript_jsonl=path.read_text(encoding="utf-8")))
    assert out.conversation_id is not None, f"{source}: nothing imported"
    seq_of, messages = {}, {}
    for line in lcm.export(key, conversation_id=out.conversation_id).splitlines():
        record = json.loads(line)
        if record.get("type") != "message":
            continue
        text = " ".join(p["text"] for p in record["parts"] if p["part_type"] == "text").strip()
        if record["role"] in ("user", "assistant") and text:
            messages[(out.conversation_id, record["seq"])] = (record["role"], text)
        if record.get("client_id"):
            seq_of[record["client_id"]] = record["seq"]
    positions = {
        number: (out.conversation_id, seq_of[cid])
        for number, cid in line_client_ids(path).items()
        if cid in seq_of
    }
    print(
        f"  {source}: {out.imported} messages ({out.format}) as conversation {out.conversation_id}",
        flush=True,
    )
    return Imported(key, out.conversation_id, positions, messages)


def answer_groups(question: RecallQuestion, imported: Imported) -> list[set[Position]]:
    """The question's answer groups as stored messages; a line storing none is an error."""
    groups = []
    for group in question.answers:
        missing = [n for n in group if n not in imported.line_positions]
        if missing:
            raise ValueError(f"{question.id}: lines {missing} store no message")
        groups.append({imported.line_positions[n] for n in group})
    return groups


def imported_sources(
    lcm: LcmClient, sources: Sequence[str], keep: Path | None
) -> dict[str, Imported]:
    """Each source bootstrapped, or read back from ``keep`` where a run already imported it."""
    state = keep / "imported.json" if keep else None
    held: dict[str, Imported] = {}
    if state is not None and state.exists():
        held = {s: _thawed(v) for s, v in json.loads(state.read_text(encoding="utf-8")).items()}
    for source in sources:
        if source not in held:
            held[source] = import_source(lcm, source)
            if state is not None:
                frozen = {s: dataclasses.asdict(i) | _frozen(i) for s, i in held.items()}
                state.write_text(json.dumps(frozen), encoding="utf-8")
    return {s: held[s] for s in sources}


def _frozen(imported: Imported) -> dict[str, object]:
    return {
        "line_positions": [[n, *p] for n, p in imported.line_positions.items()],
        "messages": [[*p, *m] for p, m in imported.messages.items()],
    }


def _thawed(value: dict) -> Imported:
    return Imported(
        value["key"],
        value["conversation_id"],
        {n: (c, s) for n, c, s in value["line_positions"]},
        {(c, s): (role, text) for c, s, role, text in value["messages"]},
    )
