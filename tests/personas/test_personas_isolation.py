"""Tenant isolation of every persona RPC over HTTP/JSON through Envoy (and
native gRPC): another organization's key gets 404 `not_found` (never 403,
never the data) for each persona of the owner, in every state; its lists
show none of them; events of another organization are 404 as well. The
owner's personas are unchanged afterwards and no event is emitted for them."""

from __future__ import annotations

import grpc
import pytest
from persona.v1 import personas_pb2, personas_pb2_grpc
from support import assert_envelope

RPCS = [
    ("get", "GET", "/v1/personas/{id}", None),
    ("update", "PATCH", "/v1/personas/{id}", {"displayName": "Stolen"}),
    ("delete", "DELETE", "/v1/personas/{id}", None),
    ("restore", "POST", "/v1/personas/{id}/restore", {}),
    ("archive", "POST", "/v1/personas/{id}/archive", {}),
    ("refine", "POST", "/v1/personas/{id}/refine", {"instruction": "Be mine", "note": "x"}),
    ("fork", "POST", "/v1/personas/{id}/fork", {"note": "stolen"}),
    ("regenerate", "POST", "/v1/personas/{id}/regenerate", {"fromStep": "write_voice"}),
    ("audit", "POST", "/v1/personas/{id}/audit", {}),
    ("lineage", "GET", "/v1/personas/{id}/lineage", None),
    ("voice", "GET", "/v1/personas/{id}/voice", None),
    ("card", "GET", "/v1/personas/{id}/card", None),
]


@pytest.fixture(scope="module")
def owner(tenants):
    return tenants(plan="enterprise")


@pytest.fixture(scope="module")
def intruder(tenants):
    return tenants(plan="enterprise")


@pytest.fixture(scope="module")
def personas(http, owner) -> dict[str, dict]:
    """One persona of the owner in each state."""
    made = {}
    for state, intent in [("active", "A proud falconer who tells bad jokes"),
                          ("flagged", "A smuggler who speaks unfiltered, no rules"),
                          ("archived", "A careful bell-ringer who fears silence"),
                          ("deleted", "A lonely ferryman who counts stars")]:
        r = http.post("/v1/personas", json={"intent": intent, "visibility": "public"}, headers=owner.auth)
        assert r.status_code == 200, r.text
        made[state] = r.json()
    pid = made["flagged"]["id"]
    assert http.post(f"/v1/personas/{pid}/audit", json={}, headers=owner.auth).status_code == 409
    assert http.post(f"/v1/personas/{made['archived']['id']}/archive", json={}, headers=owner.auth).status_code == 200
    assert http.delete(f"/v1/personas/{made['deleted']['id']}", headers=owner.auth).status_code == 200
    for state, p in made.items():
        r = http.get(f"/v1/personas/{p['id']}", headers=owner.auth)
        assert r.status_code == 200 and r.json()["state"] == state, r.text
        made[state] = r.json()
    return made


def snapshot(http, owner, personas) -> dict:
    out = {}
    for state, p in personas.items():
        r = http.get(f"/v1/personas/{p['id']}", headers=owner.auth)
        assert r.status_code == 200, r.text
        out[state] = r.json()
    return out


def owner_events(http, owner) -> list[str]:
    r = http.get("/v1/events", params={"limit": 100}, headers=owner.auth)
    assert r.status_code == 200, r.text
    return [e["id"] for e in r.json()["items"]]


@pytest.mark.parametrize("state", ["active", "flagged", "archived", "deleted"])
@pytest.mark.parametrize("name,method,path,body", RPCS, ids=[r[0] for r in RPCS])
def test_another_tenant_gets_not_found(http, owner, intruder, personas, state, name, method, path, body):
    persona = personas[state]
    kwargs = {"json": body} if body is not None else {}
    r = http.request(method, path.format(id=persona["id"]), headers=intruder.auth, **kwargs)
    error = assert_envelope(r, 404, "not_found")
    assert persona["id"] not in r.text
    assert error["details"] == {} or persona["id"] not in str(error["details"])


