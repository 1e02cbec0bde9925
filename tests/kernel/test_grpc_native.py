"""Native gRPC callers (mirrors server/persona_service/transport): the same
RPCs through Envoy's public port (h2c) and straight to the server, with the
catalogue's gRPC codes and the rich status details (google.rpc.ErrorInfo +
persona.v1.Error) in `grpc-status-details-bin`."""

from __future__ import annotations

import grpc
import pytest
from floating_fields import floating_fields
from google.protobuf import json_format, struct_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from grpc_status import rpc_status
from persona.v1 import (
    admin_pb2,
    admin_pb2_grpc,
    config_pb2,
    config_pb2_grpc,
    errors_pb2,
    keys_pb2,
    keys_pb2_grpc,
    orgs_pb2,
    orgs_pb2_grpc,
)

DOMAIN = "persona-service"
TIMEOUT = 10


@pytest.fixture(params=["edge", "server"])
def channel(request, edge_channel, server_channel) -> grpc.Channel:
    return edge_channel if request.param == "edge" else server_channel


def bearer(key: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {key}"),)


def expect_error(call, request, metadata, code: grpc.StatusCode, reason: str) -> tuple[grpc.RpcError, errors_pb2.Error]:
    """Make the call, expect it to fail with `code`, and check the rich status:
    an ErrorInfo (reason = envelope code, domain persona-service) and a
    persona.v1.Error with the same code. Returns the error and the Error."""
    with pytest.raises(grpc.RpcError) as info:
        call(request, metadata=metadata, timeout=TIMEOUT)
    err = info.value
    assert err.code() == code, (err.code(), err.details())
    assert err.details(), "a human-readable message is expected"
    status = rpc_status.from_call(err)
    assert status is not None, "grpc-status-details-bin missing from the trailers"
    assert status.code == code.value[0]
    infos, errors = [], []
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            unpacked = error_details_pb2.ErrorInfo()
            detail.Unpack(unpacked)
            infos.append(unpacked)
        elif detail.Is(errors_pb2.Error.DESCRIPTOR):
            unpacked = errors_pb2.Error()
            detail.Unpack(unpacked)
            errors.append(unpacked)
    assert len(infos) == 1 and len(errors) == 1, status
    assert infos[0].reason == reason
    assert infos[0].domain == DOMAIN
    assert errors[0].code == reason
    assert errors[0].message
    return err, errors[0]


# --- success ------------------------------------------------------------------


def test_get_organization(channel, tenant):
    stub = orgs_pb2_grpc.OrganizationServiceStub(channel)
    org = stub.GetOrganization(orgs_pb2.GetOrganizationRequest(id=tenant.org_id), metadata=tenant.metadata, timeout=TIMEOUT)
    assert org.id == tenant.org_id
    assert org.owner_user_id == tenant.user_id
    assert org.region == "us"
    assert org.workspaces_count == 1
    assert org.created_at.seconds > 0


# --- errors ---------------------------------------------------------------------


def test_missing_credential_is_unauthenticated(channel, tenant):
    stub = orgs_pb2_grpc.OrganizationServiceStub(channel)
    expect_error(
        stub.GetOrganization, orgs_pb2.GetOrganizationRequest(id=tenant.org_id), (),
        grpc.StatusCode.UNAUTHENTICATED, "unauthorized",
    )


def test_invalid_credential_is_unauthenticated(channel, tenant):
    stub = orgs_pb2_grpc.OrganizationServiceStub(channel)
    expect_error(
        stub.GetOrganization, orgs_pb2.GetOrganizationRequest(id=tenant.org_id), bearer("sk_live_" + "x" * 40),
        grpc.StatusCode.UNAUTHENTICATED, "unauthorized",
    )


def test_wrong_scope_is_permission_denied(channel, tenants, tenant):
    key = tenants.tenant_key(tenant, ["chat:read"])
    stub = keys_pb2_grpc.ApiKeyServiceStub(channel)
    expect_error(
        stub.ListApiKeys, keys_pb2.ListApiKeysRequest(), bearer(key),
        grpc.StatusCode.PERMISSION_DENIED, "forbidden",
    )


def test_unknown_id_is_not_found(channel, tenant):
    stub = orgs_pb2_grpc.OrganizationServiceStub(channel)
    expect_error(
        stub.GetOrganization, orgs_pb2.GetOrganizationRequest(id="org_doesnotexist0000000000"), tenant.metadata,
        grpc.StatusCode.NOT_FOUND, "not_found",
    )


def test_foreign_id_is_not_found(channel, tenants, tenant):
    other = tenants()
    stub = orgs_pb2_grpc.OrganizationServiceStub(channel)
    expect_error(
        stub.GetOrganization, orgs_pb2.GetOrganizationRequest(id=other.org_id), tenant.metadata,
        grpc.StatusCode.NOT_FOUND, "not_found",
    )


def test_create_api_key_bad_scopes_is_invalid_argument(channel, tenant):
    stub = keys_pb2_grpc.ApiKeyServiceStub(channel)
    request = keys_pb2.CreateApiKeyRequest(name="bad", scopes=["read:personas", "chat:read", "chat:read"])
    _, error = expect_error(
        stub.CreateApiKey, request, tenant.metadata, grpc.StatusCode.INVALID_ARGUMENT, "validation_failed",
    )
    details = json_format.MessageToDict(error.details)
    violations = details["validationErrors"]
    assert isinstance(violations, list) and violations
    for violation in violations:
        assert {"path", "code", "value", "expected"} <= set(violation), violation
    assert any(v["path"].startswith("scopes") for v in violations), violations


@pytest.mark.parametrize("number", [float("nan"), float("inf"), float("-inf")])
def test_a_non_finite_number_in_a_json_value_is_invalid_argument(channel, tenant, number):
    # JSON has no NaN nor Infinity, only a native caller can send one: refused by name, not a 500 (json_format
    # refuses to print it where the servicer reads the value).
    stub = config_pb2_grpc.ConfigServiceStub(channel)
    request = config_pb2.UpdateConfigItemRequest(key="engine.pipeline.drift_detection.threshold",
                                                 value=struct_pb2.Value(number_value=number))
    _, error = expect_error(
        stub.UpdateConfigItem, request, tenant.metadata, grpc.StatusCode.INVALID_ARGUMENT, "validation_failed",
    )
    violations = json_format.MessageToDict(error.details)["validationErrors"]
    assert [(v["path"], v["code"], v["expected"]) for v in violations] == [("value", "type", {"type": "finite number"})]


def test_non_admin_build_one_dsar_export_is_permission_denied(channel, tenant):
    stub = admin_pb2_grpc.AdminServiceStub(channel)
    expect_error(
        stub.BuildOneDsarExport, admin_pb2.BuildOneDsarExportRequest(), tenant.metadata,
        grpc.StatusCode.PERMISSION_DENIED, "forbidden",
    )


def test_edge_passes_native_grpc_errors_through(edge_channel, tenant):
    """The JSON edge's envelope hook must leave native gRPC errors alone: the
    status, the rich details and the trailers reach the caller unchanged."""
    stub = orgs_pb2_grpc.OrganizationServiceStub(edge_channel)
    err, _ = expect_error(
        stub.GetOrganization, orgs_pb2.GetOrganizationRequest(id=tenant.org_id), (),
        grpc.StatusCode.UNAUTHENTICATED, "unauthorized",
    )
    trailers = dict(err.trailing_metadata())
    assert "grpc-status-details-bin" in trailers
    status = status_pb2.Status.FromString(trailers["grpc-status-details-bin"])
    assert status.code == grpc.StatusCode.UNAUTHENTICATED.value[0]
    # Not rewritten into an HTTP/JSON reply: the message is the server's.
    assert err.details() == status.message


# --- request ids ----------------------------------------------------------------


def test_response_carries_request_id(channel, tenant):
    stub = orgs_pb2_grpc.OrganizationServiceStub(channel)
    _, call = stub.GetOrganization.with_call(
        orgs_pb2.GetOrganizationRequest(id=tenant.org_id), metadata=tenant.metadata, timeout=TIMEOUT,
    )
    headers = dict(call.initial_metadata())
    assert headers.get("x-request-id"), call.initial_metadata()


def test_request_id_is_echoed(channel, tenant):
    request_id = "req-native-grpc-echo-0123456789"
    stub = orgs_pb2_grpc.OrganizationServiceStub(channel)
    _, call = stub.GetOrganization.with_call(
        orgs_pb2.GetOrganizationRequest(id=tenant.org_id),
        metadata=(*tenant.metadata, ("x-request-id", request_id)), timeout=TIMEOUT,
    )
    values = [v for k, v in call.initial_metadata() if k == "x-request-id"]
    assert values == [request_id], call.initial_metadata()


def test_answer_headers_ride_with_the_answer(channel, tenant):
    """The rate-limit and request-id headers go out with the answer's own
    batch (kernel/transport/initial_metadata.py), and still arrive whole."""
    from persona_service.kernel.transport import initial_metadata

    assert initial_metadata.HOOKED, "grpcio changed: answers send their headers in a batch of their own again"
    stub = orgs_pb2_grpc.OrganizationServiceStub(channel)
    reply, call = stub.GetOrganization.with_call(
        orgs_pb2.GetOrganizationRequest(id=tenant.org_id), metadata=tenant.metadata, timeout=TIMEOUT,
    )
    headers = dict(call.initial_metadata())
    assert reply.id == tenant.org_id
    for name in ("x-request-id", "x-ratelimit-limit", "x-ratelimit-remaining", "ratelimit-policy"):
        assert headers.get(name), (name, call.initial_metadata())


# --- health and reflection ----------------------------------------------------------


def test_health_serving(channel):
    stub = health_pb2_grpc.HealthStub(channel)
    for service in ("", "persona.v1.OrganizationService"):
        response = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=TIMEOUT)
        assert response.status == health_pb2.HealthCheckResponse.SERVING, service


