"""The object storage port: `put` (`put_file` for big objects), `get` (`open` for big objects),
`delete`, `delete_prefix` and `signed_url(key, ttl)`, with two real backends (`local.LocalStorage`, the
default, and `s3.S3Storage`), opened once per App (`STORAGE`, an App resource).
Modules reach it through `storage_for(deps)` (a servicer's `ServicerDeps`, or a job's or task's runtime).

Keys are tenant-prefixed (`<org id>/<module>/…`, see `object_key`): an
object belongs to the organization its key starts with, and a signed URL
names exactly one key, so it never opens another tenant's object.
"""

from __future__ import annotations

import hashlib
import pathlib
from typing import IO, Protocol

from persona_service.files.records import KEY, ObjectStream, SignedUrl, StoredObject
from persona_service.files.settings import FileSettings
from persona_service.kernel.api import HasResources, Resource, Settings, load


class Storage(Protocol):
    name: str

    def put(self, key: str, data: bytes, content_type: str) -> None: ...

    def put_file(self, key: str, file: IO[bytes], content_type: str) -> None:
        """The file's contents from its current position, copied in chunks
        (never whole in memory): for objects too big to hold, e.g. exports."""
        ...

    def get(self, key: str) -> StoredObject:
        """Raises ObjectNotFound."""
        ...

    def open(self, key: str) -> ObjectStream:
        """The object in chunks (never whole in memory): for downloads of
        objects too big to hold. Raises ObjectNotFound before any chunk."""
        ...

    def delete(self, key: str) -> None:
        """Deleting a missing object is not an error."""
        ...

    def delete_prefix(self, prefix: str) -> int:
        """Every object whose key starts with `prefix` + '/'; returns how many."""
        ...

    def signed_url(self, key: str, ttl_seconds: int) -> SignedUrl: ...


def object_key(org_id: str, *segments: str) -> str:
    key = "/".join((org_id, *segments))
    if not KEY.match(key):
        raise ValueError(f"not a storage key: {key!r}")
    return key


def open_storage(settings: FileSettings, data_dir: pathlib.Path, signing_secret: bytes,
                 default_public_url: str) -> Storage:
    if settings.storage_backend == "s3":
        from persona_service.files.s3 import S3Storage

        return S3Storage(settings)
    from persona_service.files.local import LocalStorage

    root = settings.storage_dir or str(data_dir / "objects")
    return LocalStorage(root, signing_secret, settings.public_url or default_public_url)


def _open(settings: Settings) -> Storage:
    return open_storage(load(FileSettings), settings.data_dir, signing_key(settings.resolved_jwt_secret()),
                        default_public_url(settings))


# The process's storage, owned by its App (an S3 client holds a connection pool).
STORAGE: Resource[Storage] = Resource("files.storage", _open)


def storage_for(owner: HasResources) -> Storage:
    """The storage of an App, of a servicer's deps, or of a job's or task's runtime."""
    return owner.resources.get(STORAGE)


def default_public_url(settings: Settings) -> str:
    """Where the edge listens, as its own clients reach it on this host."""
    return f"http://{_host(settings.http_host)}:{settings.http_port}"


def _public_url(settings: Settings) -> str:
    return (load(FileSettings).public_url or default_public_url(settings)).rstrip("/")


# Read once per App, from the settings it was made with (no servicer holds those).
PUBLIC_URL: Resource[str] = Resource("files.public_url", _public_url)


def public_url(owner: HasResources) -> str:
    """The base URL clients reach the edge at (PERSONA_PUBLIC_URL, else the edge's own address)."""
    return owner.resources.get(PUBLIC_URL)


def signing_key(secret: str | bytes) -> bytes:
    """The local backend's URL-signing key, derived from the service secret (never the secret itself)."""
    raw = secret.encode() if isinstance(secret, str) else secret
    return hashlib.sha256(b"persona-files-url\x00" + raw).digest()


def _host(host: str) -> str:
    if host in ("0.0.0.0", "::", ""):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host
