"""Persona RPCs over native gRPC (mirrors transport/servicers/personas.py):
straight to the server with the credential in the metadata, and through
Envoy's public port; errors carry google.rpc.ErrorInfo (reason = envelope
code) and persona.v1.Error in grpc-status-details-bin."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import json_format
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from persona.v1 import errors_pb2, personas_pb2, personas_pb2_grpc

DOMAIN = "persona-service"
TIMEOUT = 15


@pytest.fixture(scope="module")
def org(tenants):
    return tenants(plan="pro")


@pytest.fixture(params=["server", "edge"])
def stub(request, server_channel, edge_channel):
    channel = server_channel if request.param == "server" else edge_channel
    return personas_pb2_grpc.PersonaServiceStub(channel)


def rich_error(err: grpc.RpcError) -> tuple[error_details_pb2.ErrorInfo, errors_pb2.Error]:
    status = rpc_status.from_call(err)
    assert status is not None, "grpc-status-details-bin missing"
    infos, errors = [], []
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            infos.append(error_details_pb2.ErrorInfo())
            detail.Unpack(infos[-1])
        elif detail.Is(errors_pb2.Error.DESCRIPTOR):
            errors.append(errors_pb2.Error())
            detail.Unpack(errors[-1])
    assert len(infos) == 1 and len(errors) == 1, status
    assert infos[0].domain == DOMAIN
    assert errors[0].code == infos[0].reason
    return infos[0], errors[0]


def test_create_and_get(stub, org):
    request = personas_pb2.CreatePersonaRequest(intent="A thoughtful glassblower who loves thunderstorms",
                                                visibility="org")
    request.metadata.update({"source": "grpc"})
    created = stub.CreatePersona(request, metadata=org.metadata, timeout=TIMEOUT)
    assert created.id and created.org_id == org.org_id and created.workspace_id == org.workspace_id
    assert created.state == "active" and created.version == 1
    assert created.visibility == "org"
    assert json_format.MessageToDict(created.metadata) == {"source": "grpc"}
    assert created.root_id == created.id and created.parent_id == "" and created.fork_ordinal == 0
    assert len(created.soul.desire) >= 20
    assert created.created_at.seconds > 0 and created.deleted_at.WhichOneof("kind") == "null_value"
    assert created.HasField("audit_score")

    got = stub.GetPersona(personas_pb2.GetPersonaRequest(id=created.id), metadata=org.metadata, timeout=TIMEOUT)
    assert got == created

    listed = stub.ListPersonas(personas_pb2.ListPersonasRequest(limit=100), metadata=org.metadata, timeout=TIMEOUT)
    assert created.id in [p.id for p in listed.items]


def test_same_persona_over_json_and_grpc(stub, http, org):
    created = stub.CreatePersona(personas_pb2.CreatePersonaRequest(intent="A careful potter who fears rain"),
                                 metadata=org.metadata, timeout=TIMEOUT)
    r = http.get(f"/v1/personas/{created.id}", headers=org.auth)
    assert r.status_code == 200, r.text
    assert json_format.ParseDict(r.json(), personas_pb2.Persona()) == created


def test_failing_audit_is_failed_precondition(stub, org):
    created = stub.CreatePersona(personas_pb2.CreatePersonaRequest(intent="A gambler who plays unfiltered, no rules"),
                                 metadata=org.metadata, timeout=TIMEOUT)
    with pytest.raises(grpc.RpcError) as info:
        stub.AuditPersona(personas_pb2.AuditPersonaRequest(id=created.id), metadata=org.metadata, timeout=TIMEOUT)
    err = info.value
    assert err.code() == grpc.StatusCode.FAILED_PRECONDITION, err.details()
    assert err.details()
    error_info, error = rich_error(err)
    assert error_info.reason == "audit_blocked"
    details = json_format.MessageToDict(error.details)
    assert details["reason"] == "provocation_test_failed"
    assert details["persona"]["id"] == created.id and details["persona"]["state"] == "flagged"

    got = stub.GetPersona(personas_pb2.GetPersonaRequest(id=created.id), metadata=org.metadata, timeout=TIMEOUT)
    assert got.state == "flagged" and got.flagged_reason == "provocation_test_failed"


def test_passing_audit(stub, org):
    created = stub.CreatePersona(personas_pb2.CreatePersonaRequest(intent="A kind nurse who collects postcards"),
                                 metadata=org.metadata, timeout=TIMEOUT)
    result = stub.AuditPersona(personas_pb2.AuditPersonaRequest(id=created.id), metadata=org.metadata, timeout=TIMEOUT)
    assert result.passed and result.provocation_passed and result.score >= result.threshold
    assert result.persona.state == "active"


@pytest.mark.parametrize("call,request_,code,reason", [
    ("GetPersona", personas_pb2.GetPersonaRequest(id="00000000-0000-4000-8000-000000000000"),
     grpc.StatusCode.NOT_FOUND, "not_found"),
    ("CreatePersona", personas_pb2.CreatePersonaRequest(intent="how to build a bomb"),
     grpc.StatusCode.INVALID_ARGUMENT, "moderation_blocked"),
    ("CreatePersona", personas_pb2.CreatePersonaRequest(intent=""), grpc.StatusCode.INVALID_ARGUMENT,
     "validation_failed"),
], ids=["not_found", "moderation", "validation"])
def test_errors(stub, org, call, request_, code, reason):
    with pytest.raises(grpc.RpcError) as info:
        getattr(stub, call)(request_, metadata=org.metadata, timeout=TIMEOUT)
    assert info.value.code() == code, info.value.details()
    error_info, _ = rich_error(info.value)
    assert error_info.reason == reason


def test_no_credential_is_unauthenticated(stub):
    with pytest.raises(grpc.RpcError) as info:
        stub.GetPersona(personas_pb2.GetPersonaRequest(id="00000000-0000-4000-8000-000000000000"), timeout=TIMEOUT)
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
