"""The Envoy → server hop is authenticated: a server trusts the client
address Envoy reports only from a call carrying the edge's secret, so a
local process cannot bypass an Enterprise IP allowlist by talking to the
backend port with a forged `x-envoy-client-address`."""

from __future__ import annotations

import grpc
import httpx
import pytest
from persona.v1 import orgs_pb2, orgs_pb2_grpc

# Another loopback address: Envoy sees the client there, the server sees Envoy at 127.0.0.1.
CLIENT_ADDRESS = "127.0.0.2"


@pytest.fixture(scope="module")
def office_key(http, tenants):
    enterprise = tenants(plan="enterprise")
    made = http.post("/v1/keys", headers=enterprise.auth,
                     json={"name": "office", "scopes": ["config:read"], "ipAllowlist": [f"{CLIENT_ADDRESS}/32"]})
    assert made.status_code == 200, made.text
    return enterprise, made.json()["secret"]


def test_the_address_envoy_reports_is_trusted(stack, office_key):
    enterprise, secret = office_key
    transport = httpx.HTTPTransport(local_address=CLIENT_ADDRESS)
    with httpx.Client(base_url=stack.http_url, transport=transport) as client:
        r = client.get(f"/v1/orgs/{enterprise.org_id}", headers={"Authorization": f"Bearer {secret}"})
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("edge_secret", [None, "guess"])
def test_a_forged_client_address_straight_to_the_backend_is_ignored(server_channel, office_key, edge_secret):
    enterprise, secret = office_key
    metadata = [("authorization", f"Bearer {secret}"), ("x-envoy-client-address", f"{CLIENT_ADDRESS}:5555")]
    if edge_secret is not None:
        metadata.append(("x-persona-edge-secret", edge_secret))
    stub = orgs_pb2_grpc.OrganizationServiceStub(server_channel)
    with pytest.raises(grpc.RpcError) as info:
        stub.GetOrganization(orgs_pb2.GetOrganizationRequest(id=enterprise.org_id), metadata=metadata)
    assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED


def test_a_caller_cannot_send_the_secret_header_through_envoy(http, office_key):
    enterprise, secret = office_key
    r = http.get(f"/v1/orgs/{enterprise.org_id}", headers={
        "Authorization": f"Bearer {secret}", "x-persona-edge-secret": "guess", "x-envoy-client-address": CLIENT_ADDRESS,
    })
    assert r.status_code == 403


def test_the_public_listener_binds_loopback_by_default(stack):
    assert stack.settings.http_host == "127.0.0.1"
    config = (stack.settings.data_dir / "envoy.yaml").read_text()
    assert f"address: 127.0.0.1, port_value: {stack.settings.http_port}" in config
    assert (stack.settings.data_dir / "envoy.yaml").stat().st_mode & 0o077 == 0