def test_reflection_lists_services(server_channel):
    stub = reflection_pb2_grpc.ServerReflectionStub(server_channel)
    responses = list(
        stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=TIMEOUT)
    )
    assert len(responses) == 1
    names = {s.name for s in responses[0].list_services_response.service}
    assert {
        "persona.v1.OrganizationService",
        "persona.v1.ApiKeyService",
        "persona.v1.ChatService",
        "persona.v1.AdminService",
        "grpc.health.v1.Health",
    } <= names, names


@pytest.mark.parametrize("field", floating_fields(), ids=lambda f: f"{f.method.name}.{f.path}")
@pytest.mark.parametrize(("number", "said"), [(float("nan"), "NaN"), (float("inf"), "Infinity"),
                                              (float("-inf"), "-Infinity")], ids=["NaN", "Infinity", "-Infinity"])
def test_a_non_finite_number_in_any_double_field_is_invalid_argument(channel, tenant, field, number, said):
    # Every double/float of every request (by reflection): NaN fails no bound, so it was taken as a value.
    rpc = (channel.unary_stream if field.method.server_streaming else channel.unary_unary)(
        field.rpc, request_serializer=lambda m: m.SerializeToString())

    def call(request, metadata, timeout):
        answer = rpc(request, metadata=metadata, timeout=timeout)
        return list(answer) if field.method.server_streaming else answer

    _, error = expect_error(call, field.request(number), tenant.metadata, grpc.StatusCode.INVALID_ARGUMENT,
                            "validation_failed")
    violations = json_format.MessageToDict(error.details)["validationErrors"]
    assert [(v["path"], v["value"], v["expected"]) for v in violations if v["code"] == "type"] == [
        (field.path, said, {"type": "finite number"})], violations
