"""Import is checked like ingest, all or nothing: a bad file is a 4xx naming the line.

The fixture is a real export of a small compacted conversation (leaf and
condensed summaries, a tool call, a stored file), its original erased so
its ids are free. The property test mutates it (records dropped,
duplicated, retyped; fields removed or set out of range; references left
dangling) and holds every answer to: a 4xx, or a conversation on which
assemble, grep, describe, expand, export and the console page all answer
without a 5xx.
"""

from __future__ import annotations

import copy
import itertools
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select

from lcm.db.engine import Database
from lcm.db.models import ContextItem, Conversation, Message, Summary
from lcm.settings import Settings
from lcm.tenants.service import IssuedKey
from lcm.tokens import estimate_tokens
from tests.conftest import auth
from tests.e2e.test_console_snapshot import signed_in
from tests.integration.erasure_world import (
    COMPACTION,
    api,  # noqa: F401  (fixture)
    compact,
    files_dir,  # noqa: F401  (fixture)
    messages,
    post,
)
from tests.integration.test_transfer import TOOL_TURN

Records = list[dict[str, Any]]


@pytest.fixture
def world_settings(db: Database, files_dir: Path) -> Settings:  # noqa: F811
    # A low file threshold: a 2 KB pasted file is stored outside the row.
    update = {"files_dir": files_dir, "large_file_token_threshold": 200, **COMPACTION}
    return db.settings.model_copy(update=update)


@pytest.fixture
def exported(
    db: Database,
    tenant: IssuedKey,
    api: TestClient,  # noqa: F811
    world_settings: Settings,
) -> Records:
    """A compacted conversation's export, the conversation itself erased."""
    cid = post(api, "src", tenant.api_key, messages(50, seed=7, marker="fz"))
    post(api, "src", tenant.api_key, TOOL_TURN)
    pasted = "pasted log line\n" * 120
    file_turn: dict[str, object] = {
        "role": "user",
        "content": f'see <file name="a.log">{pasted}</file>',
    }
    post(api, "src", tenant.api_key, [file_turn])
    post(api, "src", tenant.api_key, messages(30, seed=8, marker="fz", start=50))
    compact(db, world_settings, tenant.tenant_id, cid)
    r = api.get("/v1/conversations/src/export", headers=auth(tenant))
    assert r.status_code == 200
    records = [json.loads(line) for line in r.text.splitlines()]
    kinds = Counter(r["type"] for r in records)
    assert kinds["file"] == 1
    assert {s["kind"] for s in records if s["type"] == "summary"} == {"leaf", "condensed"}
    assert api.delete("/v1/conversations/src", headers=auth(tenant)).status_code == 204
    return records


def body(records: Records) -> bytes:
    return "\n".join(json.dumps(r) for r in records).encode()


def first(records: Records, record_type: str, **match: Any) -> dict[str, Any]:
    return next(
        r
        for r in records
        if r["type"] == record_type and all(r.get(k) == v for k, v in match.items())
    )


def line_of(records: Records, record: dict[str, Any]) -> int:
    return next(i for i, r in enumerate(records, start=1) if r is record)


def stored_messages(db: Database) -> int:
    with db.read_session() as s:
        return int(s.scalar(select(func.count()).select_from(Message)) or 0)


def _repeated_seq(records: Records) -> dict[str, Any]:
    message = first(records, "message")
    records.insert(line_of(records, message), copy.deepcopy(message))
    return records[line_of(records, message)]


def _huge_tokens(records: Records) -> dict[str, Any]:
    message = first(records, "message")
    message["token_count"] = 10**20
    return message


def _int64_seq(records: Records) -> dict[str, Any]:
    message = first(records, "message")
    message["seq"] = 2**63
    return message


def _bad_base64(records: Records) -> dict[str, Any]:
    file = first(records, "file")
    file.update(encoding="base64", content="not base64 at all!")
    return file


def _repeated_ordinal(records: Records) -> dict[str, Any]:
    items = [r for r in records if r["type"] == "context_item"]
    items[1]["ordinal"] = items[0]["ordinal"]
    return items[1]


def _repeated_leaf_source(records: Records) -> dict[str, Any]:
    leaf = first(records, "summary", kind="leaf")
    leaf["message_seqs"].append(leaf["message_seqs"][0])
    return leaf


def _item_pointing_nowhere(records: Records) -> dict[str, Any]:
    item = {"type": "context_item", "ordinal": 10**6, "item_type": "message", "token_count": 1}
    records.append(item)
    return item


def _dangling_summary(records: Records) -> dict[str, Any]:
    item = {
        "type": "context_item",
        "ordinal": 10**6,
        "item_type": "summary",
        "summary_id": "sum_00000000000000ff",
        "token_count": 1,
    }
    records.append(item)
    return item


