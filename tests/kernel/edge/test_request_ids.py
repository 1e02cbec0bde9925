"""Request ids have one format whichever door a call comes in by: Envoy's
uuid4 for JSON and gRPC through the edge, the server's own uuid4 straight to
its port; a client's id is kept only when it is 1 to 128 of `[A-Za-z0-9._:@/+=-]`."""

from __future__ import annotations

import re
import time

import pytest

UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def _access_line(stack, request_id: str) -> str:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        found = [line for line in (stack.log_dir / "access.log").read_text().splitlines() if request_id in line]
        if found:
            return found[0]
        time.sleep(0.1)
    raise AssertionError(f"{request_id} is not in the access log")


def test_without_an_id_the_edge_makes_a_uuid4(http, tenant):
    r = http.get("/v1/personas", headers=tenant.auth)
    assert UUID4.match(r.headers["x-request-id"]), r.headers


@pytest.mark.parametrize("sent", ["has spaces in it", "x" * 129, "semi;colon", "quote\"d"])
def test_an_insane_client_id_is_replaced_everywhere_alike(http, stack, tenant, sent):
    r = http.get("/v1/personas/00000000-0000-4000-8000-000000000000", headers={**tenant.auth, "X-Request-Id": sent})
    assert r.status_code == 404
    (request_id,) = r.headers.get_list("x-request-id")
    assert UUID4.match(request_id), request_id
    assert request_id in _access_line(stack, request_id)


def test_a_sane_client_id_is_kept(http, tenant):
    sent = "client-id:0123/abc+def=="
    r = http.get("/v1/personas", headers={**tenant.auth, "X-Request-Id": sent})
    assert r.headers.get_list("x-request-id") == [sent]


def test_straight_to_the_server_the_id_is_a_uuid4_too(server_channel, tenant):
    from persona.v1 import orgs_pb2, orgs_pb2_grpc

    _, call = orgs_pb2_grpc.OrganizationServiceStub(server_channel).GetOrganization.with_call(
        orgs_pb2.GetOrganizationRequest(id=tenant.org_id), metadata=tenant.metadata, timeout=10)
    assert UUID4.match(dict(call.initial_metadata())["x-request-id"])