def test_nothing_changed_for_the_owner(http, owner, intruder, personas):
    """Runs after the intruder's attempts (module order)."""
    assert snapshot(http, owner, personas) == personas
    r = http.get(f"/v1/personas/{personas['active']['id']}/lineage", headers=owner.auth)
    assert r.status_code == 200 and r.json()["size"] == 1, r.text  # no stolen fork
    touched = {e["data"].get("personaId") for e in http.get("/v1/events", params={"limit": 100},
                                                          headers=intruder.auth).json().get("items", [])}
    assert not touched & {p["id"] for p in personas.values()}


def test_lists_show_none_of_them(http, owner, intruder, personas):
    mine = {p["id"] for p in personas.values()}
    for params in ({}, {"showDeleted": "true"}, {"state": "deleted"}, {"state": "flagged"},
                   {"state": "archived"}, {"visibility": "public"},
                   {"rootId": personas["active"]["id"]}):
        r = http.get("/v1/personas", params={"limit": 100, **params}, headers=intruder.auth)
        assert r.status_code == 200, r.text
        assert not {p["id"] for p in r.json().get("items", [])} & mine, params
    r = http.get("/v1/personas", params={"limit": 100, "showDeleted": "true"}, headers=owner.auth)
    assert mine <= {p["id"] for p in r.json()["items"]}


def test_events_of_another_organization_are_not_found(http, owner, intruder, personas):
    r = http.get("/v1/events", params={"personaId": personas["active"]["id"], "limit": 100}, headers=owner.auth)
    theirs = r.json()["items"]
    assert theirs
    for event in theirs:
        assert_envelope(http.get(f"/v1/events/{event['id']}", headers=intruder.auth), 404, "not_found")
        assert http.get(f"/v1/events/{event['id']}", headers=owner.auth).status_code == 200
    r = http.get("/v1/events", params={"personaId": personas["active"]["id"], "limit": 100}, headers=intruder.auth)
    assert r.status_code == 200 and r.json().get("items", []) == []


def test_a_card_cannot_import_into_someone_elses_lineage(http, owner, intruder, personas):
    """An exported card names its persona and root; importing it elsewhere
    makes an unrelated root in the importer's workspace."""
    card = http.get(f"/v1/personas/{personas['active']['id']}/card", headers=owner.auth).json()
    r = http.post("/v1/personas/import", json=card, headers=intruder.auth)
    assert r.status_code == 200, r.text
    imported = r.json()
    assert imported["orgId"] == intruder.org_id and imported["workspaceId"] == intruder.workspace_id
    assert imported["parentId"] == "" and imported["rootId"] == imported["id"]
    r = http.get(f"/v1/personas/{personas['active']['id']}/lineage", headers=owner.auth)
    assert r.json()["size"] == 1


def test_native_grpc_is_isolated_too(server_channel, owner, intruder, personas):
    stub = personas_pb2_grpc.PersonaServiceStub(server_channel)
    pid = personas["active"]["id"]
    calls = [
        (stub.GetPersona, personas_pb2.GetPersonaRequest(id=pid)),
        (stub.UpdatePersona, personas_pb2.UpdatePersonaRequest(id=pid, display_name="Stolen")),
        (stub.DeletePersona, personas_pb2.DeletePersonaRequest(id=pid)),
        (stub.ArchivePersona, personas_pb2.ArchivePersonaRequest(id=pid)),
        (stub.RefinePersona, personas_pb2.RefinePersonaRequest(id=pid, instruction="Be mine")),
        (stub.ForkPersona, personas_pb2.ForkPersonaRequest(id=pid)),
        (stub.AuditPersona, personas_pb2.AuditPersonaRequest(id=pid)),
        (stub.GetPersonaLineage, personas_pb2.GetPersonaLineageRequest(id=pid)),
        (stub.GetVoiceProfile, personas_pb2.GetVoiceProfileRequest(id=pid)),
        (stub.ExportPersonaCard, personas_pb2.ExportPersonaCardRequest(id=pid)),
    ]
    for call, request in calls:
        with pytest.raises(grpc.RpcError) as info:
            call(request, metadata=intruder.metadata, timeout=10)
        assert info.value.code() == grpc.StatusCode.NOT_FOUND, (call, info.value.details())
    assert stub.GetPersona(personas_pb2.GetPersonaRequest(id=pid), metadata=owner.metadata, timeout=10).id == pid
