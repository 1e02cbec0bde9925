"""Bad input becomes a 4xx in the envelope, never a 500: NUL characters,
huge echoed values, deeply nested JSON."""

from __future__ import annotations

import json
import socket

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2
from persona.v1 import keys_pb2, keys_pb2_grpc
from support import assert_envelope

INTENT = "A grumpy lighthouse keeper who loves jazz"


def _nested(depth: int) -> dict:
    value: dict = {"leaf": "x"}
    for _ in range(depth - 1):
        value = {"n": value}
    return value


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("POST", "/v1/keys", {"name": "a\u0000b", "scopes": ["personas:read"]}, "name"),
        ("POST", "/v1/keys", {"name": "k", "scopes": ["personas:read\u0000"]}, "scopes[0]"),
        ("POST", "/v1/personas", {"intent": INTENT + "\u0000"}, "intent"),
        ("POST", "/v1/personas", {"intent": INTENT, "metadata": {"team\u0000": "x"}}, "metadata.team\u0000"),
        ("POST", "/v1/personas", {"intent": INTENT, "metadata": {"team": ["ok", "b\u0000d"]}}, "metadata.team[1]"),
        ("POST", "/v1/webhooks", {"url": "http://127.0.0.1:9/h", "events": ["*"], "description": "\u0000"},
         "description"),
    ],
)
def test_null_characters_are_refused_naming_the_field(http, tenant, method, path, body, field):
    r = http.request(method, path, json=body, headers=tenant.auth)
    error = assert_envelope(r, 422, "validation_failed")
    assert field in [v["path"] for v in error["details"]["validationErrors"]]
    assert "null_character" in [v["code"] for v in error["details"]["validationErrors"]]


def _not_json(name: str) -> None:
    raise AssertionError(f"{name} in a body: not JSON")


SESSION = "/v1/chat/sessions/chs_01JH3K4M5N6P7Q8R9S0T1V2W3X"
COMPLETION = {"model": "persona://per_01JH3K4M5N6P7Q8R9S0T1V2W3X", "messages": [{"role": "user", "content": "Hi"}]}


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity"])
@pytest.mark.parametrize(("path", "body", "field", "status"), [
    (SESSION + "/messages", {"content": "Hi"}, "temperature", 422),
    (SESSION + "/messages/preview", {"content": "Hi"}, "temperature", 422),
    ("/v1/chat/completions", COMPLETION, "top_p", 400),  # OpenAI's status there
    ("/v1/chat/completions", COMPLETION, "temperature", 400),
], ids=["message", "preview", "completion-top_p", "completion-temperature"])
def test_a_non_finite_number_as_proto3_json_spells_it_is_refused_naming_the_field(http, tenant, path, body, field,
                                                                                   status, number):
    # proto3's JSON mapping reads these strings into a double: NaN fails no bound, so it was taken as a value.
    r = http.post(path, json={**body, field: number}, headers=tenant.auth)
    error = assert_envelope(r, status, "validation_failed")
    json.loads(r.text, parse_constant=_not_json)  # (an echoed infinity was printed as JSON has none)
    assert [(v["path"], v["code"], v["value"]) for v in error["details"]["validationErrors"]] == [
        (field, "type", number)]


def test_null_character_in_a_path_id_is_not_a_500(http, tenant):
    r = http.get("/v1/chat/sessions/chs_a%00b", headers=tenant.auth)
    assert r.status_code in (404, 422), r.text
    assert r.headers["content-type"] == "application/json"


def test_huge_invalid_values_are_echoed_bounded_in_valid_json(http, tenant):
    huge = "x" * 20_000
    r = http.post("/v1/keys", json={"name": "k", "scopes": [huge] * 30}, headers=tenant.auth)
    error = assert_envelope(r, 422, "validation_failed")
    assert len(r.content) < 16_384
    echoed = error["details"]["validationErrors"][0]["value"]
    assert echoed.endswith("…") and len(echoed) <= 201


def test_huge_invalid_values_reach_native_grpc_callers_as_invalid_argument(edge_channel, tenant):
    stub = keys_pb2_grpc.ApiKeyServiceStub(edge_channel)
    with pytest.raises(grpc.RpcError) as info:
        stub.CreateApiKey(keys_pb2.CreateApiKeyRequest(name="k", scopes=["y" * 20_000] * 30), metadata=tenant.metadata)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    status = next(v for k, v in info.value.trailing_metadata() if k == "grpc-status-details-bin")
    details = status_pb2.Status.FromString(status).details
    info_detail = error_details_pb2.ErrorInfo()
    details[0].Unpack(info_detail)
    assert info_detail.reason == "validation_failed"


@pytest.mark.parametrize("depth", [34, 60, 99, 150])
def test_deeply_nested_metadata_is_a_client_error(http, tenant, depth):
    r = http.post("/v1/personas", content=json.dumps({"intent": INTENT, "metadata": _nested(depth)}),
                  headers={**tenant.auth, "content-type": "application/json"})
    assert 400 <= r.status_code < 500, r.text
    assert r.headers["content-type"] == "application/json"
    assert set(r.json()) == {"error"}


