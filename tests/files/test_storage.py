"""The storage port's two backends pass the same contract: local files
(signed URLs answered by the service itself, through Envoy) and an
S3-compatible store (presigned URLs answered by the store)."""

from __future__ import annotations

import time
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from persona_service.files.local import LocalStorage
from persona_service.files.s3 import S3Storage
from persona_service.files.settings import FileSettings
from persona_service.files.storage import ObjectNotFound, object_key, signing_key
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
