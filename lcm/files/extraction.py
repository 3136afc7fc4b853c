"""Taking oversized payloads out of messages before they are stored.

A payload above ``large_file_token_threshold`` tokens is written to file
storage and replaced in the message by a compact reference naming its
``file_…`` id, so the context never carries it whole while ``describe``
still returns it exactly. Payloads considered, in any message:

* ``<file …>…</file>`` segments inside text (how gateways paste attachments):
  the tag stays, its body becomes the reference;
* ``file`` and ``document`` blocks carrying text;
* ``tool_result`` blocks, and the whole text of a ``tool`` message: text parts
  become the reference;
* base64 images of at least ``large_image_bytes_threshold`` decoded bytes:
  ``image`` blocks (also inside tool results) become a text block naming the
  stored image, and ``data:image/…;base64,…`` URLs inside text become the same
  reference inline. ``describe`` returns the image's bytes base64-encoded.

Plain prose the user or the model wrote is never taken out: it is the
conversation itself, and compaction is what keeps it in budget.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import mimetypes
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from lcm.content import IMAGE_TOKEN_ESTIMATE, IncomingMessage, PreparedMessage, prepare_message
from lcm.files.storage import FileStorage
from lcm.settings import CompactionSettings
from lcm.tokens import estimate_tokens

FILE_ID_RE = re.compile(r"\bfile_[0-9a-f]{16}\b")
_ATTR_RE = re.compile(r"""([A-Za-z_:][-A-Za-z0-9_:.]*)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))""")
_OPEN, _CLOSE = "<file", "</file>"
_DATA_URL_RE = re.compile(r"data:(image/[A-Za-z0-9.+-]{1,100});base64,([A-Za-z0-9+/]+={0,2})")


def new_file_id() -> str:
    return "file_" + secrets.token_hex(8)


@dataclass(frozen=True, slots=True)
class PendingFile:
    """A payload already written to storage, waiting for its ``large_files`` row."""

    message_index: int
    file_id: str
    name: str | None
    mime: str | None
    ext: str | None
    byte_size: int
    token_count: int
    sha256: str
    storage_uri: str
    # The text stored (None for binary payloads): scanned for secrets with the batch.
    text: str | None = field(default=None, repr=False)


def file_reference(pending: PendingFile) -> str:
    head = (
        f"[LCM File: {pending.file_id} | {pending.name or 'unnamed'} | "
        f"{pending.mime or 'unknown type'} | {pending.byte_size:,} bytes | "
        f"~{pending.token_count:,} tokens]"
    )
    return f"{head}\nStored outside the context; describe {pending.file_id} for the full content."


def image_reference(pending: PendingFile) -> str:
    return (
        f"[LCM Image: {pending.file_id} | {pending.mime or 'image'} | "
        f"{pending.byte_size:,} bytes] Stored outside the context; "
        f"describe {pending.file_id} for the image."
    )


def tool_output_reference(pending: PendingFile, tool_use_id: str | None) -> str:
    head = (
        f"[LCM Tool Output: {pending.file_id} | tool_use_id={tool_use_id or '?'} | "
        f"{pending.byte_size:,} bytes | ~{pending.token_count:,} tokens]"
    )
    return f"{head}\nStored outside the context; describe {pending.file_id} for the full output."


class LargeFileExtractor:
    """Rewrites a batch of prepared messages; returns them with the files it stored."""

    def __init__(
        self, storage: FileStorage, threshold_tokens: int, image_threshold_bytes: int = 0
    ) -> None:
        self.storage = storage
        self.threshold = threshold_tokens
        # 0: images stay inline.
        self.image_threshold = image_threshold_bytes

    @classmethod
    def for_settings(cls, storage: FileStorage, settings: CompactionSettings) -> LargeFileExtractor:
        """The extractor at a tenant's (effective) thresholds."""
        return cls(
            storage, settings.large_file_token_threshold, settings.large_image_bytes_threshold
        )

    def _may_hold_image(self, message: PreparedMessage) -> bool:
        if not self.image_threshold:
            return False
        return "data:image/" in message.content or any(
            p.part_type in ("image", "tool_result") for p in message.parts
        )

    def extract(
        self, tenant_id: str, messages: Sequence[PreparedMessage]
    ) -> tuple[list[PreparedMessage], list[PendingFile]]:
        out: list[PreparedMessage] = []
        pending: list[PendingFile] = []
        for index, message in enumerate(messages):
            # A message's estimate bounds every payload inside it: most skip here.
            if message.token_count <= self.threshold and not self._may_hold_image(message):
                out.append(message)
                continue
            run = _MessageRun(self, tenant_id, index)
            content = run.rewrite(message)
            if not run.files:
                out.append(message)
                continue
            pending.extend(run.files)
            out.append(_rebuilt(message, content))
        return out, pending

    def stash(
        self, tenant_id: str, index: int, text: str, name: str | None, mime: str | None
    ) -> PendingFile:
        stored = self.stash_bytes(
            tenant_id, index, text.encode("utf-8"), name, mime, estimate_tokens(text)
        )
        return replace(stored, text=text)

    def stash_bytes(
        self,
        tenant_id: str,
        index: int,
        data: bytes,
        name: str | None,
        mime: str | None,
        token_count: int,
    ) -> PendingFile:
        digest = hashlib.sha256(data).hexdigest()
        uri = self.storage.put(tenant_id, digest, data)
        if mime is None and name:
            mime = mimetypes.guess_type(name, strict=False)[0]
        ext = name.rsplit(".", 1)[-1].lower()[:32] if name and "." in name else None
        return PendingFile(
            index,
            new_file_id(),
            name[:500] if name else None,
            mime[:200] if mime else None,
            ext,
            len(data),
            token_count,
            digest,
            uri,
        )


