"""Large payloads leave the message; a reference stays; storage holds the bytes."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from lcm.content import IncomingMessage, PreparedMessage, prepare_message
from lcm.errors import NotFound
from lcm.files.extraction import FILE_ID_RE, LargeFileExtractor
from lcm.files.storage import LocalFileStorage

THRESHOLD = 1_000  # tokens; ~4,000 characters


def prep(role: str, content: str | list[dict[str, object]]) -> PreparedMessage:
    return prepare_message(
        IncomingMessage(role, content, "id-1", "2026-01-01T00:00:00Z"), "m", 10**7
    )


@pytest.fixture
def storage(tmp_path: Path) -> LocalFileStorage:
    return LocalFileStorage(tmp_path / "files")


def big_json() -> str:
    return json.dumps({"rows": [{"id": i, "name": f"user{i}"} for i in range(400)]})


def test_inline_file_segment_becomes_a_reference(storage: LocalFileStorage) -> None:
    body = big_json()
    text = (
        f'Please check this.\n<file name="users.json" mime="application/json">{body}</file>\nThanks'
    )
    out, files = LargeFileExtractor(storage, THRESHOLD).extract("ten_1", [prep("user", text)])
    assert len(files) == 1
    stored = files[0]
    assert (stored.name, stored.mime, stored.ext) == ("users.json", "application/json", "json")
    assert stored.byte_size == len(body.encode())
    assert stored.message_index == 0
    assert stored.sha256 == hashlib.sha256(body.encode()).hexdigest()
    message = out[0]
    assert body not in message.content
    assert stored.file_id in message.content
    assert message.content.startswith("Please check this.\n<file name=")
    assert message.content.endswith("</file>\nThanks")
    assert message.token_count < 200
    assert message.client_id == "id-1"
    assert message.created_at == prep("user", "x").created_at
    assert storage.get(stored.storage_uri).decode() == body


def test_small_segments_and_lookalike_tags_are_left_alone(storage: LocalFileStorage) -> None:
    small = '<file name="a.txt">short</file> <filename>x</filename> ' + "word " * 2_000
    out, files = LargeFileExtractor(storage, THRESHOLD).extract("ten_1", [prep("user", small)])
    assert files == []
    assert out[0].content == small


def test_blocks_file_document_and_tool_result(storage: LocalFileStorage) -> None:
    body = "line of log output\n" * 600
    blocks: list[dict[str, object]] = [
        {"type": "text", "text": "results follow"},
        {
            "type": "document",
            "title": "log.txt",
            "source": {"type": "text", "media_type": "text/plain", "data": body},
        },
        {"type": "file", "name": "notes.md", "text": body + "x"},
    ]
    result: list[dict[str, object]] = [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_1",
            "is_error": False,
            "content": [
                {"type": "text", "text": body},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "AA=="},
                },
            ],
        }
    ]
    extractor = LargeFileExtractor(storage, THRESHOLD)
    out, files = extractor.extract("ten_1", [prep("user", blocks), prep("user", result)])
    assert [f.message_index for f in files] == [0, 0, 1]
    assert [f.name for f in files] == ["log.txt", "notes.md", None]
    doc = out[0].parts[1].payload
    assert doc["source"]["media_type"] == "text/plain"
    assert files[0].file_id in doc["source"]["data"]
    assert files[1].file_id in out[0].parts[2].payload["text"]
    tool = out[1].parts[0].payload
    assert tool["tool_use_id"] == "toolu_1"
    assert tool["is_error"] is False
    assert tool["content"][0]["text"].startswith(f"[LCM Tool Output: {files[2].file_id}")
    assert tool["content"][1]["type"] == "image"  # images stay in place
    assert out[1].parts[0].tool_call_id == "toolu_1"
    # Same bytes, one object: content addressing.
    assert files[0].storage_uri != files[1].storage_uri
    assert files[0].sha256 == files[2].sha256
    assert files[0].storage_uri == files[2].storage_uri


def test_tool_message_with_plain_text_output(storage: LocalFileStorage) -> None:
    out, files = LargeFileExtractor(storage, THRESHOLD).extract("t", [prep("tool", "x" * 8_000)])
    assert len(files) == 1
    assert FILE_ID_RE.search(out[0].content)


def test_prose_written_by_the_user_is_not_extracted(storage: LocalFileStorage) -> None:
    text = "This is what I think about the design. " * 500
    out, files = LargeFileExtractor(storage, THRESHOLD).extract("t", [prep("user", text)])
    assert files == []
    assert out[0].content == text


def test_storage_refuses_paths_outside_its_root(storage: LocalFileStorage) -> None:
    with pytest.raises(NotFound):
        storage.get("local:../../etc/passwd")
    with pytest.raises(NotFound):
        storage.get("s3://bucket/x")
    with pytest.raises(ValueError, match="not usable in a path"):
        storage.put("../evil", "0" * 64, b"x")
    with pytest.raises(NotFound):
        storage.get("local:t/00/" + "0" * 64)
