"""Reading originals and erasing secrets: the ``secrets`` scope's reads, their audit, erasure.

Above :mod:`lcm.secrets` (spans, masking), :mod:`lcm.retrieval` and
:mod:`lcm.transfer`: a read with ``with_secrets`` goes through here so it is
recorded, and an admin's erasure rewrites the stored rows (docs/secrets.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lcm.exports import lazy_exports

if TYPE_CHECKING:
    from lcm.secret_access.audit import (
        CLI_READER,
        MAX_PAGE,
        Reader,
        SecretReadInfo,
        SecretReadsPage,
        list_reads,
        record_read,
    )
    from lcm.secret_access.erasure import MAX_SPAN_IDS, Erased, ErasureRequest, erase_secrets
    from lcm.secret_access.reads import (
        expand_with_secrets,
        file_with_secrets,
        record_export,
        summary_with_secrets,
    )

__all__ = [
    "CLI_READER",
    "MAX_PAGE",
    "MAX_SPAN_IDS",
    "Erased",
    "ErasureRequest",
    "Reader",
    "SecretReadInfo",
    "SecretReadsPage",
    "erase_secrets",
    "expand_with_secrets",
    "file_with_secrets",
    "list_reads",
    "record_export",
    "record_read",
    "summary_with_secrets",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "lcm.secret_access.audit": (
            "CLI_READER",
            "MAX_PAGE",
            "Reader",
            "SecretReadInfo",
            "SecretReadsPage",
            "list_reads",
            "record_read",
        ),
        "lcm.secret_access.erasure": ("MAX_SPAN_IDS", "Erased", "ErasureRequest", "erase_secrets"),
        "lcm.secret_access.reads": (
            "expand_with_secrets",
            "file_with_secrets",
            "record_export",
            "summary_with_secrets",
        ),
    },
)
