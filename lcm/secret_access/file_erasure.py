"""Erasing a secret from a large file: the stored text rewritten, the row pointed at it.

A large file lives outside the database (``lcm.files.storage``), stored by
its content's digest. Its rewritten text is stored as a new object before
the transaction commits; the row then names the new object, its size and
digest, and the tenant's stored-bytes counter follows the difference. The
old object is removed only after the commit, and only when no file row
names it any more (two files with the same content share one object). A
rollback leaves the new object unreferenced, never the row pointing at
nothing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection

from lcm.files.storage import FileStorage
from lcm.secret_access.repository import SecretAccessRepository
from lcm.secret_access.rewrite import rewrite_part
from lcm.secrets import mask_values
from lcm.tenants import TenantRepository
from lcm.tokens import estimate_tokens


def rewrite_files(
    repo: SecretAccessRepository,
    storage: FileStorage,
    tenant_id: str,
    file_ids: Collection[str],
    erase: set[int],
    released: set[str],
) -> tuple[int, dict[str, str]]:
    """Rewrite the files' texts without the spans in ``erase``.

    Returns how many spans were erased and each erased value's placeholder;
    adds the objects the rows no longer name to ``released``.
    """
    from lcm.db.models import utcnow

    erased, values, now = 0, {}, utcnow()
    for file_id in sorted(file_ids):
        file = repo.large_file(tenant_id, file_id)
        if file is None:
            continue
        try:
            text = storage.get(file.storage_uri).decode("utf-8")
        except UnicodeDecodeError:
            continue  # stored as bytes (an image): never scanned, no span to erase
        spans = repo.file_spans(tenant_id, file_id)
        rewritten = rewrite_part(text, spans, erase)
        values.update(rewritten.values)
        data = rewritten.text.encode("utf-8")
        digest = hashlib.sha256(data).hexdigest()
        uri = storage.put(tenant_id, digest, data)
        if uri != file.storage_uri:
            released.add(file.storage_uri)
        _recount(repo, tenant_id, len(data) - file.byte_size)
        file.storage_uri, file.sha256, file.byte_size = uri, digest, len(data)
        file.token_count = estimate_tokens(rewritten.text)
        if file.exploration_summary:
            file.exploration_summary = mask_values(file.exploration_summary, rewritten.values)
        for span in spans:
            if (span.id in erase or span.id in rewritten.also_erased) and span.erased_at is None:
                span.erased_at = now
                erased += 1
    return erased, values


def _recount(repo: SecretAccessRepository, tenant_id: str, delta: int) -> None:
    """The tenant's stored-bytes counter follows the file's new size (no quota check:
    an erasure is never refused for the bytes a placeholder adds)."""
    tenants = TenantRepository(repo.session)
    if delta < 0:
        tenants.release_storage(tenant_id, 0, -delta)
    elif delta > 0:
        tenants.charge_storage(tenant_id, 0, delta, max_messages=None, max_file_bytes=None)


def release_objects(
    read: SecretAccessRepository, storage: FileStorage, tenant_id: str, uris: set[str]
) -> None:
    """After the commit: remove the objects in ``uris`` that no file row names."""
    for uri in sorted(uris - read.uris_in_use(tenant_id, uris)):
        storage.delete(uri)
