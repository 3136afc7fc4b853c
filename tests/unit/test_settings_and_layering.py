"""Settings defaults and the layering rule (the domain imports no HTTP, no queue)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from lcm.settings import Settings
from lcm.tokens import estimate_tokens


def test_design_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    s = Settings()
    assert (s.context_threshold, s.fresh_tail_count, s.leaf_min_fanout, s.leaf_chunk_tokens) == (
        0.75,
        64,
        8,
        20_000,
    )
    assert (
        s.condensed_min_fanout,
        s.condensed_min_fanout_hard,
        s.sweep_max_depth,
        s.max_rounds,
        s.large_file_token_threshold,
    ) == (4, 2, 1, 10, 25_000)
    assert s.database_url.startswith("sqlite:///")
    assert s.database_url.endswith("/.lcm/lcm.db")
    assert s.compaction_mode == "deferred"


def test_env_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LCM_FRESH_TAIL_COUNT", "12")
    monkeypatch.setenv("LCM_DATABASE_URL", "postgresql://u@h/db")
    s = Settings()
    assert s.fresh_tail_count == 12
    assert s.database_url == "postgresql://u@h/db"
    assert s.result_backend_url == s.broker_url


def test_bad_env_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LCM_CONTEXT_THRESHOLD", "1.5")
    with pytest.raises(ValueError, match="context_threshold"):
        Settings()


def test_prefix_target_derived_default() -> None:
    s = Settings()
    # max(condensed_target, min(leaf_chunk, floor(0.75 * budget * 0.5)))
    assert s.prefix_target_tokens(200_000) == 20_000
    assert s.prefix_target_tokens(20_000) == 7_500
    assert s.prefix_target_tokens(1_000) == s.condensed_target_tokens
    assert Settings(summary_prefix_target_tokens=999).prefix_target_tokens(200_000) == 999


def test_token_estimate_is_cjk_aware() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd" * 10) == 10
    assert estimate_tokens("你好世界") == 4
    assert estimate_tokens("こんにちは") == 5
    assert estimate_tokens("ab你好") == 3


def test_domain_imports_no_http_and_no_task_queue() -> None:
    code = (
        "import sys, pkgutil, importlib, lcm\n"
        "for m in pkgutil.walk_packages(lcm.__path__, 'lcm.'):\n"
        "    if '.migrations' not in m.name: importlib.import_module(m.name)\n"
        "bad = [n for n in sys.modules if n.split('.')[0] in ('fastapi', 'starlette', 'celery')]\n"
        "print(bad); sys.exit(1 if bad else 0)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.mark.parametrize("value", ["operator", ":pw", "a:pw,broken", "user:"])
def test_flower_auth_must_be_user_password_pairs(value: str) -> None:
    with pytest.raises(ValueError, match="user:password"):
        Settings(flower_basic_auth=value)


def test_flower_auth_blank_is_none_and_pairs_are_kept() -> None:
    assert Settings(flower_basic_auth=" ").flower_basic_auth is None
    auth = Settings(flower_basic_auth="a:1,b:x:y").flower_basic_auth
    assert auth is not None
    assert auth.get_secret_value() == "a:1,b:x:y"
