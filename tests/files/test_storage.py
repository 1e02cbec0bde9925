"""The storage port's two backends pass the same contract: local files
(signed URLs answered by the service itself, through Envoy) and an
S3-compatible store (presigned URLs answered by the store)."""

from __future__ import annotations

import json
import time
import uuid
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from persona.v1 import files_pb2, files_pb2_grpc
from persona_service.files.local import LocalStorage
from persona_service.files.records import CHUNK_BYTES, ObjectNotFound
from persona_service.files.s3 import S3Storage
from persona_service.files.settings import FileSettings
from persona_service.files.storage import object_key, signing_key
from s3_server import s3_server
from support import JWT_SECRET, assert_envelope

PNG = b"\x89PNG\r\n\x1a\n" + b"pixels" * 100


@pytest.fixture(scope="module")
def s3():
    with s3_server() as server:
        yield server


@pytest.fixture(params=["local", "s3"])
def storage(request, stack, s3):
    if request.param == "local":
        # The servers' own key and data dir: the URLs it signs open through the stack's edge.
        return LocalStorage(stack.settings.data_dir / "objects", signing_key(JWT_SECRET),
                            f"http://127.0.0.1:{stack.settings.http_port}")
    return S3Storage(FileSettings(storage_backend="s3", s3_bucket=s3.bucket, s3_endpoint_url=s3.endpoint,
                                  s3_access_key_id="test-key", s3_secret_access_key="test-secret"))


def test_put_get_delete(storage):
    key = object_key("org_storage", "tests", f"{time.time_ns()}.png")
    storage.put(key, PNG, "image/png")
    got = storage.get(key)
    assert got.data == PNG and got.content_type == "image/png" and got.etag.startswith('"')
    storage.delete(key)
    with pytest.raises(ObjectNotFound):
        storage.get(key)
    storage.delete(key)  # deleting a missing object is fine


def test_put_file_stores_a_file_copied_in_parts(storage, tmp_path):
    """Big objects (privacy exports) come from a file, never whole in memory:
    the local backend copies it in chunks, S3 past 8 MiB as a multipart upload."""
    key = object_key("org_storage", "tests", f"{time.time_ns()}.json")
    body = (b'{"row": "' + b"x" * 1000 + b'"}\n') * 9000  # 9 MB: two parts
    path = tmp_path / "export.json"
    path.write_bytes(body)
    with path.open("rb") as file:
        storage.put_file(key, file, "application/json")
    got = storage.get(key)
    assert got.data == body and got.content_type == "application/json"
    storage.delete(key)


def test_open_reads_the_object_in_bounded_chunks(storage, tmp_path):
    """A download reads the object as it goes: chunks of at most CHUNK_BYTES
    (S3: the GET's streaming body), the same bytes, the size and type up front."""
    key = object_key("org_storage", "exports", f"{time.time_ns()}.json")
    body = (b'{"row": "' + b"y" * 1000 + b'"}\n') * 1500  # 1.5 MB: several chunks
    storage.put(key, body, "application/json")
    opened = storage.open(key)
    assert opened.size == len(body) and opened.content_type == "application/json" and opened.etag.startswith('"')
    chunks = list(opened.chunks)
    assert len(chunks) > 1 and max(map(len, chunks)) <= CHUNK_BYTES and b"".join(chunks) == body
    with pytest.raises(ObjectNotFound):
        storage.open(object_key("org_storage", "exports", "missing.json"))
    storage.delete(key)


def test_delete_prefix_removes_everything_under_it(storage):
    base = object_key("org_prefix", "portraits", str(time.time_ns()))
    keep = object_key("org_prefix", "portraits", f"{time.time_ns()}-other", "a.png")
    for name in ("a.png", "b.png", "c.png"):
        storage.put(f"{base}/{name}", PNG, "image/png")
    storage.put(keep, PNG, "image/png")
    assert storage.delete_prefix(base) == 3
    with pytest.raises(ObjectNotFound):
        storage.get(f"{base}/a.png")
    assert storage.get(keep).data == PNG


def test_a_signed_url_opens_the_object_without_credentials(storage):
    key = object_key("org_signed", "portraits", f"{time.time_ns()}.png")
    storage.put(key, PNG, "image/png")
    signed = storage.signed_url(key, 60)
    assert 50 < signed.expires_at.timestamp() - time.time() <= 61
    r = httpx.get(signed.url)
    assert r.status_code == 200, r.text
    assert r.content == PNG and r.headers["content-type"] == "image/png"


def test_keys_that_could_escape_are_refused(storage):
    for key in ("../etc/passwd", "org/../../x", "/abs", "org//x", "org/./x", "org/..", ""):
        with pytest.raises(ObjectNotFound):
            storage.get(key)
    with pytest.raises(ValueError):
        object_key("org", "..", "x")


