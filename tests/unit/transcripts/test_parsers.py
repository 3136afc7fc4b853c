"""Parsers on our own synthetic transcripts: one per format, each with its traps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lcm.content import prepare_message
from lcm.errors import InvalidInput
from lcm.transcripts import parse_transcript
from lcm.transcripts.model import ResumePoint

FIXTURES = Path(__file__).parents[2] / "fixtures" / "transcripts"


def load(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def test_pi_v1_linear_session() -> None:
    parsed = parse_transcript(load("pi_v1.jsonl"))
    assert (parsed.format, parsed.version) == ("openclaw", 1)
    assert parsed.session_id == "11111111-aaaa-4bbb-8ccc-000000000001"
    roles = [m.role for m in parsed.messages]
    assert roles == [
        "user", "assistant", "tool", "assistant", "user",
        "user", "assistant", "tool", "tool", "user", "assistant",
    ]  # fmt: skip
    assert parsed.stats.skipped == {
        "thinking_level_change": 1,
        "bash_excluded": 1,
        "compaction": 1,
        "model_change": 1,
    }
    # No ids in v1: content hashes, all distinct, stable across reads.
    ids = [m.client_id for m in parsed.messages]
    assert all(i.startswith("pi1:") for i in ids)
    assert len(set(ids)) == len(ids)
    assert ids == [m.client_id for m in parse_transcript(load("pi_v1.jsonl")).messages]
    assistant = parsed.messages[1].content
    assert assistant == [
        {"type": "thinking", "thinking": "I should read the file first.", "signature": "sig-1"},
        {
            "type": "tool_use",
            "id": "toolu_v1_read",
            "name": "read",
            "input": {"path": "src/app.py"},
        },
    ]
    result = parsed.messages[2].content
    assert isinstance(result, list)
    assert result[0]["tool_use_id"] == "toolu_v1_read"
    bash = parsed.messages[4].content
    assert isinstance(bash, str)
    assert bash.startswith("Ran `echo $APP_MODE`")
    image = parsed.messages[9].content
    assert isinstance(image, list)
    assert image[1]["source"]["media_type"] == "image/png"
    # Every converted message passes the ingest validation unchanged.
    for i, message in enumerate(parsed.messages):
        prepare_message(message.incoming(), f"m{i}", 10**6)


def test_pi_v3_takes_the_active_branch_only() -> None:
    parsed = parse_transcript(load("pi_v3_branches.jsonl"))
    assert (parsed.format, parsed.version) == ("openclaw", 3)
    assert [m.client_id for m in parsed.messages] == [
        "a0000001", "a0000002", "a0000003", "c0000001", "c0000002",
        "c0000003", "c0000005", "c0000008", "c0000010",
    ]  # fmt: skip
    assert parsed.stats.off_branch == 2  # b0000001, b0000002: the abandoned attempt
    assert parsed.stats.skipped == {
        "model_change": 1,
        "custom": 1,
        "compaction": 1,
        "label": 1,
        "session_info": 1,
    }
    texts = {m.client_id: m.content for m in parsed.messages}
    assert "Flask" in str(texts["c0000001"])  # the branch summary is kept, as pi shows it
    assert texts["c0000005"] == "Reminder: run the linters before committing."
    assert texts["c0000008"] == [{"type": "text", "text": "CI finished: all green."}]


def test_claude_code_skips_sidechain_and_compact_summary() -> None:
    parsed = parse_transcript(load("claude_code.jsonl"))
    assert parsed.format == "claude-code"
    assert parsed.session_id == "cc000000-0000-4000-8000-000000000001"
    assert [m.client_id for m in parsed.messages] == [
        "u-0001", "u-0002", "u-0003", "u-0005", "u-0006", "u-0007",
        "u-0008", "u-0012", "u-0013", "u-0014", "u-0015",
    ]  # fmt: skip
    assert parsed.stats.skipped == {
        "file-history-snapshot": 1,
        "progress": 1,
        "sidechain": 2,
        "system": 1,
        "compaction": 1,
        "compact_summary": 1,
        "summary": 1,
    }
    error = parsed.messages[3].content
    assert isinstance(error, list)
    assert error[0]["is_error"] is True
    for i, message in enumerate(parsed.messages):
        prepare_message(message.incoming(), f"m{i}", 10**6)


def test_a_subagent_transcript_is_imported_as_is() -> None:
    lines = [
        json.loads(line)
        for line in load("claude_code.jsonl").splitlines()
        if b'"isSidechain": true' in line
    ]
    data = "".join(json.dumps(v) + "\n" for v in lines).encode()
    parsed = parse_transcript(data)
    assert parsed.sidechain_only
    assert [m.client_id for m in parsed.messages] == ["s-0001", "s-0002"]


def test_format_detection_and_explicit_format() -> None:
    assert parse_transcript(load("claude_code.jsonl"), "claude-code").format == "claude-code"
    with pytest.raises(InvalidInput):
        parse_transcript(b'{"hello": "world"}\n')


def test_malformed_and_partial_lines() -> None:
    data = load("pi_v1.jsonl")
    lines = data.splitlines(keepends=True)
    broken = b"".join(lines[:3]) + b'{"type": "message", "timest\n' + b"".join(lines[3:])
    parsed = parse_transcript(broken)
    assert parsed.stats.malformed_lines == 1
    assert len(parsed.messages) == 11
    # A last line still being written is neither an error nor consumed.
    partial = data + b'{"type": "message", "message": {"role": "us'
    parsed = parse_transcript(partial)
    assert parsed.stats.malformed_lines == 0
    assert parsed.complete_bytes == len(data)
    # A complete last line without its newline is read, but not consumed either.
    unterminated = data.rstrip(b"\n")
    parsed = parse_transcript(unterminated)
    assert len(parsed.messages) == 11
    assert parsed.complete_bytes == len(unterminated) - len(lines[-1]) + 1


def test_resume_reads_only_the_appended_part_of_a_tree() -> None:
    data = load("pi_v3_branches.jsonl")
    appended = b"".join(
        json.dumps(
            {
                "type": "message",
                "id": f"d00000{i:02d}",
                "parentId": "c0000010" if i == 0 else f"d00000{i - 1:02d}",
                "timestamp": "2025-11-20T11:00:00.000Z",
                "message": {"role": "user", "content": f"follow-up {i}"},
            }
        ).encode()
        + b"\n"
        for i in range(3)
    )
    resume = ResumePoint(len(data), "openclaw", 3, "s")
    parsed = parse_transcript(data + appended, resume=resume)
    assert [m.client_id for m in parsed.messages] == ["d0000000", "d0000001", "d0000002"]
    assert parsed.complete_bytes == len(data) + len(appended)


def test_unstorable_text_is_refused_like_ingest() -> None:
    line = {
        "type": "message",
        "timestamp": "2025-11-20T10:00:00Z",
        "message": {"role": "user", "content": "nul\u0000 and lone \ud800 surrogate"},
    }
    with pytest.raises(InvalidInput) as refused:
        parse_transcript(json.dumps(line).encode() + b"\n")
    assert refused.value.code == "invalid_text"
    assert "byte 0" in refused.value.message


def test_deeply_nested_line_is_refused_not_skipped() -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    data = b'{"type": "message", "message": {"role": "user", "content": ' + deep + b"}}\n"
    with pytest.raises(InvalidInput) as refused:
        parse_transcript(data)
    assert refused.value.code == "too_deep"


def test_assistant_messages_keep_the_provider_and_model_that_wrote_them() -> None:
    pi = parse_transcript(load("pi_v1.jsonl")).messages
    assert {(m.provider, m.model) for m in pi if m.role == "assistant"} == {
        ("anthropic", "claude-sonnet-4-5")
    }
    assert {(m.provider, m.model) for m in pi if m.role != "assistant"} == {(None, None)}
    claude = parse_transcript(load("claude_code.jsonl")).messages
    assert ("anthropic", "claude-opus-4-5") in {(m.provider, m.model) for m in claude}
    assert all(m.model is None for m in claude if m.role != "assistant")
    prepared = prepare_message(pi[1].incoming(), "m", 10_000)
    assert (prepared.provider, prepared.model) == ("anthropic", "claude-sonnet-4-5")
