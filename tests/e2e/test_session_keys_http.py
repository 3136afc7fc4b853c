"""Session keys over HTTP: one NFC form, and no character that does not show."""

from __future__ import annotations

import unicodedata
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from lcm.db.engine import Database
from lcm.db.models import Conversation
from lcm.tenants.service import IssuedKey
from tests.conftest import auth

MESSAGES = {"messages": [{"role": "user", "content": "hello"}]}
TURN = {**MESSAGES, "token_budget": 1000}

REFUSED = [
    ("\x07", "a control character"),
    ("\x1b", "a control character"),
    ("\x7f", "a control character"),
    ("\u0085", "a control character"),
    ("\u200b", "a zero-width character"),
    ("\u200c", "a zero-width character"),
    ("\u200d", "a zero-width character"),
    ("\u2060", "a zero-width character"),
    ("\ufeff", "a zero-width character"),
    ("\u202a", "a bidirectional override or isolate"),
    ("\u202e", "a bidirectional override or isolate"),
    ("\u2066", "a bidirectional override or isolate"),
    ("\u2069", "a bidirectional override or isolate"),
    ("\u00ad", "a format character"),  # SOFT HYPHEN
    ("\U000e0001", "a format character"),  # LANGUAGE TAG
]


def _post(client: TestClient, tenant: IssuedKey, key: str, path: str, body: object) -> Any:
    url = f"/v1/conversations/{quote(key, safe='')}/{path}"
    return client.post(url, headers=auth(tenant), json=body)


def _keys(db: Database) -> list[str]:
    with db.session() as s:
        return list(s.scalars(select(Conversation.session_key)))


def test_nfd_and_nfc_forms_are_one_conversation(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    nfc = unicodedata.normalize("NFC", "agent:café:Å")
    nfd = unicodedata.normalize("NFD", nfc)
    assert nfc != nfd
    first = _post(client, tenant, nfc, "messages", MESSAGES)
    second = _post(client, tenant, nfd, "messages", MESSAGES)
    turn = _post(client, tenant, nfd, "turns", TURN)
    assembled = _post(client, tenant, nfd, "assemble", {"token_budget": 1000})
    for answer in (first, second, turn, assembled):
        assert answer.status_code == 200, answer.text
    ids = {a.json()["conversation_id"] for a in (first, second, turn)}
    assert len(ids) == 1
    assert _keys(db) == [nfc]
    # a key given in a body (a tool's scope) is the same key
    grep = {"pattern": "hello", "mode": "full_text", "session_key": nfd}
    found = client.post("/v1/grep", headers=auth(tenant), json=grep)
    assert found.status_code == 200, found.text
    assert found.json()["matches"]


@pytest.mark.parametrize(("char", "what"), REFUSED)
def test_keys_with_invisible_characters_are_refused_and_not_stored(
    client: TestClient, tenant: IssuedKey, db: Database, char: str, what: str
) -> None:
    key = f"agent:{char}main"
    for path, body in (
        ("messages", MESSAGES),
        ("turns", TURN),
        ("assemble", {"token_budget": 1000}),
        ("bootstrap", {"transcript_jsonl": ""}),
    ):
        answer = _post(client, tenant, key, path, body)
        assert answer.status_code == 400, (path, answer.text)
        error = answer.json()["error"]
        assert error["code"] == "invalid_session_key", error
        assert what in error["message"]
        assert f"U+{ord(char):04X}" in error["message"]
    grep = {"pattern": "hello", "session_key": key}
    refused = client.post("/v1/grep", headers=auth(tenant), json=grep)
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == "invalid_session_key"
    assert _keys(db) == []
