"""The Envoy → server hop is authenticated: a server trusts the client
address Envoy reports only from a call carrying the edge's secret, so a
local process cannot bypass an Enterprise IP allowlist by talking to the
backend port with a forged `x-envoy-client-address`. The secret is in no
place another local user can read: not on Envoy's admin interface (a Unix
socket only the owner may open, whose config dump names only the variable),
not in a file, not in any process's argv."""

from __future__ import annotations

import contextlib
import os
import pathlib
import re
import stat

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


def _admin_shown_secret(stack) -> str:
    """What Envoy's admin interface shows as the edge secret header's value."""
    status, dump = stack.envoy_admin("/config_dump")
    assert status == 200
    (value,) = set(re.findall(r'"key": "x-persona-edge-secret",\s*"value": "([^"]*)"', dump.decode()))
    return value


@pytest.mark.parametrize("edge_secret", [None, "guess", "from the admin interface"])
def test_a_forged_client_address_straight_to_the_backend_is_ignored(stack, server_channel, office_key, edge_secret):
    enterprise, secret = office_key
    if edge_secret == "from the admin interface":
        edge_secret = _admin_shown_secret(stack)
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


def _listening_tcp_ports(pid: int) -> set[int]:
    """The TCP ports a process listens on (its socket inodes in /proc/net/tcp*)."""
    inodes = set()
    for fd in pathlib.Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            inodes.update(re.findall(r"^socket:\[(\d+)\]$", os.readlink(fd)))
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in pathlib.Path(table).read_text().splitlines()[1:]:
            fields = row.split()
            if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def test_envoys_admin_interface_is_an_owner_only_socket(stack):
    envoy = stack.process("envoy")
    assert envoy is not None
    assert _listening_tcp_ports(envoy.pid) == {stack.settings.http_port}
    mode = stack.admin_socket.stat().st_mode
    assert stat.S_ISSOCK(mode) and mode & 0o077 == 0
    assert stack.envoy_admin("/ready") == (200, b"LIVE\n")


def test_the_edge_secret_is_in_no_file_argv_or_admin_answer(stack):
    secret = stack.process_env()["PERSONA_EDGE_SECRET"]
    assert len(secret) >= 32
    assert _admin_shown_secret(stack) == "%ENVIRONMENT(PERSONA_EDGE_SECRET)%"
    for path in ("/config_dump", "/config_dump?include_eds", "/runtime", "/server_info", "/clusters", "/stats"):
        assert secret.encode() not in stack.envoy_admin(path)[1], path
    data = stack.settings.data_dir
    for path in [*data.glob("*"), *(data / "logs").glob("*")]:
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
    for name in ("envoy", f"server-{stack.grpc_ports[0]}"):
        process = stack.process(name)
        assert process is not None
        assert secret.encode() not in pathlib.Path(f"/proc/{process.pid}/cmdline").read_bytes(), name
