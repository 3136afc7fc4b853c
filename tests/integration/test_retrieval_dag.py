"""describe and expand on real databases: the DAG walked back to the exact originals."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from lcm.db.engine import Database
from lcm.db.models import ContextItem, LargeFile, Summary
from lcm.errors import InvalidInput, NotFound
from lcm.retrieval.describe import SummaryDescription, describe, describe_summary
from lcm.retrieval.expand import expand
from lcm.tenants.service import IssuedKey
from tests.conftest import new_tenant
from tests.integration.retrieval_data import compact, ingest


def conversation(n: int) -> list[Any]:
    """Strings and block messages, tool calls included, in user/assistant order."""
    out: list[Any] = []
    for i in range(n // 2):
        if i % 3 == 1:
            out.append([{"type": "text", "text": f"please list files, round {i}"}])
            out.append(
                [
                    {"type": "text", "text": "calling the tool"},
                    {"type": "tool_use", "id": f"toolu_{i}", "name": "ls", "input": {"p": "/"}},
                ]
            )
        else:
            out.append(f"user question {i} about the deploy pipeline " + "and its stages " * 8)
            out.append(f"assistant answer {i}: the pipeline runs stage {i}")
    return out


def summary_ids_in_context(db: Database, conversation_id: int) -> list[str]:
    with db.session() as s:
        return [
            str(sid)
            for sid in s.scalars(
                select(ContextItem.summary_id)
                .where(
                    ContextItem.conversation_id == conversation_id,
                    ContextItem.summary_id.is_not(None),
                )
                .order_by(ContextItem.ordinal)
            )
        ]


@pytest.fixture
def compacted(db: Database, tenant: IssuedKey) -> tuple[int, list[Any]]:
    sent = conversation(40)
    cid = ingest(db, tenant.tenant_id, "agent:main", sent)
    compact(db, tenant.tenant_id, cid)
    return cid, sent


def test_expand_returns_the_exact_original_messages(
    db: Database, tenant: IssuedKey, compacted: tuple[int, list[Any]]
) -> None:
    cid, sent = compacted
    tops = summary_ids_in_context(db, cid)
    assert tops, "compaction produced no summary"
    with db.session() as s:
        expansion = expand(s, tenant.tenant_id, tops, token_cap=1_000_000)
    assert not expansion.truncated
    assert expansion.omitted.messages == 0
    seqs = [m.seq for m in expansion.messages]
    assert seqs == list(range(1, len(seqs) + 1)), "in history order, no gap, no repeat"
    assert len(seqs) == len(sent) - 4  # everything but the fresh tail
    for m in expansion.messages:
        role = "user" if m.seq % 2 == 1 else "assistant"
        assert m.message == {"role": role, "content": sent[m.seq - 1]}
    assert all(m.ref == f"msg_{m.id}" for m in expansion.messages)
    assert expansion.tokens == sum(m.token_count for m in expansion.messages)


def test_expand_within_a_token_cap_says_what_was_cut(
    db: Database, tenant: IssuedKey, compacted: tuple[int, list[Any]]
) -> None:
    cid, _sent = compacted
    tops = summary_ids_in_context(db, cid)
    with db.session() as s:
        full = expand(s, tenant.tenant_id, tops, token_cap=1_000_000)
        cap = sum(m.token_count for m in full.messages[:5]) + 1
        capped = expand(s, tenant.tenant_id, tops, token_cap=cap)
    assert [m.id for m in capped.messages] == [m.id for m in full.messages[:5]]
    assert capped.truncated
    assert capped.tokens <= cap
    assert capped.omitted.messages == len(full.messages) - 5
    assert capped.omitted.tokens == full.tokens - capped.tokens
    assert capped.omitted.first_seq == 6
    assert capped.omitted.leaf_ids
    assert capped.omitted.leaf_ids[0] == capped.messages[-1].summary_id


def test_describe_a_condensed_summary(
    db: Database, tenant: IssuedKey, compacted: tuple[int, list[Any]]
) -> None:
    cid, _sent = compacted
    with db.session() as s:
        condensed = s.scalars(select(Summary).where(Summary.kind == "condensed")).first()
        assert condensed is not None
        described = describe(s, tenant.tenant_id, condensed.id)
        assert isinstance(described, SummaryDescription)
        leaf = describe_summary(s, tenant.tenant_id, described.parents[0])
    assert described.kind == "condensed"
    assert described.depth == 1
    assert described.session_key == "agent:main"
    assert described.conversation_id == cid
    assert described.parents
    assert leaf.children == [described.id]
    assert leaf.kind == "leaf"
    assert leaf.parents == []
    assert described.source_messages.message_count == described.descendant_count
    assert described.source_messages.first_seq == leaf.source_messages.first_seq
    assert described.in_context
    assert not leaf.in_context
    assert described.earliest_at <= described.latest_at


def test_other_tenants_ids_are_indistinguishable_from_missing(
    db: Database, tenant: IssuedKey, compacted: tuple[int, list[Any]]
) -> None:
    cid, _sent = compacted
    other = new_tenant(db, "other")
    top = summary_ids_in_context(db, cid)[0]
    with db.session() as s:
        s.add(
            LargeFile(
                id="file_00aa11",
                tenant_id=tenant.tenant_id,
                conversation_id=cid,
                byte_size=10,
                token_count=3,
                sha256="0" * 64,
                storage_uri="file:///x",
            )
        )
        s.commit()
        messages = []
        for node in (top, "sum_0000000000000000", "file_00aa11", "file_ffffff"):
            with pytest.raises(NotFound) as caught:
                describe(s, other.tenant_id, node)
            messages.append(caught.value.message.replace(node, "<id>"))
        with pytest.raises(NotFound):
            expand(s, other.tenant_id, [top], 1000)
        # Under a grant, a conversation outside it reads as missing too.
        with pytest.raises(NotFound):
            describe(s, tenant.tenant_id, top, allowed_conversations={cid + 1})
        with pytest.raises(NotFound):
            expand(s, tenant.tenant_id, [top], 1000, allowed_conversations={cid + 1})
        assert describe(s, tenant.tenant_id, "file_00aa11").conversation_id == cid
        with pytest.raises(InvalidInput):
            describe(s, tenant.tenant_id, "msg_1")
    assert messages[0] == messages[1]
    assert messages[2] == messages[3]
