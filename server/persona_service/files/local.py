"""Objects as files under a root directory; the service serves them itself
(`GET /v1/files/{key}`, persona.v1.FileService) on URLs signed with
HMAC-SHA256 over the key and the expiry, so a URL opens one object until it
expires and a changed key, expiry or signature is refused."""

from __future__ import annotations

import hmac
import mimetypes
import os
import pathlib
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from hashlib import sha256
from typing import IO
from urllib.parse import quote, urlencode

from persona_service.files.records import (
    CHUNK_BYTES,
    KEY,
    ObjectNotFound,
    ObjectStream,
    SignedUrl,
    StoredObject,
    etag_of,
)

FILES_PATH = "/v1/files/"


class LocalStorage:
    name = "local"

    def __init__(self, root: str | os.PathLike[str], signing_key: bytes, public_url: str):
        self.root = pathlib.Path(root).resolve()
        self.signing_key = signing_key
        self.public_url = public_url.rstrip("/")

    def _path(self, key: str) -> pathlib.Path:
        if not KEY.match(key):
            raise ObjectNotFound(key)
        return self.root / key

    def put(self, key: str, data: bytes, content_type: str) -> None:
        self._write(key, lambda tmp: tmp.write(data))

    def put_file(self, key: str, file: IO[bytes], content_type: str) -> None:
        self._write(key, lambda tmp: shutil.copyfileobj(file, tmp))

    def _write(self, key: str, fill: Callable[[IO[bytes]], object]) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        # Written aside, then renamed: a reader never sees half an object.
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".put-", delete=False) as tmp:
            fill(tmp)
        os.replace(tmp.name, path)

    def get(self, key: str) -> StoredObject:
        try:
            data = self._path(key).read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise ObjectNotFound(key) from None
        return StoredObject(data, content_type_of(key), etag_of(data))

    def open(self, key: str) -> ObjectStream:
        try:
            file = self._path(key).open("rb")
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise ObjectNotFound(key) from None
        stat = os.fstat(file.fileno())
        # An object is replaced, never rewritten in place (`_write`): a new one is a new file (inode, mtime).
        identity = sha256(f"{stat.st_ino}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:32]
        return ObjectStream(stat.st_size, content_type_of(key), f'"{identity}"', _chunks(file))

    def delete(self, key: str) -> None:
        try:
            self._path(key).unlink()
        except (FileNotFoundError, ObjectNotFound):
            pass

    def delete_prefix(self, prefix: str) -> int:
        if not KEY.match(prefix):
            return 0
        folder = self.root / prefix
        if not folder.is_dir():
            return 0
        count = sum(1 for p in folder.rglob("*") if p.is_file())
        shutil.rmtree(folder, ignore_errors=True)
        return count

    def signed_url(self, key: str, ttl_seconds: int) -> SignedUrl:
        expires = int(time.time()) + ttl_seconds
        return SignedUrl(f"{self.public_url}{self.target(key, expires)}", datetime.fromtimestamp(expires, UTC))

    def target(self, key: str, expires: int) -> str:
        """A signed URL's path and query: the one form of it the service answers."""
        query = urlencode({"expires": expires, "signature": self.signature(key, expires)})
        return f"{FILES_PATH}{quote(key)}?{query}"

    def signature(self, key: str, expires: int) -> str:
        return hmac.new(self.signing_key, f"{key}\n{expires}".encode(), sha256).hexdigest()

    def verify(self, key: str, expires: int, signature: str, now: float | None = None,
               target: str | None = None) -> bool:
        """The URL's signature is this key's and expiry's, and it has not
        expired; given the URL's path and query as the client sent them
        (`target`), they are exactly the form `signed_url` made: another
        spelling of the expiry (`+`, leading zeros), a repeated parameter or
        an extra `/` is refused like a bad signature (caches and filters
        keyed on the URL would see a different object)."""
        if expires < (time.time() if now is None else now):
            return False
        # As bytes: compare_digest refuses str with non-ASCII characters (a forged URL may carry them).
        if target is not None and not hmac.compare_digest(
                self.target(key, expires).encode(), target.encode("utf-8", "replace")):
            return False
        return hmac.compare_digest(self.signature(key, expires).encode(), signature.encode("utf-8", "replace"))


def _chunks(file: IO[bytes]) -> Iterator[bytes]:
    with file:
        while chunk := file.read(CHUNK_BYTES):
            yield chunk


def content_type_of(key: str) -> str:
    guessed, _ = mimetypes.guess_type(key)
    return guessed or "application/octet-stream"