def test_the_local_service_refuses_a_tampered_or_expired_url(stack):
    storage = LocalStorage(stack.settings.data_dir / "objects", signing_key(JWT_SECRET),
                           f"http://127.0.0.1:{stack.settings.http_port}")
    mine, theirs = (object_key(org, "portraits", f"{time.time_ns()}.png") for org in ("org_mine", "org_theirs"))
    storage.put(mine, PNG, "image/png")
    storage.put(theirs, PNG, "image/png")
    url = urlsplit(storage.signed_url(mine, 60).url)
    query = {k: v[0] for k, v in parse_qs(url.query).items()}
    base = f"http://127.0.0.1:{stack.settings.http_port}"
    assert httpx.get(base + url.path, params=query).status_code == 200
    cases = [
        (url.path.replace("org_mine", "org_theirs").replace(mine.split("/")[-1], theirs.split("/")[-1]), query),
        (url.path, {**query, "expires": str(int(query["expires"]) + 1)}),
        (url.path, {**query, "signature": query["signature"][::-1]}),
        # Found by schemathesis: a signature that is not ASCII, a far expiry.
        (url.path, {**query, "signature": "õÊqýÊ"}),
        (url.path, {**query, "signature": "õÊqýÊ", "expires": str(2**32 - 1)}),
    ]
    for path, params in cases:
        r = httpx.get(base + path, params=params)
        assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden", (path, r.text)
    # `expires` is a uint32 (Unix seconds until 2106): beyond it the edge answers 400.
    r = httpx.get(base + url.path, params={**query, "expires": "9223372036854775807"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "bad_request", r.text
    expired = urlsplit(storage.signed_url(mine, -1).url)
    assert httpx.get(base + expired.path + "?" + expired.query).status_code == 403
    missing = urlsplit(storage.signed_url(object_key("org_mine", "gone.png"), 60).url)
    assert httpx.get(base + missing.path + "?" + missing.query).status_code == 404


def test_the_local_service_answers_only_the_canonical_url(stack):
    """Only the exact URL signed_url made opens the object: any other
    spelling of it is refused as a bad signature is (the audit found each of
    these downloading)."""
    storage = LocalStorage(stack.settings.data_dir / "objects", signing_key(JWT_SECRET),
                           f"http://127.0.0.1:{stack.settings.http_port}")
    key = object_key("org_canonical", "portraits", f"{time.time_ns()}.png")
    storage.put(key, PNG, "image/png")
    url = urlsplit(storage.signed_url(key, 60).url)
    base = f"http://127.0.0.1:{stack.settings.http_port}"
    query = {k: v[0] for k, v in parse_qs(url.query).items()}
    expires, signature = query["expires"], query["signature"]
    assert httpx.get(f"{base}{url.path}?{url.query}").status_code == 200
    assert httpx.head(f"{base}{url.path}?{url.query}").status_code == 200
    for target in [
        f"{url.path}?expires=0{expires}&signature={signature}",
        f"{url.path}?expires=%2B{expires}&signature={signature}",
        f"{url.path}?{url.query}&expires={expires}",
        f"{url.path}?{url.query}&signature={signature}",
        f"{url.path}?signature={signature}&expires={expires}",
        f"{url.path}/?{url.query}",
        f"{url.path.replace('/portraits/', '/%70ortraits/')}?{url.query}",
    ]:
        r = httpx.get(base + target)
        error = assert_envelope(r, 403, "forbidden")
        assert error["details"] == {"reason": "bad_signature"}, (target, r.text)
    # The path the edge reports is its own, not one the client sends.
    forged = httpx.get(f"{base}{url.path}/?{url.query}", headers={"x-envoy-original-path": f"{url.path}?{url.query}"})
    assert forged.status_code == 403, forged.text


def test_a_download_is_streamed_in_bounded_chunks_through_the_edge(stack, edge_channel):
    """GET /v1/files/... streams the object (the service never holds it
    whole): native gRPC sees messages of at most CHUNK_BYTES; HTTP the same
    bytes with Content-Length, ETag and Cache-Control; HEAD the headers
    alone. The signature reaches neither the access log nor the server's logs."""
    storage = LocalStorage(stack.settings.data_dir / "objects", signing_key(JWT_SECRET),
                           f"http://127.0.0.1:{stack.settings.http_port}")
    key = object_key("org_download", "privacy", f"{time.time_ns()}.json")
    body = bytes(range(256)) * 6000  # 1.5 MB
    storage.put(key, body, "application/json")
    url = urlsplit(storage.signed_url(key, 60).url)
    query = {k: v[0] for k, v in parse_qs(url.query).items()}
    request = files_pb2.GetFileRequest(key=key, expires=int(query["expires"]), signature=query["signature"])
    messages = list(files_pb2_grpc.FileServiceStub(edge_channel).GetFile(request, timeout=30))
    assert messages[0].content_type == "application/json" and len(messages) > 2
    assert max(len(m.data) for m in messages) <= CHUNK_BYTES and b"".join(m.data for m in messages) == body
    request_id = "req-download-" + uuid.uuid4().hex[:12]
    target = f"http://127.0.0.1:{stack.settings.http_port}{url.path}?{url.query}"
    r = httpx.get(target, headers={"X-Request-Id": request_id})
    assert r.status_code == 200 and r.content == body and r.headers["content-length"] == str(len(body))
    assert r.headers["content-type"] == "application/json" and r.headers["etag"].startswith('"')
    assert r.headers["cache-control"].startswith("private, max-age=")
    head = httpx.head(target)
    assert head.status_code == 200 and head.content == b"" and head.headers["content-length"] == str(len(body))
    assert head.headers["etag"] == r.headers["etag"]
    deadline = time.monotonic() + 5  # Envoy flushes its log every 200 ms
    while request_id not in (stack.log_dir / "access.log").read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    (line,) = [json.loads(x) for x in (stack.log_dir / "access.log").read_text().splitlines() if request_id in x]
    assert line["status"] == 200 and line["path"] == url.path + "?expires&signature"
    for log in stack.log_dir.iterdir():
        assert query["signature"] not in log.read_text(errors="replace"), log.name
