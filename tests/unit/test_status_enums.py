"""Status values are enums whose values are the strings the database stores.

The columns hold plain strings (no migration came with the enums): a renamed
value would strand every stored row, so the values are pinned here.
"""

from __future__ import annotations

import json
from enum import StrEnum

import pytest

from lcm.compaction import DebtStatus, StepAction
from lcm.lifecycle.forks import ForkStatus
from lcm.summarize import BreakerState


@pytest.mark.parametrize(
    ("enum", "stored"),
    [
        (DebtStatus, ["pending", "running", "done", "failed"]),
        (ForkStatus, ["active", "ended", "rolled_back"]),
        (StepAction, ["noop", "pass", "done", "retry", "failed", "paused"]),
        (BreakerState, ["closed", "open", "half_open"]),
    ],
)
def test_values_are_the_stored_strings(enum: type[StrEnum], stored: list[str]) -> None:
    assert [member.value for member in enum] == stored
    for member, text in zip(enum, stored, strict=True):
        # Compared, formatted and serialized as the bare string it replaced.
        assert member == text
        assert str(member) == text
        assert f"{member}" == text
        assert json.dumps(member) == json.dumps(text)


def test_a_value_read_back_from_the_database_is_the_member() -> None:
    assert DebtStatus("failed") is DebtStatus.FAILED
    assert "running" in (DebtStatus.PENDING, DebtStatus.RUNNING)
