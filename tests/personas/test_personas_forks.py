"""Forks and lineage over HTTP/JSON through Envoy (mirrors
PersonaService.fork/lineage; spec 1.0.3 "a fix for a race in concurrent
persona forks", 1.0.2 lineage, 1.0.4 refine notes): parallel forks of one
parent all succeed with distinct ordinals and slugs, and the lineage tree
shows them by ordinal with their fork and refine notes.

An Enterprise tenant is used: Pro allows 5 concurrent generations, so a 429
there would be a limit, not a lineage failure."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from support import assert_envelope

FORKS = 8


@pytest.fixture(scope="module")
def org(tenants):
    return tenants(plan="enterprise")


def post(http, tenant, path, body) -> dict:
    r = http.post(path, json=body, headers=tenant.auth)
    assert r.status_code == 200, r.text
    return r.json()


def lineage(http, tenant, persona_id) -> dict:
    r = http.get(f"/v1/personas/{persona_id}/lineage", headers=tenant.auth)
    assert r.status_code == 200, r.text
    return r.json()


def walk(node):
    yield node
    for child in node.get("children", []):
        yield from walk(child)


def test_parallel_forks_all_succeed_with_distinct_ordinals(stack, http, org):
    parent = post(http, org, "/v1/personas", {"intent": "A meticulous cartographer who charts hidden rivers"})
    note = "Tightened the backstory for the atlas launch"
    refined = post(http, org, f"/v1/personas/{parent['id']}/refine",
                   {"instruction": "Make him more curious", "note": note})
    assert refined["version"] == 2

    barrier = threading.Barrier(FORKS)

    def fork(i: int) -> httpx.Response:
        with httpx.Client(base_url=stack.http_url, timeout=60) as client:
            barrier.wait()
            return client.post(f"/v1/personas/{parent['id']}/fork",
                               json={"note": f"fork note {i}", "instruction": f"Variant {i}: more daring"},
                               headers=org.auth)

    with ThreadPoolExecutor(FORKS) as pool:
        responses = list(pool.map(fork, range(FORKS)))
    for r in responses:
        assert r.status_code == 200, r.text
    forks = [r.json() for r in responses]

    assert sorted(f["forkOrdinal"] for f in forks) == list(range(1, FORKS + 1))
    assert len({f["slug"] for f in forks}) == FORKS
    assert len({f["id"] for f in forks}) == FORKS
    for f in forks:
        assert f["parentId"] == parent["id"]
        assert f["rootId"] == parent["rootId"] == parent["id"]
        assert f["slug"] == f"{parent['slug']}-fork-{f['forkOrdinal']}"
        assert f["state"] == "active" and f["version"] == 1
        assert f["intent"] == parent["intent"]
        assert f["visibility"] == parent["visibility"]
    note_of = {f["id"]: f"fork note {i}" for i, f in enumerate(forks)}

    # Each fork emitted persona.created naming its parent and root.
    for f in forks:
        r = http.get("/v1/events", params={"personaId": f["id"], "type": "persona.created"}, headers=org.auth)
        (created,) = r.json()["items"]
        assert created["data"]["parentId"] == parent["id"] and created["data"]["rootId"] == parent["id"]
        assert created["data"]["slug"] == f["slug"]
        r = http.get("/v1/events", params={"personaId": f["id"], "type": "generation.run.started"}, headers=org.auth)
        assert [e["data"]["kind"] for e in r.json()["items"]] == ["fork"]

    # The lineage, asked from any node, is the whole tree from the root.
    tree = lineage(http, org, forks[3]["id"])
    assert tree == lineage(http, org, parent["id"])
    assert tree["size"] == FORKS + 1
    root = tree["root"]
    assert root["personaId"] == parent["id"] and root["forkOrdinal"] == 0 and root["version"] == 2
    assert [(v["version"], v["kind"], v["note"]) for v in root["versions"]] == [(1, "create", ""), (2, "refine", note)]
    assert root["versions"][1]["instruction"] == "Make him more curious"
    children = root["children"]
    assert [c["forkOrdinal"] for c in children] == list(range(1, FORKS + 1))
    by_id = {f["id"]: f for f in forks}
    for child in children:
        fork_ = by_id[child["personaId"]]
        assert child["slug"] == fork_["slug"] and child["state"] == "active" and child["version"] == 1
        assert child["forkNote"] == note_of[child["personaId"]]
        assert [(v["version"], v["kind"], v["note"]) for v in child["versions"]] == [
            (1, "fork", note_of[child["personaId"]])]
        assert child.get("children", []) == []

    # A refine of a fork, and a fork of a fork, show up in the same tree.
    first = next(f for f in forks if f["forkOrdinal"] == 1)
    post(http, org, f"/v1/personas/{first['id']}/refine", {"instruction": "Softer voice", "note": "child refine"})
    grandchild = post(http, org, f"/v1/personas/{first['id']}/fork", {"note": "grandchild"})
    assert grandchild["parentId"] == first["id"] and grandchild["rootId"] == parent["id"]
    assert grandchild["forkOrdinal"] == 1
    assert grandchild["slug"] == f"{first['slug']}-fork-1"
    tree = lineage(http, org, grandchild["id"])
    assert tree["size"] == FORKS + 2
    node = tree["root"]["children"][0]
    assert node["personaId"] == first["id"] and node["version"] == 2
    assert [(v["kind"], v["note"]) for v in node["versions"]] == [("fork", node["forkNote"]),
                                                                   ("refine", "child refine")]
    assert [c["personaId"] for c in node["children"]] == [grandchild["id"]]
    assert node["children"][0]["forkNote"] == "grandchild"

    # The list can be narrowed to the tree.
    r = http.get("/v1/personas", params={"rootId": parent["id"], "limit": 100}, headers=org.auth)
    assert {p["id"] for p in r.json()["items"]} == {n["personaId"] for n in walk(tree["root"])}


def test_fork_rules(http, org):
    parent = post(http, org, "/v1/personas", {"intent": "A sleepy harbor cat who judges sailors"})
    custom = post(http, org, f"/v1/personas/{parent['id']}/fork", {"slug": "harbor-cat-custom"})
    assert custom["slug"] == "harbor-cat-custom" and custom["forkOrdinal"] == 1

    # A taken slug is a slug conflict.
    r = http.post(f"/v1/personas/{parent['id']}/fork", json={"slug": "harbor-cat-custom"}, headers=org.auth)
    error = assert_envelope(r, 409, "state_conflict")
    assert error["details"]["conflictField"] == "slug"

    # An archived persona can be forked (the fork is active)...
    assert http.post(f"/v1/personas/{parent['id']}/archive", json={}, headers=org.auth).status_code == 200
    fork = post(http, org, f"/v1/personas/{parent['id']}/fork", {})
    assert fork["state"] == "active" and fork["parentId"] == parent["id"]
    assert fork["forkOrdinal"] > custom["forkOrdinal"]

    # ...a deleted one cannot.
    other = post(http, org, "/v1/personas", {"intent": "A proud bridge troll who writes sonnets"})
    assert http.delete(f"/v1/personas/{other['id']}", headers=org.auth).status_code == 200
    r = http.post(f"/v1/personas/{other['id']}/fork", json={}, headers=org.auth)
    error = assert_envelope(r, 409, "state_conflict")
    assert error["details"]["conflictField"] == "state"