def test_a_body_over_the_limit_is_413_not_429(http, tenant):
    body = json.dumps({"name": "k", "scopes": ["personas:read"], "pad": "x" * (10 * 1024 * 1024)})
    r = http.post("/v1/keys", content=body, headers={**tenant.auth, "content-type": "application/json"})
    assert_envelope(r, 413, "payload_too_large")


@pytest.mark.parametrize("value", ["x", "500", "-1S", "99999999999H"])
def test_a_malformed_grpc_timeout_on_a_json_call_is_ignored(http, tenant, value):
    r = http.get(f"/v1/orgs/{tenant.org_id}", headers={**tenant.auth, "grpc-timeout": value})
    assert r.status_code == 200, r.text


def _raw_get(stack, target: str, extra_header: str = "") -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 request on a socket (clients refuse to send such URLs). The response is read to its
    Content-Length, not to the connection's close: Envoy closes only after its delayed-close timeout (1 s) unless
    the client closes first, so reading to the close waited a second a call."""
    with socket.create_connection(("127.0.0.1", stack.settings.http_port), timeout=10) as sock:
        sock.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\n{extra_header}Connection: close\r\n\r\n".encode())
        data = b""
        while b"\r\n\r\n" not in data and (chunk := sock.recv(65536)):
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        headers = {k.lower(): v for k, v in (line.split(": ", 1) for line in lines[1:])}
        length = int(headers["content-length"]) if "content-length" in headers else None
        while (length is None or len(body) < length) and (chunk := sock.recv(65536)):
            body += chunk
    return int(lines[0].split()[1]), headers, body


@pytest.mark.parametrize("where", ["header", "url"])
def test_oversized_urls_and_headers_get_the_envelope(stack, tenant, where):
    big = "a" * 70_000
    target, header = (f"/v1/orgs/{tenant.org_id}?{big}=1", "") if where == "url" else (
        f"/v1/orgs/{tenant.org_id}", f"X-Big: {big}\r\n")
    status, headers, body = _raw_get(stack, target, header)
    assert status == 431
    assert headers["content-type"] == "application/json"
    assert json.loads(body)["error"]["code"] == "headers_too_large"


@pytest.mark.parametrize("content_type", ["application/grpc-web+json", "application/grpc-web", "application/grpc-web-text"])
def test_grpc_web_is_refused_with_the_envelope(http, tenant, content_type):
    r = http.post("/v1/keys", headers={**tenant.auth, "content-type": content_type}, content=b"{}")
    assert_envelope(r, 415, "unsupported_media_type")


# Oversized input is a 4xx that says what is too large, never 429 (which
# clients retry): before, headers over gRPC's default 8 KiB of metadata failed
# in the server as RESOURCE_EXHAUSTED, which the edge answered 429 `rate_limited`.
URL_LIMIT = 8192  # process/edge.py EDGE_URL_BYTES


def test_a_url_over_the_limit_is_431_naming_the_limit(http, tenant):
    path = "/v1/personas/"
    r = http.get(path + "p" * (12_000 - len(path)), headers=tenant.auth)
    error = assert_envelope(r, 431, "headers_too_large")
    assert f"{URL_LIMIT} bytes of URL" in error["message"]


def test_a_scim_filter_over_the_limit_is_431_in_scims_error_schema(http):
    r = http.get("/v1/auth/scim/v2/Users", params={"filter": 'userName eq "' + "a" * 14_000 + '"'})
    assert r.status_code == 431, r.text
    assert r.headers["content-type"].startswith("application/scim+json")
    body = r.json()
    assert body["schemas"] == ["urn:ietf:params:scim:api:messages:2.0:Error"] and body["status"] == "431"


def test_a_url_at_the_limit_reaches_the_server(http, tenant):
    path = "/v1/personas/"
    r = http.get(path + "p" * (URL_LIMIT - len(path)), headers=tenant.auth)
    assert_envelope(r, 404, "not_found")


@pytest.mark.parametrize("size", [20_000, 40_000])
def test_headers_within_the_edge_limit_reach_the_server(http, tenant, size):
    r = http.get(f"/v1/orgs/{tenant.org_id}", headers={**tenant.auth, "x-big": "b" * size})
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("target", [
    "/v1/files/%ff%fe/x.png?expires=1&signature=x",
    "/v1/personas/per_%C0%AF",  # an overlong '/'
    "/v1/personas/per_%ED%A0%80",  # a surrogate
    "/v1/auth/scim/v2/Users?filter=userName%20eq%20%22%E9%22",
])
def test_a_url_that_is_not_utf8_is_400_saying_so(stack, target):
    status, headers, body = _raw_get(stack, target)
    assert status == 400, body
    error = json.loads(body)
    message = error["error"]["message"] if "error" in error else error["detail"]
    assert "not valid UTF-8" in message, message


def test_a_percent_encoded_utf8_url_is_served(http, tenant):
    r = http.get("/v1/personas/%C3%A9t%C3%A9%F0%9F%98%80", headers=tenant.auth)
    assert_envelope(r, 404, "not_found")
