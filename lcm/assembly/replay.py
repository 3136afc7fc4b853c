"""Signed reasoning is replayed only to the model that wrote it.

A provider signs its models' thinking (``thinking`` blocks with a
``signature``, ``redacted_thinking`` blocks) and refuses a signed block some
other model wrote. Each assistant message keeps the provider and model that
wrote it (``messages.provider`` / ``messages.model``, sent on ingest); an
assemble call naming the model it serves (:class:`ReplayTarget`; a
``provider/model`` name with the provider given counts as ``model``) gets
signed blocks only from messages of that model. The rest of those messages (their
text, their ``tool_use`` blocks, so every tool pair) stays.

The rules:

* no target model named: every block is sent, as before model identity existed;
* a message of another model (its stored ``model`` differs, or its
  ``provider`` differs where both name one): its signed blocks are dropped;
* a message with no stored model keeps its blocks. Its origin is unknown, and
  dropping the thinking of an open tool loop would itself be refused.

Unsigned ``thinking`` blocks are left alone, as are stored messages: this
acts on what assembly reads, never on what is kept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from lcm.context import ContextEntry, MessageView
from lcm.tokens import estimate_tokens


@dataclass(frozen=True, slots=True)
class ReplayTarget:
    """The model an assembled context is for (``model`` None: unknown)."""

    provider: str | None = None
    model: str | None = None

    def __post_init__(self) -> None:
        # Hosts name a model ``provider/model`` as often as bare; messages bare.
        model, provider = self.model, self.provider
        if model is not None and provider is not None and model.startswith(provider + "/"):
            object.__setattr__(self, "model", model[len(provider) + 1 :])

    def wrote(self, message: MessageView) -> bool:
        """True unless ``message`` is known to come from another model."""
        if self.model is None or message.model is None:
            return True
        if message.model != self.model:
            return False
        return self.provider is None or message.provider in (None, self.provider)


def is_signed_reasoning(payload: Mapping[str, Any]) -> bool:
    """A block only the model that wrote it may be sent back."""
    kind = payload.get("type")
    return kind == "redacted_thinking" or (kind == "thinking" and bool(payload.get("signature")))


def without_foreign_reasoning(
    entries: Sequence[ContextEntry], target: ReplayTarget
) -> Sequence[ContextEntry]:
    """``entries`` with signed reasoning of other models taken out (see the module)."""
    if target.model is None:
        return entries
    return [_for_target(entry, target) for entry in entries]


def _for_target(entry: ContextEntry, target: ReplayTarget) -> ContextEntry:
    message = entry.message
    if message is None or message.role != "assistant" or target.wrote(message):
        return entry
    view: MessageView | None = message.unsigned
    if view is None:
        kept = tuple(p for p in message.parts if not is_signed_reasoning(p.payload))
        # A second view, kept on the first (views outlive requests in the
        # message cache), so its own rendering memo serves later assemblies.
        # Two requests may build it at once: both build the same view.
        signed = len(kept) < len(message.parts)
        view = replace(message, parts=kept, content_shape="blocks") if signed else message
        object.__setattr__(message, "unsigned", view)
    if view is message:
        return entry
    saved = sum(estimate_tokens(p.text) for p in message.parts if is_signed_reasoning(p.payload))
    return replace(entry, message=view, token_count=max(1, entry.token_count - saved))
