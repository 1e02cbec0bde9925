"""SCIM list answers at volume keep their contract: `totalResults` without a
filter comes from a count the database keeps per organization (a trigger on
every insert and delete), and enterprise-extension filters go through
expression indexes on the document; both must answer as a count of the rows
and a filter of the documents would."""

from __future__ import annotations

import uuid

from scim_client import BASE, USER

ENTERPRISE = "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"


def _total(scim) -> int:
    r = scim.http.get(BASE + "/Users", params={"count": 0}, headers={"Authorization": f"Bearer {scim.token}"})
    assert r.status_code == 200, r.text
    return r.json()["totalResults"]


def test_total_results_follows_creates_and_deletes(scim):
    before = _total(scim)
    made = [scim.user(f"count-{uuid.uuid4().hex[:10]}@example.com") for _ in range(3)]
    assert _total(scim) == before + 3
    assert scim.call("DELETE", f"/Users/{made[0]['id']}").status_code == 204
    assert scim.call("DELETE", f"/Users/{made[0]['id']}").status_code == 404  # a second delete counts nothing
    assert _total(scim) == before + 2
    listed = scim.http.get(BASE + "/Users", params={"count": 1000}, headers={"Authorization": f"Bearer {scim.token}"})
    assert listed.json()["totalResults"] == len(listed.json()["Resources"]) == before + 2


def test_enterprise_attributes_filter_as_the_schema_says(scim):
    tag = uuid.uuid4().hex[:8]
    ada = scim.user(f"ada-{tag}@example.com", schemas=[USER, ENTERPRISE], **{ENTERPRISE: {
        "department": f"Sales-{tag}", "employeeNumber": f"E-{tag}", "manager": {"value": f"Boss-{tag}"}}})
    bob = scim.user(f"bob-{tag}@example.com", schemas=[USER, ENTERPRISE], **{ENTERPRISE: {
        "department": f"sales-{tag}", "costCenter": f"CC-{tag}"}})
    found = scim.find("/Users", f'{ENTERPRISE}:department eq "SALES-{tag}"')  # caseExact false
    assert {u["id"] for u in found["Resources"]} == {ada["id"], bob["id"]} and found["totalResults"] == 2
    assert [u["id"] for u in scim.find("/Users", f'{ENTERPRISE}:employeeNumber eq "e-{tag}"')["Resources"]] == [ada["id"]]
    assert [u["id"] for u in scim.find("/Users", f'{ENTERPRISE}:costCenter eq "cc-{tag}"')["Resources"]] == [bob["id"]]
    assert scim.find("/Users", f'{ENTERPRISE}:manager.value eq "Boss-{tag}"')["totalResults"] == 1
    assert scim.find("/Users", f'{ENTERPRISE}:manager.value eq "boss-{tag}"')["totalResults"] == 0  # caseExact
