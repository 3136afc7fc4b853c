"""The doctor's structural checks and repairs: what assembly and ingest rely on.

Beside unhealthy summaries (``service.diagnose``), a conversation can be
broken in its structure, by a bug, a manual edit or an import made before
imports were checked:

- ``dangling_items``: context items pointing nowhere (neither a message nor
  a summary, both, or a row that is not theirs). Assembly cannot render them.
  Repair: drop them.
- ``counters_behind``: ``last_seq`` / ``last_ordinal`` below a stored row's
  seq / ordinal; the next ingest would take a taken number and fail.
  Repair: raise the counter to the stored maximum. Ordinals are never
  renumbered: they only grow and may have gaps (a pass puts its summary at
  its range's first ordinal), and plans in flight name them; gaps are
  normal and not reported. Duplicates cannot be stored (a unique key).
- ``miscounted``: stored token counts that differ from the recomputed ones
  (a message's estimate, a summary's, a context item's cost as assembly
  counts it); budgets are planned from them. Repair: recompute. A summary's
  stored source range (messages below it, first and last seq: what describe
  reports) that differs from its sources' is listed as
  ``source_range:<id>``. Repair: recompute the conversation's ranges,
  bottom-up (``lcm.compaction.source_ranges``).

What cannot be repaired is reported: a summary without sources (``broken``)
cannot be re-linked to sources it lost.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace

from sqlalchemy.orm import Session

from lcm.assembly import summary_context_tokens
from lcm.content import IMAGE_TOKEN_ESTIMATE
from lcm.context_store.repository import summary_view
from lcm.db.models import ContextItem, Message, Summary
from lcm.doctor.repository import DoctorRepository
from lcm.doctor.structure_repository import StructureRepository
from lcm.tokens import estimate_tokens

DOCTOR_LIMIT = 10_000


@dataclass(slots=True)
class StructuralFindings:
    """One conversation's structural problems (names as in the doctor's report)."""

    dangling_items: list[int] = field(default_factory=list)  # ordinals
    counters_behind: list[str] = field(default_factory=list)  # "last_seq" / "last_ordinal"
    miscounted: list[str] = field(default_factory=list)  # message:<seq>, summary:<id>, ...
    # What a repair would write: (model, row id, token count).
    recounts: list[tuple[type[Message] | type[Summary] | type[ContextItem], int | str, int]] = (
        field(default_factory=list)
    )
    counters: tuple[int, int] | None = None  # (max seq, max ordinal) when behind
    misranged: list[str] = field(default_factory=list)  # summary ids, also in miscounted

    def __bool__(self) -> bool:
        return bool(self.dangling_items or self.counters_behind or self.miscounted)


@dataclass(frozen=True, slots=True)
class StructuralRepair:
    conversation_id: int
    dropped_items: list[int]
    counters_raised: list[str]
    recounted: int
    unrepairable: list[str]


def find_structural(
    session: Session, tenant_id: str, conversation_id: int | None
) -> dict[int, StructuralFindings]:
    """Structural problems by conversation (only conversations that have some)."""
    repo = StructureRepository(session)
    found: dict[int, StructuralFindings] = defaultdict(StructuralFindings)
    dangling: set[tuple[int, int]] = set()
    for cid, ordinal in repo.dangling_items(tenant_id, conversation_id):
        found[cid].dangling_items.append(ordinal)
        dangling.add((cid, ordinal))
    for c in repo.counters(tenant_id, conversation_id):
        entry = found[c.conversation_id]
        entry.counters_behind += [
            name
            for name, behind in (
                ("last_seq", c.max_seq > c.last_seq),
                ("last_ordinal", c.max_ordinal > c.last_ordinal),
            )
            if behind
        ]
        entry.counters = (max(c.max_seq, c.last_seq), max(c.max_ordinal, c.last_ordinal))
    _find_miscounted(repo, tenant_id, conversation_id, found, dangling)
    for cid, sid in repo.misranged(tenant_id, conversation_id):
        found[cid].misranged.append(sid)
        found[cid].miscounted.append(f"source_range:{sid}")
    return {cid: f for cid, f in found.items() if f}


def _find_miscounted(
    repo: StructureRepository,
    tenant_id: str,
    conversation_id: int | None,
    found: dict[int, StructuralFindings],
    dangling: set[tuple[int, int]],
) -> None:
    items = [
        row
        for row in repo.item_costs(tenant_id, conversation_id)
        if (row[0], row[2]) not in dangling
    ]
    shown = {row[3] for row in items if row[3] is not None}
    message_tokens: dict[int, int] = {}  # messages in a context: what their items cost
    for cid, mid, seq, content, stored, images in repo.messages_with_counts(
        tenant_id, conversation_id
    ):
        tokens = estimate_tokens(content) + images * IMAGE_TOKEN_ESTIMATE
        if mid in shown:
            message_tokens[mid] = tokens
        if tokens != stored:
            found[cid].miscounted.append(f"message:{seq}")
            found[cid].recounts.append((Message, mid, tokens))
    summaries = repo.summaries(tenant_id, conversation_id)
    parents = repo.parent_ids([s.id for s in summaries])
    summary_tokens: dict[str, int] = {}
    for s in summaries:
        tokens = estimate_tokens(s.content)
        if tokens != s.token_count and conversation_id in (None, s.conversation_id):
            found[s.conversation_id].miscounted.append(f"summary:{s.id}")
            found[s.conversation_id].recounts.append((Summary, s.id, tokens))
        view = replace(summary_view(s, parents.get(s.id, [])), token_count=tokens)
        summary_tokens[s.id] = summary_context_tokens(view)
    for cid, item_id, ordinal, item_message, sid, stored in items:
        expected = (
            summary_tokens.get(sid) if sid is not None else message_tokens.get(item_message or 0)
        )
        if expected is not None and expected != stored:
            found[cid].miscounted.append(f"context_item:{ordinal}")
            found[cid].recounts.append((ContextItem, item_id, expected))


def repair_structure(
    session: Session, tenant_id: str, conversation_id: int | None
) -> list[StructuralRepair]:
    """Repair what ``find_structural`` finds; report what cannot be (``broken`` summaries).

    Each conversation's row is locked, then its problems are read again, so
    the repair is ordered with ingest and with a compaction pass's commit;
    the context version is bumped when the context changed, so a pass
    planned before fails its check and plans again.
    """
    repo = StructureRepository(session)
    broken: dict[int, list[str]] = defaultdict(list)
    for row in DoctorRepository(session).unhealthy(tenant_id, conversation_id, DOCTOR_LIMIT):
        if "broken" in row.problems:
            broken[row.conversation_id].append(row.summary_id)
    repairs = []
    for cid in sorted(set(find_structural(session, tenant_id, conversation_id)) | set(broken)):
        conversation = repo.lock(cid)
        if conversation is None:
            continue
        found = find_structural(session, tenant_id, cid).get(cid, StructuralFindings())
        repo.drop_items(cid, found.dangling_items)
        if found.counters is not None:
            conversation.last_seq, conversation.last_ordinal = found.counters
        for model, row_id, tokens in found.recounts:
            repo.set_tokens(model, row_id, tokens)
        if found.misranged:
            repo.recompute_ranges(cid)
        if found.dangling_items or any(m is ContextItem for m, _, _ in found.recounts):
            conversation.context_version += 1
        repairs.append(
            StructuralRepair(
                cid,
                found.dangling_items,
                found.counters_behind,
                len(found.recounts) + len(found.misranged),
                [f"summary {sid} has no sources" for sid in broken.get(cid, [])],
            )
        )
    session.flush()
    return repairs
