"""Contract: an RPC declares how the edge answers it (JSON, a redirect, a raw
body) and the shape of its errors (envelope, portrait, SCIM); the server
decides status and headers and Envoy's Lua passes them through without
per-path tables. Proved through Envoy with a probe module loaded from outside
the registry (PERSONA_EXTRA_MODULES), as a deployment's own domain would be."""

from __future__ import annotations

import json
import os
import pathlib
import sys

import httpx
import pytest
from grpc_tools import protoc
from persona_service.kernel.module import Modules
from persona_service.registry import MODULES
from support import assert_envelope, client_for, make_stack_beside, running

PROBE = pathlib.Path(__file__).parent / "probe"
ROOT = pathlib.Path(__file__).resolve().parents[3]
GOOGLEAPIS = ROOT / "third_party" / "googleapis"
WELL_KNOWN = pathlib.Path(protoc.__file__).resolve().parent / "_proto"
SCIM = "application/scim+json"


def _compile_probe(out: pathlib.Path) -> None:
    args = ["protoc", f"-I{PROBE}", f"-I{ROOT / 'proto'}", f"-I{GOOGLEAPIS}", f"-I{WELL_KNOWN}",
            f"--python_out={out}", f"--grpc_python_out={out}", "--include_imports",
            f"--descriptor_set_out={out / 'probe.binpb'}", "probe.proto"]
    assert protoc.main(args) == 0


@pytest.fixture(scope="module")
def probe_stack(stack, tmp_path_factory):
    gen = tmp_path_factory.mktemp("probe-gen")
    _compile_probe(gen)
    env = {"PERSONA_EXTRA_MODULES": "probe_module:MODULE", "PERSONA_PROBE_GEN": str(gen),
           "PYTHONPATH": os.pathsep.join([str(gen), str(PROBE), os.environ.get("PYTHONPATH", "")])}
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    sys.path[:0] = [str(gen), str(PROBE)]
    try:
        modules = Modules(MODULES.all)
        assert "probe.v1.ProbeService" in modules.service_names
        # The probe module has no tables: its processes run on the session's PostgreSQL and Redis.
        with running(make_stack_beside(stack, tmp_path_factory.mktemp("probe"), modules=modules)) as probed:
            yield probed
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        sys.path[:] = [p for p in sys.path if p not in (str(gen), str(PROBE))]


@pytest.fixture(scope="module")
def client(probe_stack, tenant):
    with client_for(probe_stack) as http:
        http.headers.update(tenant.auth)
        yield http


CARRIERS = ("x-persona-status", "x-http-status", "x-error-body", "x-error-content-type", "x-error-code", "grpc-status")


def no_carriers(response: httpx.Response) -> None:
    for name in response.headers:
        assert name not in CARRIERS and not name.startswith("x-persona-set-"), response.headers


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_redirect_has_location_and_no_body(client, method):
    response = client.request(method, "/v1/probe/links/invoice-1")
    assert response.status_code == 307
    assert response.headers["location"] == "https://files.example.com/invoice-1.pdf?sig=abc"
    assert response.content == b""
    assert "content-type" not in response.headers
    assert response.headers["x-request-id"]
    no_carriers(response)


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_redirect_route_errors_in_the_envelope(client, method):
    response = client.request(method, "/v1/probe/links/missing")
    assert response.status_code == 404
    if method == "GET":
        assert_envelope(response, 404, "not_found")
    else:
        assert response.content == b""
        assert int(response.headers["content-length"]) > 0  # the length GET's body would have
    no_carriers(response)


def test_raw_png_body_with_its_content_type_and_headers(client):
    response = client.get("/v1/probe/images/cat")
    assert response.status_code == 200
    assert response.headers["content-type"] == "image/png"
    assert response.headers["cache-control"] == "private, max-age=60"
    assert response.content.startswith(b"\x89PNG\r\n\x1a\n")
    assert int(response.headers["content-length"]) == len(response.content)
    no_carriers(response)


def test_head_on_a_raw_body_keeps_headers_and_length_without_the_body(client):
    get = client.get("/v1/probe/images/cat")
    head = client.head("/v1/probe/images/cat")
    assert head.status_code == 200
    assert head.content == b""
    assert head.headers["content-type"] == "image/png"
    assert head.headers["content-length"] == get.headers["content-length"]
    no_carriers(head)


def test_html_page(client):
    response = client.get("/v1/probe/page")
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    assert response.text.startswith("<!doctype html>")


