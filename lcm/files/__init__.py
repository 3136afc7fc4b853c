"""Large files: stored outside the database, referenced from messages, explored by a job."""

from lcm.files.extraction import LargeFileExtractor, PendingFile
from lcm.files.service import StoredFile, grep_files, load_file, summarize_file
from lcm.files.storage import FileStorage, LocalFileStorage, build_storage

__all__ = [
    "FileStorage",
    "LargeFileExtractor",
    "LocalFileStorage",
    "PendingFile",
    "StoredFile",
    "build_storage",
    "grep_files",
    "load_file",
    "summarize_file",
]
