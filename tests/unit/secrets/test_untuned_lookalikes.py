"""Look-alikes the untuned-data check found in real transcripts (docs/secrets.md): each was
flagged before its fix, and a real secret beside it is still found."""

from __future__ import annotations

import pytest

from lcm.secrets import detect

SECRET = "Zx8wQ7pL2mN4vB6cR9tY"  # 20 characters, three classes: a high-entropy value

LOOKALIKES = [
    # Documentation placeholders in unquoted NAME=value lines.
    "export ANTHROPIC_API_KEY=sk-ant-...\nexport OPENROUTER_API_KEY=sk-or-...",
    "export GROQ_API_KEY=gsk_abcd\u2026 and more",
    # Code: a call and a comparison are not settings.
    "env := NewE2EFeatureBranchEnv(t, strategy.StrategyNameManualCommit)",
    "fullMessage += fullMessageSb404.String()",
    "if expectedShadowBranch == expectedShadowBranch2 {",
    # A quoted command whose first word is itself an assignment.
    'run = "E2E_AGENT=claude-code go test -tags=e2e ./cmd"',
    # A model API's tool-use id, and a temporary path.
    "blocks immediately after: toolu_019tYDrbzifrra2KYzmYqWvk. Each",
    "only new issues on pull_request: /tmp/tmp-2101-KUbIvUViN7hm/pull.patch",
]


@pytest.mark.parametrize("text", LOOKALIKES)
def test_untuned_lookalikes_are_not_flagged(text: str) -> None:
    assert detect(text) == []


def test_real_values_beside_them_are_still_found() -> None:
    text = f"export OPENAI_API_KEY=sk-real{SECRET}\ntoken: {SECRET}\nif a == b {{}}"
    found = [text[f.start : f.end] for f in detect(text)]
    assert found == [f"sk-real{SECRET}", SECRET]
