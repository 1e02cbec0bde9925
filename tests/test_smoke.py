from support import assert_envelope


def test_org_roundtrip(http, tenant):
    r = http.get(f"/v1/orgs/{tenant.org_id}", headers=tenant.auth)
    assert r.status_code == 200, r.text
    assert r.json()["id"] == tenant.org_id


def test_missing_auth(http, tenant):
    assert_envelope(http.get(f"/v1/orgs/{tenant.org_id}"), 401, "unauthorized")