def test_scim_round_trip_201_with_location_and_etag(client):
    body = json.dumps({"schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"], "userName": "ada@example.com"})
    response = client.post("/v1/probe/scim/Users", content=body, headers={"Content-Type": SCIM})
    assert response.status_code == 201, response.text
    assert response.headers["content-type"] == SCIM
    assert response.headers["location"] == "/v1/probe/scim/Users/u1"
    assert response.headers["etag"] == 'W/"1"'
    user = response.json()
    assert user["userName"] == "ada@example.com"
    assert user["meta"]["received_content_type"] == SCIM  # the body reached the RPC as sent
    no_carriers(response)


def test_scim_errors_use_the_scim_schema(client):
    response = client.post("/v1/probe/scim/Users", content=json.dumps({"schemas": []}), headers={"Content-Type": SCIM})
    assert response.status_code == 422
    assert response.headers["content-type"] == SCIM
    # A validation error carries the envelope's `error` beside SCIM's schema (the spec's 422)...
    assert response.json() == {"schemas": ["urn:ietf:params:scim:api:messages:2.0:Error"], "status": "422",
                               "detail": "userName is required.", "scimType": "invalidValue",
                               "error": {"code": "validation_failed", "message": "userName is required.",
                                         "details": {"scimType": "invalidValue"}}}
    missing = client.get("/v1/probe/scim/Users/nobody")
    assert missing.status_code == 404
    assert missing.headers["content-type"] == SCIM
    # ...other errors only SCIM's schema, which strict SCIM clients check member by member.
    assert missing.json() == {"schemas": ["urn:ietf:params:scim:api:messages:2.0:Error"], "status": "404",
                              "detail": "The user does not exist."}
    no_carriers(missing)


def test_unknown_query_parameters_are_allowed_on_a_lenient_prefix_only(client):
    # Entra sends its own query parameters to SCIM endpoints.
    lenient = client.get("/v1/probe/scim/Users/nobody", params={"aadOptscim062020": "1", "attributes": "userName"})
    assert lenient.status_code == 404 and lenient.headers["content-type"] == SCIM
    strict = client.get("/v1/probe/images/cat", params={"aadOptscim062020": "1"})
    assert_envelope(strict, 400, "bad_request")
    assert "aadOptscim062020" in strict.json()["error"]["message"]


@pytest.mark.parametrize(("portrait", "status", "code", "extra"), [
    ("missing", 404, "not_found", {}),
    ("moderated", 422, "moderation_blocked", {"term": "gore"}),
    ("upstream", 502, "provider_error", {"provider": "local"}),
])
def test_portrait_error_shape(client, portrait, status, code, extra):
    response = client.post(f"/v1/probe/portraits/{portrait}/edit", json={"instruction": "smile"})
    assert response.status_code == status
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["error"] == code and isinstance(body["message"], str) and body["message"]
    assert {k: v for k, v in body.items() if k not in ("error", "message")} == extra
    no_carriers(response)


def test_portrait_shape_covers_validation_too(client):
    response = client.post("/v1/probe/portraits/p1/edit", json={"instruction": "x" * 501})
    assert response.status_code == 422
    body = response.json()
    assert body["error"] == "validation_failed"
    assert body["validationErrors"][0]["path"] == "instruction"


def test_json_kind_is_unchanged(client):
    response = client.post("/v1/probe/portraits/p1/edit", json={"instruction": "smile"})
    assert response.status_code == 200
    assert response.json() == {"portraitId": "p1"}
    no_carriers(response)


def test_head_works_on_json_routes_too(client):
    response = client.head("/v1/probe/portraits/p1/edit")
    assert response.status_code in (404, 405)  # no GET binding there: not silently a POST


def test_a_redirect_rpc_without_uri_is_a_startup_error():
    from google.protobuf import descriptor_pb2, descriptor_pool
    from persona.v1 import options_pb2
    from persona_service.kernel.transport.policy import method_table

    pool = descriptor_pool.DescriptorPool()
    for file in descriptor_pb2.FileDescriptorSet.FromString(
            (ROOT / "gen" / "descriptor.binpb").read_bytes()).file:
        if file.name in ("google/protobuf/descriptor.proto", "google/rpc/code.proto", "persona/v1/options.proto"):
            pool.Add(file)
    broken = descriptor_pb2.FileDescriptorProto(name="broken.proto", package="broken", syntax="proto3",
                                                dependency=["persona/v1/options.proto"])
    broken.message_type.add(name="Empty")
    method = broken.service.add(name="Broken").method.add(name="Go", input_type=".broken.Empty", output_type=".broken.Empty")
    method.options.Extensions[options_pb2.policy].response = options_pb2.RESPONSE_KIND_REDIRECT
    pool.Add(broken)
    with pytest.raises(RuntimeError, match="no string field `uri`"):
        method_table([pool.FindServiceByName("broken.Broken")])
