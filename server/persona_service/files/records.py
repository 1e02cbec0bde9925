"""What an object of the storage is: its key's form, its records and its ETag. Below the port
(storage.py) and both backends (local.py, s3.py), which all use them: the port opens a backend,
so they live here rather than in the port, and no backend imports the module that opens it."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

# A key: '/'-separated segments of letters, digits, '.', '_' and '-', none of them '.' or '..'.
_SEGMENT = r"(?!\.{1,2}(?:/|$))[A-Za-z0-9_.-]{1,128}"
KEY = re.compile(rf"^{_SEGMENT}(/{_SEGMENT}){{0,15}}$")
# `open` reads an object in chunks of at most this many bytes.
CHUNK_BYTES = 256 * 1024


@dataclass(frozen=True)
class StoredObject:
    data: bytes
    content_type: str
    etag: str  # quoted, as the ETag header carries it


@dataclass(frozen=True)
class ObjectStream:
    """An object read as it is consumed: `chunks` yields at most CHUNK_BYTES
    at a time and releases the object (file, connection) when exhausted or closed."""

    size: int
    content_type: str
    etag: str  # quoted; the store's (S3) or one of the file's identity (local), not a content hash
    chunks: Iterator[bytes]


@dataclass(frozen=True)
class SignedUrl:
    url: str
    expires_at: datetime


class ObjectNotFound(Exception):
    """No object under that key."""


def etag_of(data: bytes) -> str:
    return '"' + hashlib.sha256(data).hexdigest()[:32] + '"'
