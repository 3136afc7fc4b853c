"""Secrets in stored text: found at ingest, stored as spans, masked where text leaves."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lcm.exports import lazy_exports

if TYPE_CHECKING:
    from lcm.secrets.detector import Finding, detect
    from lcm.secrets.masking import (
        SecretSpan,
        content_spans,
        mask_message,
        mask_parts,
        mask_text,
        placeholder,
    )
    from lcm.secrets.repository import SecretSpanRepository
    from lcm.secrets.service import (
        DEFAULT_SCAN,
        ScannedText,
        SecretScan,
        content_masks,
        mask_detected,
        message_texts,
        record_secrets,
    )

__all__ = [
    "DEFAULT_SCAN",
    "Finding",
    "ScannedText",
    "SecretScan",
    "SecretSpan",
    "SecretSpanRepository",
    "content_masks",
    "content_spans",
    "detect",
    "mask_detected",
    "mask_message",
    "mask_parts",
    "mask_text",
    "message_texts",
    "placeholder",
    "record_secrets",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "lcm.secrets.detector": ("Finding", "detect"),
        "lcm.secrets.masking": (
            "SecretSpan",
            "content_spans",
            "mask_message",
            "mask_parts",
            "mask_text",
            "placeholder",
        ),
        "lcm.secrets.repository": ("SecretSpanRepository",),
        "lcm.secrets.service": (
            "DEFAULT_SCAN",
            "ScannedText",
            "SecretScan",
            "content_masks",
            "mask_detected",
            "message_texts",
            "record_secrets",
        ),
    },
)
