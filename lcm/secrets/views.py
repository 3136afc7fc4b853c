"""Stored messages as they leave: their secrets masked, the stored rows untouched.

A span indexes a part's ``text``; a message leaves as its ``content`` (the
parts' texts joined) and its provider blocks (``payload``). ``content`` and
each part's ``text`` are masked through the spans. A payload is masked by
value: every string inside it (a text block's text, a ``tool_use`` input
value, a ``tool_result``'s content) has each secret value the message's spans
name replaced by that value's placeholder. A ``tool_use`` text holds its
input as JSON, so a value with an escaped character (a PEM block's newlines)
is also looked for decoded.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from sqlalchemy.orm import Session

from lcm.context import MessageView
from lcm.secrets.masking import SecretSpan, content_spans, is_placeholder, mask_text
from lcm.secrets.repository import SecretSpanRepository


def message_spans(
    session: Session, tenant_id: str, message_ids: Collection[int]
) -> dict[int, list[SecretSpan]]:
    """Each message's part spans, for the messages that have any."""
    if not message_ids:
        return {}
    return SecretSpanRepository(session).message_spans(tenant_id, message_ids)


def conversation_has_spans(session: Session, tenant_id: str, conversation_id: int) -> bool:
    """Whether any secret was found in the conversation (one indexed probe)."""
    return SecretSpanRepository(session).any_in_conversation(tenant_id, conversation_id)


def conversation_has_erased(session: Session, tenant_id: str, conversation_id: int) -> bool:
    """Whether a secret of the conversation was erased (``lcm.secret_access``)."""
    return SecretSpanRepository(session).any_erased(tenant_id, conversation_id)


def file_spans(session: Session, tenant_id: str, file_id: str) -> list[SecretSpan]:
    """The spans of a large file's text."""
    return SecretSpanRepository(session).file_spans(tenant_id, file_id)


def masked_views(
    session: Session, tenant_id: str, views: Sequence[MessageView]
) -> list[MessageView]:
    """``views`` with the secrets of those that have spans masked (new views; cached ones kept)."""
    spans = message_spans(session, tenant_id, [v.id for v in views])
    return [mask_view(v, spans[v.id]) if v.id in spans else v for v in views]


def stale_views(
    views: Sequence[MessageView], spans: Mapping[int, Sequence[SecretSpan]]
) -> list[int]:
    """Ids of ``views`` built before one of their secrets was erased.

    An erasure writes the placeholder into the stored text and moves the
    spans onto it; a view kept in a process's cache from before shows
    something else at an erased span (the original), and must be read again.
    """
    stale = []
    for view in views:
        for span in spans.get(view.id, ()):
            if not span.erased or span.part is None:
                continue
            if span.part < len(view.parts):
                text: str | None = view.parts[span.part].text
            else:
                text = view.content if span.part == 0 and not view.parts else None
            if text is None or not is_placeholder(text[span.offset : span.end]):
                stale.append(view.id)
                break
    return stale


def mask_view(view: MessageView, spans: Sequence[SecretSpan]) -> MessageView:
    """A copy of ``view`` with its content, part texts and payloads masked."""
    if not spans:
        return view
    content, texts, payloads = mask_stored(
        view.content, [p.text for p in view.parts], [p.payload for p in view.parts], spans
    )
    parts = tuple(
        dataclasses.replace(part, text=text, payload=payload)
        for part, text, payload in zip(view.parts, texts, payloads, strict=True)
    )
    return dataclasses.replace(view, content=content, parts=parts)


def mask_stored(
    content: str, texts: Sequence[str], payloads: Sequence[Any], spans: Sequence[SecretSpan]
) -> tuple[str, list[str], list[Any]]:
    """A stored message's ``content``, part texts and part payloads, masked."""
    values = secret_values(texts, spans)
    by_part: dict[int, list[SecretSpan]] = {}
    for span in spans:
        if span.part is not None:
            by_part.setdefault(span.part, []).append(span)
    masked_texts = [mask_text(text, by_part.get(i, ())) for i, text in enumerate(texts)]
    on_content = content_spans([len(t) for t in texts], spans)
    masked = mask_text(content, on_content) if on_content else content
    # A text-shaped message is sent as its content, so the values are masked there too.
    return (
        mask_values(masked, values),
        masked_texts,
        [mask_values(payload, values) for payload in payloads],
    )


def secret_values(texts: Sequence[str], spans: Sequence[SecretSpan]) -> dict[str, str]:
    """Each secret value the spans point at in ``texts`` (and its JSON-decoded form) to its
    placeholder."""
    values: dict[str, str] = {}
    for span in spans:
        if span.part is None or span.part >= len(texts):
            continue
        value = texts[span.part][span.offset : span.end]
        if not value:
            continue
        values.setdefault(value, span.placeholder)
        if "\\" in value:
            try:
                decoded = json.loads(f'"{value}"')
            except ValueError:
                continue
            if isinstance(decoded, str) and decoded:
                values.setdefault(decoded, span.placeholder)
    return values


def mask_values(value: Any, values: Mapping[str, str]) -> Any:
    """``value`` (a JSON-like tree) with every occurrence of a secret value replaced."""
    if not values:
        return value
    if isinstance(value, str):
        for secret in sorted(values, key=len, reverse=True):  # longest first: no half masks
            if secret in value:
                value = value.replace(secret, values[secret])
        return value
    if isinstance(value, Mapping):
        return {k: mask_values(v, values) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [mask_values(v, values) for v in value]
    return value


__all__ = [
    "conversation_has_erased",
    "conversation_has_spans",
    "file_spans",
    "mask_stored",
    "mask_values",
    "mask_view",
    "masked_views",
    "message_spans",
    "secret_values",
    "stale_views",
]
