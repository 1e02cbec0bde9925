"""Objects in an S3-compatible store (AWS S3, MinIO, R2, …) through boto3;
signed URLs are the store's own presigned GETs."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import IO, Protocol, runtime_checkable

import boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import ClientError

from persona_service.files.records import (
    CHUNK_BYTES,
    KEY,
    ObjectNotFound,
    ObjectStream,
    SignedUrl,
    StoredObject,
    etag_of,
)
from persona_service.files.settings import FileSettings

_MISSING = ("NoSuchKey", "404", "NotFound")
# put_file: a multipart upload past 8 MiB, parts of 8 MiB, two at a time (about 16 MiB held).
_TRANSFER = TransferConfig(multipart_threshold=8 * 2**20, multipart_chunksize=8 * 2**20, max_concurrency=2)
_PUT_ARGS = {"CacheControl": "private, max-age=900, immutable"}
# boto3 is untyped: a GET's answer is read as JSON is, its values `object` until checked (the readers below).
_Answer = dict[str, object]


@runtime_checkable
class _Body(Protocol):
    """A GET's `Body` as read here (botocore's StreamingBody)."""

    def read(self) -> bytes: ...

    def iter_chunks(self, chunk_size: int) -> Iterator[bytes]: ...

    def close(self) -> None: ...


class S3Storage:
    name = "s3"

    def __init__(self, settings: FileSettings):
        self.bucket = settings.s3_bucket
        options: dict[str, str] = {"region_name": settings.s3_region}
        if settings.s3_endpoint_url:
            options["endpoint_url"] = settings.s3_endpoint_url
        if settings.s3_access_key_id:
            options["aws_access_key_id"] = settings.s3_access_key_id
            options["aws_secret_access_key"] = settings.s3_secret_access_key
        self.client = boto3.client(
            "s3", config=Config(signature_version="s3v4", retries={"max_attempts": 3, "mode": "standard"},
                                max_pool_connections=32),
            **options,
        )

    def put(self, key: str, data: bytes, content_type: str) -> None:
        self._check(key)
        self.client.put_object(Bucket=self.bucket, Key=key, Body=data, ContentType=content_type, **_PUT_ARGS)

    def put_file(self, key: str, file: IO[bytes], content_type: str) -> None:
        self._check(key)
        self.client.upload_fileobj(file, self.bucket, key, ExtraArgs={"ContentType": content_type, **_PUT_ARGS},
                                   Config=_TRANSFER)

    def get(self, key: str) -> StoredObject:
        answer = self._get_object(key)
        data = _body(answer).read()
        return StoredObject(data, _content_type(answer), etag_of(data))

    def open(self, key: str) -> ObjectStream:
        """The GET's body read as it is consumed (a streaming body over one pooled connection)."""
        answer = self._get_object(key)
        size, etag = answer["ContentLength"], answer["ETag"]
        if not isinstance(size, int) or not isinstance(etag, str):
            raise TypeError(f"S3's GET answered ContentLength {size!r}, ETag {etag!r}: not an int and a string")
        return ObjectStream(size, _content_type(answer), etag, _chunks(_body(answer)))

    def _get_object(self, key: str) -> _Answer:
        self._check(key)
        try:
            answer: object = self.client.get_object(Bucket=self.bucket, Key=key)
            return answer if isinstance(answer, dict) else {}
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in _MISSING:
                raise ObjectNotFound(key) from None
            raise

    def delete(self, key: str) -> None:
        self._check(key)
        self.client.delete_object(Bucket=self.bucket, Key=key)

    def delete_prefix(self, prefix: str) -> int:
        self._check(prefix)
        count = 0
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix + "/"):
            keys = [{"Key": item["Key"]} for item in page.get("Contents", ())]
            if keys:
                self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": keys, "Quiet": True})
                count += len(keys)
        return count

    def signed_url(self, key: str, ttl_seconds: int) -> SignedUrl:
        self._check(key)
        url = self.client.generate_presigned_url(
            "get_object", Params={"Bucket": self.bucket, "Key": key}, ExpiresIn=ttl_seconds,
        )
        return SignedUrl(url, datetime.now(UTC) + timedelta(seconds=ttl_seconds))

    @staticmethod
    def _check(key: str) -> None:
        if not KEY.match(key):
            raise ObjectNotFound(key)


def _body(answer: _Answer) -> _Body:
    body = answer["Body"]
    if not isinstance(body, _Body):
        raise TypeError(f"S3's GET answered a Body that is no stream: {type(body).__name__}")
    return body


def _content_type(answer: _Answer) -> str:
    found = answer.get("ContentType")
    return found if isinstance(found, str) and found else "application/octet-stream"


def _chunks(body: _Body) -> Iterator[bytes]:
    try:
        yield from body.iter_chunks(CHUNK_BYTES)
    finally:
        body.close()  # an early stop gives the connection up (not back to the pool half-read)
