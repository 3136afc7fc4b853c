"""The client's pure parts: Retry-After parsing, the retry rule, what it shares with the domain."""

from __future__ import annotations

import dataclasses
import importlib
import random
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest

from api import contract
from lcm.db.models.conversations import HOST_CURSOR_MAX
from lcm.retrieval.expand import MAX_SUMMARY_IDS
from lcm.retrieval.grep import MAX_LIMIT
from lcm.settings import MAX_TOKENS
from lcm.surgery import MAX_INSTRUCTIONS_CHARS
from lcm_client.retries import RetryPolicy, retry_after


def test_contract_limits_are_the_domains() -> None:
    assert contract.MAX_TOKENS == MAX_TOKENS
    assert contract.MAX_GREP_LIMIT == MAX_LIMIT
    assert contract.MAX_SUMMARY_IDS == MAX_SUMMARY_IDS
    assert contract.HOST_CURSOR_MAX == HOST_CURSOR_MAX  # the column's length
    assert contract.tenant.MAX_INSTRUCTIONS_CHARS == MAX_INSTRUCTIONS_CHARS


def _response(status: int, value: str | None) -> httpx.Response:
    return httpx.Response(status, headers={"Retry-After": value} if value is not None else {})


def test_retry_after_in_seconds_or_as_an_http_date() -> None:
    assert retry_after(_response(503, "2")) == 2.0
    assert retry_after(_response(503, None)) is None
    assert retry_after(_response(503, "soon")) is None
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    assert 28 <= (retry_after(_response(503, later)) or 0) <= 30
    past = format_datetime(datetime.now(UTC) - timedelta(hours=1), usegmt=True)
    assert retry_after(_response(503, past)) == 0.0


def test_jitter_only_adds_and_stays_within_its_share() -> None:
    policy = RetryPolicy(jitter=0.2, rng=random.Random(7))
    delays = [policy.after_response(_response(429, "1"), 0, True) for _ in range(200)]
    assert all(d is not None and 1.0 <= d <= 1.2 for d in delays)
    assert len(set(delays)) > 100  # spread, not one instant for every client


def test_what_is_retried() -> None:
    policy = RetryPolicy(max_retries=2)
    assert policy.after_response(_response(503, None), 0, replayable=False) is None
    assert policy.after_response(_response(500, None), 0, replayable=True) is None
    assert policy.after_response(_response(503, None), 2, replayable=True) is None  # exhausted
    assert policy.after_response(_response(503, None), 1, replayable=True) is not None
    refused = httpx.ConnectError("refused")
    lost = httpx.RemoteProtocolError("server disconnected")
    assert policy.after_transport_error(refused, 0, replayable=False) is not None
    assert policy.after_transport_error(lost, 0, replayable=False) is None
    assert policy.after_transport_error(lost, 0, replayable=True) is not None


# The API answers these from the domain's dataclasses (``to_jsonable``), and
# the contract declares the same shapes for the client without importing the
# domain: a field added to or dropped from either side must be in both.
MIRRORED = {
    "ConversationStatus": "lcm.status.service:ConversationStatus",
    "GrepResult": "lcm.retrieval.grep:GrepResult",
    "GrepMatch": "lcm.retrieval.grep:GrepMatch",
    "SummaryDescription": "lcm.retrieval.describe:SummaryDescription",
    "FileDescription": "lcm.retrieval.describe:FileDescription",
    "FileContent": "lcm.retrieval.describe:FileContent",
    "SourceRange": "lcm.retrieval.describe:SourceRange",
    "Expansion": "lcm.retrieval.expand:Expansion",
    "ExpandedNode": "lcm.retrieval.expand:ExpandedNode",
    "ExpandedMessage": "lcm.retrieval.expand:ExpandedMessage",
    "Omitted": "lcm.retrieval.expand:Omitted",
    "ExpandQueryAnswer": "lcm.retrieval.answers:ExpandQueryAnswer",
    "Usage": "lcm.retrieval.answers:Usage",
    "ConversationItemOut": "lcm.conversations.listing:ListedConversation",
    "ConversationListOut": "lcm.conversations.listing:ConversationPage",
    "ImportOut": "lcm.transfer.service:Imported",
    "UsageLineOut": "lcm.tenants.usage:UsageLine",
    "KeyOut": "lcm.tenants.keys:KeyInfo",
    "SecretScanOut": "lcm.secrets.scans:ScanProgress",
}


@pytest.mark.parametrize(("model", "domain"), sorted(MIRRORED.items()))
def test_contract_models_mirror_the_domain_dataclasses(model: str, domain: str) -> None:
    module, name = domain.split(":")
    dataclass_type = getattr(importlib.import_module(module), name)
    contract_fields = set(getattr(contract, model).model_fields)
    assert contract_fields == {f.name for f in dataclasses.fields(dataclass_type)}


def test_the_contracts_scopes_are_the_domains() -> None:
    from lcm.tenants.keys import SCOPES

    assert tuple(SCOPES) == contract.SCOPES