def _lost_message(records: Records) -> dict[str, Any]:
    item = next(r for r in reversed(records) if r["type"] == "context_item" and r["message_seq"])
    records.remove(item)
    return first(records, "message", seq=item["message_seq"])


MALFORMED = {
    "repeated seq": _repeated_seq,
    "token_count 10^20": _huge_tokens,
    "seq 2^63": _int64_seq,
    "invalid base64": _bad_base64,
    "repeated context ordinal": _repeated_ordinal,
    "leaf naming a message twice": _repeated_leaf_source,
    "context item with neither seq nor summary": _item_pointing_nowhere,
    "summary neither the file nor the tenant holds": _dangling_summary,
    "message no context item reaches": _lost_message,
}


@pytest.mark.parametrize("name", MALFORMED)
def test_a_malformed_record_is_refused_whole_naming_its_line(
    db: Database,
    tenant: IssuedKey,
    api: TestClient,  # noqa: F811
    exported: Records,
    name: str,
) -> None:
    records = copy.deepcopy(exported)
    bad = MALFORMED[name](records)
    r = api.post("/v1/conversations/bad/import", headers=auth(tenant), content=body(records))
    assert r.status_code == 400, r.text
    message = r.json()["error"]["message"]
    assert f"line {line_of(records, bad)}" in message, message
    assert stored_messages(db) == 0  # nothing written
    assert api.get("/v1/conversations/bad/status", headers=auth(tenant)).status_code == 404


def test_a_message_over_ingests_limit_is_refused(
    db: Database,
    tenant: IssuedKey,
    api: TestClient,  # noqa: F811
    exported: Records,
    world_settings: Settings,
) -> None:
    records = copy.deepcopy(exported)
    message = first(records, "message", content_shape="text")
    message["content"] = "x" * (world_settings.max_message_chars + 1)
    r = api.post("/v1/conversations/big/import", headers=auth(tenant), content=body(records))
    assert r.status_code == 413, r.text
    assert f"line {line_of(records, message)}" in r.json()["error"]["message"]
    assert stored_messages(db) == 0


def test_token_counts_are_recomputed_never_taken_from_the_file(
    db: Database,
    tenant: IssuedKey,
    api: TestClient,  # noqa: F811
    exported: Records,
) -> None:
    records = copy.deepcopy(exported)
    for record in records:
        if "token_count" in record:
            record["token_count"] = 1
    big = first(records, "message", content_shape="text")
    big["content"] = "lorem ipsum dolor " * 20_000  # 360,000 characters
    r = api.post("/v1/conversations/honest/import", headers=auth(tenant), content=body(records))
    assert r.status_code == 200, r.text
    cid = r.json()["conversation_id"]
    with db.read_session() as s:
        rows = s.scalars(select(Message).where(Message.conversation_id == cid)).all()
        assert all(m.token_count == estimate_tokens(m.content) for m in rows)
        assert max(m.token_count for m in rows) == 90_000
        summaries = s.scalars(select(Summary).where(Summary.conversation_id == cid)).all()
        assert all(x.token_count == estimate_tokens(x.content) for x in summaries)
        items = s.scalars(select(ContextItem).where(ContextItem.conversation_id == cid)).all()
        assert all(i.token_count > 1 for i in items)
    a = api.post(
        "/v1/conversations/honest/assemble", headers=auth(tenant), json={"token_budget": 1_000}
    )
    assert a.status_code == 200, a.text
    size = len(json.dumps(a.json()["messages"]))
    # What it reports is what it returns, within the estimate's slack.
    assert a.json()["estimated_tokens"] * 8 >= size / 4


# --- the property test ---------------------------------------------------------------

ODD_VALUES: list[Any] = [
    None,
    -1,
    0,
    1,
    2**31,
    2**53,
    2**63,
    10**20,
    1.5,
    True,
    "",
    "x",
    "sum_00000000000000ff",
    "file_ff",
    [],
    [1, 1],
    {},
    "9999-12-31T23:59:59-14:00",
    "2026-01-01T00:00:00",
]
TYPES = ["conversation", "message", "file", "summary", "context_item", "other"]


@st.composite
def mutated(draw: st.DrawFn, records: Records) -> Records:
    """``records`` with 0 to 3 mutations."""
    out = copy.deepcopy(records)
    for _ in range(draw(st.integers(0, 3))):
        i = draw(st.integers(0, len(out) - 1))
        record = out[i]
        action = draw(
            st.sampled_from(["drop", "duplicate", "retype", "remove", "set", "list", "swap"])
        )
        if action == "drop":
            del out[i]
        elif action == "duplicate":
            out.insert(draw(st.integers(0, len(out))), copy.deepcopy(record))
        elif action == "retype":
            record["type"] = draw(st.sampled_from(TYPES))
        elif action in ("remove", "set") and record:
            key = draw(st.sampled_from(sorted(record)))
            if action == "remove":
                del record[key]
            else:
                record[key] = draw(_value_for(out))
        elif action == "list":
            _mutate_list(draw, out, record)
        elif action == "swap":
            other = out[draw(st.integers(0, len(out) - 1))]
            key = draw(st.sampled_from(sorted(set(record) & set(other)) or ["type"]))
            record[key], other[key] = other.get(key), record.get(key)
        if not out:
            break
    return out


