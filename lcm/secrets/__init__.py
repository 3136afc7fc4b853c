"""Secrets in stored text: found at ingest, stored as spans, masked where text leaves."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lcm.exports import lazy_exports

if TYPE_CHECKING:
    from lcm.secrets.detector import DETECTOR_VERSION, Finding, detect
    from lcm.secrets.masking import (
        SecretSpan,
        content_spans,
        is_placeholder,
        mask_message,
        mask_parts,
        mask_ranges,
        mask_text,
        placeholder,
    )
    from lcm.secrets.report import ConversationFindings, KindCount, secrets_report
    from lcm.secrets.repository import SecretSpanRepository
    from lcm.secrets.rules import NO_RULES, DetectionRules
    from lcm.secrets.scans import (
        ScanProgress,
        due_scans,
        run_scan_job,
        run_scan_slice,
        scan_progress,
        start_scan,
    )
    from lcm.secrets.service import (
        DEFAULT_SCAN,
        ScannedText,
        SecretScan,
        content_masks,
        erased_since,
        mask_detected,
        message_texts,
        record_secrets,
    )
    from lcm.secrets.views import (
        conversation_has_erased,
        conversation_has_spans,
        file_spans,
        mask_stored,
        mask_values,
        mask_view,
        masked_views,
        message_spans,
        secret_values,
        stale_views,
    )

__all__ = [
    "DEFAULT_SCAN",
    "DETECTOR_VERSION",
    "NO_RULES",
    "ConversationFindings",
    "DetectionRules",
    "Finding",
    "KindCount",
    "ScanProgress",
    "ScannedText",
    "SecretScan",
    "SecretSpan",
    "SecretSpanRepository",
    "content_masks",
    "content_spans",
    "conversation_has_erased",
    "conversation_has_spans",
    "detect",
    "due_scans",
    "erased_since",
    "file_spans",
    "is_placeholder",
    "mask_detected",
    "mask_message",
    "mask_parts",
    "mask_ranges",
    "mask_stored",
    "mask_text",
    "mask_values",
    "mask_view",
    "masked_views",
    "message_spans",
    "message_texts",
    "placeholder",
    "record_secrets",
    "run_scan_job",
    "run_scan_slice",
    "scan_progress",
    "secret_values",
    "secrets_report",
    "stale_views",
    "start_scan",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "lcm.secrets.detector": ("DETECTOR_VERSION", "Finding", "detect"),
        "lcm.secrets.rules": ("NO_RULES", "DetectionRules"),
        "lcm.secrets.report": ("ConversationFindings", "KindCount", "secrets_report"),
        "lcm.secrets.scans": (
            "ScanProgress",
            "due_scans",
            "run_scan_job",
            "run_scan_slice",
            "scan_progress",
            "start_scan",
        ),
        "lcm.secrets.masking": (
            "SecretSpan",
            "content_spans",
            "conversation_has_spans",
            "file_spans",
            "is_placeholder",
            "mask_message",
            "mask_ranges",
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
            "erased_since",
            "mask_detected",
            "message_texts",
            "record_secrets",
        ),
        "lcm.secrets.views": (
            "conversation_has_erased",
            "conversation_has_spans",
            "file_spans",
            "file_spans",
            "mask_stored",
            "mask_values",
            "mask_view",
            "masked_views",
            "message_spans",
            "secret_values",
            "stale_views",
        ),
    },
)
