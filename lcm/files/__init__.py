"""Large files: stored outside the database, referenced from messages, explored by a job."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lcm.exports import lazy_exports

if TYPE_CHECKING:
    from lcm.files.extraction import FILE_ID_RE, LargeFileExtractor, PendingFile
    from lcm.files.repository import LargeFileRepository
    from lcm.files.service import FileMatch, StoredFile, grep_files, load_file, summarize_file
    from lcm.files.storage import (
        LOCAL_SCHEME,
        FileStorage,
        LocalFileStorage,
        build_storage,
        files_root,
    )

__all__ = [
    "FILE_ID_RE",
    "LOCAL_SCHEME",
    "FileMatch",
    "FileStorage",
    "LargeFileExtractor",
    "LargeFileRepository",
    "LocalFileStorage",
    "PendingFile",
    "StoredFile",
    "build_storage",
    "files_root",
    "grep_files",
    "load_file",
    "summarize_file",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "lcm.files.extraction": ("FILE_ID_RE", "LargeFileExtractor", "PendingFile"),
        "lcm.files.repository": ("LargeFileRepository",),
        "lcm.files.service": (
            "FileMatch",
            "StoredFile",
            "grep_files",
            "load_file",
            "summarize_file",
        ),
        "lcm.files.storage": (
            "LOCAL_SCHEME",
            "FileStorage",
            "LocalFileStorage",
            "build_storage",
            "files_root",
        ),
    },
)