class _MessageRun:
    """The rewrite of one message; collects the files it stored."""

    def __init__(self, extractor: LargeFileExtractor, tenant_id: str, index: int) -> None:
        self.extractor = extractor
        self.tenant_id = tenant_id
        self.index = index
        self.files: list[PendingFile] = []

    def _large(self, text: str) -> bool:
        return estimate_tokens(text) > self.extractor.threshold

    def _stash(self, text: str, name: str | None, mime: str | None) -> PendingFile:
        stored = self.extractor.stash(self.tenant_id, self.index, text, name, mime)
        self.files.append(stored)
        return stored

    def rewrite(self, message: PreparedMessage) -> str | list[dict[str, Any]]:
        if message.content_shape == "text":
            text = str(message.parts[0].payload["text"]) if message.parts else ""
            if message.role == "tool" and self._large(text):
                return tool_output_reference(self._stash(text, None, None), None)
            return self.data_urls(self.file_segments(text))
        return [self.block(dict(part.payload)) for part in message.parts]

    def _image(self, data: str, mime: str | None) -> PendingFile | None:
        """The stored image when ``data`` (base64) is over the image threshold."""
        if (
            not self.extractor.image_threshold
            or len(data) * 3 // 4 < self.extractor.image_threshold
        ):
            return None
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            return None  # not base64 after all: leave it as sent
        if len(raw) < self.extractor.image_threshold:
            return None
        ext = mimetypes.guess_extension(mime or "", strict=False) if mime else None
        name = f"image{ext}" if ext else None
        stored = self.extractor.stash_bytes(
            self.tenant_id, self.index, raw, name, mime, IMAGE_TOKEN_ESTIMATE
        )
        self.files.append(stored)
        return stored

    def data_urls(self, text: str) -> str:
        """``text`` with each large ``data:image/…;base64,…`` URL replaced by a reference."""
        if not self.extractor.image_threshold or "data:image/" not in text:
            return text

        def replace(match: re.Match[str]) -> str:
            stored = self._image(match.group(2), match.group(1))
            return match.group(0) if stored is None else image_reference(stored)

        return _DATA_URL_RE.sub(replace, text)

    def image_block(self, block: dict[str, Any]) -> dict[str, Any]:
        source = block.get("source")
        if not isinstance(source, dict) or source.get("type") != "base64":
            return block
        data, mime = source.get("data"), source.get("media_type")
        if not isinstance(data, str):
            return block
        if data.startswith("data:") and "," in data:  # a data URL where base64 was expected
            head, data = data.split(",", 1)
            mime = mime or head[5:].split(";", 1)[0]
        stored = self._image(data, mime if isinstance(mime, str) else None)
        return block if stored is None else {"type": "text", "text": image_reference(stored)}

    def file_segments(self, text: str) -> str:
        """``text`` with the body of each oversized ``<file …>`` segment replaced."""
        if _OPEN not in text:
            return text
        pieces: list[str] = []
        position = 0
        while True:
            start = text.find(_OPEN, position)
            if start < 0:
                break
            if text[start + len(_OPEN) : start + len(_OPEN) + 1] not in (" ", "\t", "\n", ">"):
                pieces.append(text[position : start + len(_OPEN)])  # <filename>, <files>…
                position = start + len(_OPEN)
                continue
            tag_end = text.find(">", start)
            if tag_end < 0:
                break
            close = text.find(_CLOSE, tag_end)
            if close < 0:
                break  # no closing tag after this one, so none after any later one either
            body = text[tag_end + 1 : close]
            if self._large(body):
                attrs = _attributes(text[start + len(_OPEN) : tag_end])
                stored = self._stash(body, attrs.get("name"), attrs.get("mime"))
                pieces += [text[position : tag_end + 1], "\n", file_reference(stored), "\n"]
                position = close
            else:
                pieces.append(text[position : close + len(_CLOSE)])
                position = close + len(_CLOSE)
        pieces.append(text[position:])
        return "".join(pieces)

    def block(self, block: dict[str, Any]) -> dict[str, Any]:
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            return {**block, "text": self.data_urls(self.file_segments(block["text"]))}
        if kind == "image":
            return self.image_block(block)
        if kind in ("file", "document"):
            return self._file_block(block)
        if kind == "tool_result":
            return self._tool_result(block)
        return block

    def _file_block(self, block: dict[str, Any]) -> dict[str, Any]:
        source = block.get("source")
        from_source = isinstance(source, dict) and source.get("type") == "text"
        text = source.get("data") if from_source and isinstance(source, dict) else block.get("text")
        if not isinstance(text, str) or not self._large(text):
            return block
        name = next(
            (v for k in ("name", "title", "filename") if isinstance(v := block.get(k), str)), None
        )
        mime = block.get("mime") or (source.get("media_type") if isinstance(source, dict) else None)
        stored = self._stash(text, name, mime if isinstance(mime, str) else None)
        reference = file_reference(stored)
        if from_source and isinstance(source, dict):
            return {**block, "source": {**source, "data": reference}}
        return {**block, "text": reference}

    def _tool_result(self, block: dict[str, Any]) -> dict[str, Any]:
        content = block.get("content")
        if isinstance(content, list):
            # Large images inside the result are stored first, in place.
            content = [self.image_block(b) if _is_image(b) else b for b in content]
            block = {**block, "content": content}
            texts = [b["text"] for b in content if isinstance(b, dict) and b.get("type") == "text"]
            others = [b for b in content if not (isinstance(b, dict) and b.get("type") == "text")]
        elif isinstance(content, str):
            texts, others = [content], []
        else:
            return block
        text = "\n".join(t for t in texts if isinstance(t, str))
        if not self._large(text):
            return block
        tool_use_id = block.get("tool_use_id")
        stored = self._stash(text, None, None)
        call_id = tool_use_id if isinstance(tool_use_id, str) else None
        reference = tool_output_reference(stored, call_id)
        return {**block, "content": [{"type": "text", "text": reference}, *others]}


def _is_image(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "image"


def _attributes(raw: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for match in _ATTR_RE.finditer(raw):
        value = match.group(2) or match.group(3) or match.group(4) or ""
        if value:
            found[match.group(1).lower()] = value
    return found


def _rebuilt(message: PreparedMessage, content: str | list[dict[str, Any]]) -> PreparedMessage:
    # Re-run validation and derivation on the rewritten content so that parts,
    # plain text and token count are computed exactly as for any other message.
    stamp = message.created_at.isoformat() if message.created_at else None
    incoming = IncomingMessage(
        message.role,
        content,
        message.client_id,
        stamp,
        provider=message.provider,
        model=message.model,
    )
    return prepare_message(incoming, "message", max_chars=2**62)