def _value_for(records: Records) -> st.SearchStrategy[Any]:
    seqs = [r["seq"] for r in records if isinstance(r.get("seq"), int)]
    ids = [r["id"] for r in records if isinstance(r.get("id"), str)]
    return st.sampled_from(ODD_VALUES + seqs[:5] + seqs[-5:] + ids)


def _mutate_list(draw: st.DrawFn, records: Records, record: dict[str, Any]) -> None:
    lists = sorted(k for k, v in record.items() if isinstance(v, list))
    if not lists:
        return
    values = record[draw(st.sampled_from(lists))]
    how = draw(st.sampled_from(["append_same", "pop", "append_odd", "part_payload"]))
    if how == "append_same" and values:
        values.append(copy.deepcopy(values[draw(st.integers(0, len(values) - 1))]))
    elif how == "pop" and values:
        values.pop(draw(st.integers(0, len(values) - 1)))
    elif how == "append_odd":
        values.append(draw(_value_for(records)))
    elif how == "part_payload" and values and isinstance(values[0], dict):
        part = values[draw(st.integers(0, len(values) - 1))]
        payload = part.get("payload")
        if isinstance(payload, dict) and payload:
            key = draw(st.sampled_from(sorted(payload)))
            payload[key] = draw(_value_for(records))


def usable(client: TestClient, tenant: IssuedKey, key: str, conversation_id: int) -> list[str]:
    """What answered 5xx (or not 200) on an imported conversation."""
    headers = auth(tenant)
    with_key = {"session_key": key}
    answers = {
        "assemble": client.post(
            f"/v1/conversations/{key}/assemble", headers=headers, json={"token_budget": 1_000}
        ),
        "assemble_large": client.post(
            f"/v1/conversations/{key}/assemble", headers=headers, json={"token_budget": 200_000}
        ),
        "grep": client.post("/v1/grep", headers=headers, json={"pattern": "fz", **with_key}),
        "grep_text": client.post(
            "/v1/grep",
            headers=headers,
            json={"pattern": "deploy", "mode": "full_text", "scope": "both", **with_key},
        ),
        "export": client.get(f"/v1/conversations/{key}/export", headers=headers),
        "console": client.get(f"/console/conversations/{conversation_id}?budget=1000"),
        "status": client.get(f"/v1/conversations/{key}/status", headers=headers),
    }
    summary_ids = [
        json.loads(line)["id"]
        for line in answers["export"].text.splitlines()
        if answers["export"].status_code == 200 and json.loads(line)["type"] == "summary"
    ]
    for sid in summary_ids[:3]:
        answers[f"describe {sid}"] = client.get(f"/v1/summaries/{sid}", headers=headers)
    if summary_ids:
        answers["expand"] = client.post(
            "/v1/expand", headers=headers, json={"summary_ids": summary_ids[-2:]}
        )
    return [
        f"{name}: {r.status_code} {r.text[:300]}"
        for name, r in answers.items()
        if r.status_code != 200
    ]


PROBES = 200


def test_mutated_imports_are_refused_or_fully_usable(
    db: Database,
    tenant: IssuedKey,
    api: TestClient,  # noqa: F811
    exported: Records,
) -> None:
    signed_in(api, tenant.api_key)
    tally: Counter[str] = Counter()
    keys = itertools.count()

    @settings(
        max_examples=PROBES,
        deadline=None,
        database=None,  # no example database written into the tree
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(st.data())
    def probe(data: st.DataObject) -> None:
        records = data.draw(mutated(exported))
        key = f"fuzz-{next(keys)}"
        r = api.post(f"/v1/conversations/{key}/import", headers=auth(tenant), content=body(records))
        assert r.status_code < 500, r.text
        if r.status_code >= 400:
            tally[str(r.status_code)] += 1
            with db.read_session() as s:
                found = s.scalar(select(Conversation.id).where(Conversation.session_key == key))
            assert found is None, "a refused import left a conversation"
            return
        failures = usable(api, tenant, key, r.json()["conversation_id"])
        assert not failures, failures
        tally["accepted"] += 1
        # Its ids (files, summaries) free again for the next probe.
        assert api.delete(f"/v1/conversations/{key}", headers=auth(tenant)).status_code == 204

    probe()
    print(f"import probes: {sum(tally.values())}, {dict(tally)}")
    assert tally["accepted"] > 0
    assert sum(v for k, v in tally.items() if k != "accepted") > 0
