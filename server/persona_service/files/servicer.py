"""GET /v1/files/{key}: the local backend's signed URLs, answered by the service itself, streamed."""

from __future__ import annotations

import time
from collections.abc import Iterator

from google.api import httpbody_pb2
from persona.v1 import files_pb2

from persona_service.files.local import LocalStorage
from persona_service.files.records import ObjectNotFound
from persona_service.files.storage import storage_for
from persona_service.kernel.api import EDGE_MARK, HEAD_MARK, Forbidden, NotFound, RequestContext, ServicerDeps

# Where the transcoder keeps the path and query the client sent.
ORIGINAL_PATH = "x-envoy-original-path"


class FileServicer:
    def __init__(self, deps: ServicerDeps) -> None:
        self.deps = deps

    def GetFile(self, request: files_pb2.GetFileRequest,
                ctx: RequestContext) -> Iterator[httpbody_pb2.HttpBody]:
        """The object in chunks as the storage reads them (a download of any size holds one chunk)."""
        storage = storage_for(self.deps)
        if not isinstance(storage, LocalStorage):  # the object store serves its own presigned URLs
            raise NotFound("file")
        if not storage.verify(request.key, request.expires, request.signature, target=_url_sent(ctx)):
            raise Forbidden("The signed URL is invalid or has expired.", {"reason": "bad_signature"})
        try:
            stream = storage.open(request.key)
        except ObjectNotFound:
            raise NotFound("file") from None
        left = max(0, request.expires - int(time.time()))
        ctx.respond(etag=stream.etag, cache_control=f"private, max-age={left}, immutable",
                          content_length=str(stream.size))
        # The first message carries the content type (and the headers) even for an empty object or a HEAD.
        yield httpbody_pb2.HttpBody(content_type=stream.content_type)
        if ctx.metadata.get(HEAD_MARK) == "1":
            return
        for chunk in stream.chunks:
            yield httpbody_pb2.HttpBody(data=chunk)


def _url_sent(ctx: RequestContext) -> str | None:
    """The URL's path and query as the client sent them, for a call that came
    as HTTP through the edge ("" if missing: refused); None for native gRPC,
    whose fields are the only form."""
    metadata = ctx.metadata
    return metadata.get(ORIGINAL_PATH, "") if EDGE_MARK in metadata else None
