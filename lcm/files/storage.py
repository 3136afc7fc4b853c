"""Where large files live: outside the database, behind one small interface.

Objects are content-addressed (``<tenant>/<sha256[:2]>/<sha256>``): writing the
same bytes twice is one object, a retried or rolled-back ingest can only leave
an object that a later write would reuse, and no write ever replaces different
content. The API writes, workers and ``describe`` read, so in a scaled
deployment the directory must be shared (a volume), or another backend used.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Protocol

from lcm.errors import NotFound
from lcm.settings import Settings

LOCAL_SCHEME = "local:"
_SAFE_TENANT = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class FileStorage(Protocol):
    """A place for file contents. ``put`` is idempotent; ``get`` raises ``NotFound``."""

    def put(self, tenant_id: str, sha256: str, data: bytes) -> str:
        """Store ``data`` (whose SHA-256 is ``sha256``); return its storage URI."""
        ...

    def get(self, uri: str) -> bytes: ...

    def delete(self, uri: str) -> None:
        """Remove the object at ``uri``; nothing happens if it is already gone."""
        ...


class LocalFileStorage:
    """A directory on local (or shared) disk; the default backend."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def put(self, tenant_id: str, sha256: str, data: bytes) -> str:
        if not _SAFE_TENANT.match(tenant_id) or not _SHA256.match(sha256):
            raise ValueError("tenant id or digest not usable in a path")
        relative = f"{tenant_id}/{sha256[:2]}/{sha256}"
        path = self.root / relative
        if path.exists() and path.stat().st_size == len(data):
            return LOCAL_SCHEME + relative
        path.parent.mkdir(parents=True, exist_ok=True)
        # Write then rename: a reader (or a concurrent writer of the same
        # content) sees either no file or the whole file, never a partial one.
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return LOCAL_SCHEME + relative

    def get(self, uri: str) -> bytes:
        try:
            return self._path(uri).read_bytes()
        except FileNotFoundError as exc:
            raise NotFound(f"stored file {uri!r} is missing") from exc

    def delete(self, uri: str) -> None:
        self._path(uri).unlink(missing_ok=True)

    def _path(self, uri: str) -> Path:
        if not uri.startswith(LOCAL_SCHEME):
            raise NotFound(f"storage URI {uri!r} is not a local file")
        root = self.root.resolve()
        path = (root / uri[len(LOCAL_SCHEME) :]).resolve()
        if not path.is_relative_to(root):
            raise NotFound("storage URI points outside the storage directory")
        return path


def files_root(settings: Settings) -> Path:
    return settings.files_dir or settings.home / "files"


def build_storage(settings: Settings) -> FileStorage:
    """The configured storage (``LCM_FILES_DIR``, default ``$LCM_HOME/files``)."""
    return LocalFileStorage(files_root(settings))
