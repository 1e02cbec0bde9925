"""Typed configuration items over HTTP/JSON through Envoy (mirrors
server/persona_service/domain/config.py): defaults, workspace and
organization levels with inheritance, deletion, unknown keys, type and
range validation, and the scopes needed to write."""

from __future__ import annotations

import pytest
from persona_service.kernel.config_keys import CONFIG_KEYS as REGISTRY
from persona_service.kernel.transport.limits.plans import PLAN_LIMITS
from support import assert_envelope

THRESHOLD = "engine.pipeline.drift_detection.threshold"
ACTION = "engine.pipeline.drift_detection.action_on_alert"


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def put(http, tenant, key, value, level=None, headers=None):
    body = {"value": value, **({"level": level} if level else {})}
    return http.put(f"/v1/config/{key}", json=body, headers=headers or tenant.auth)


def get(http, tenant, key) -> dict:
    r = http.get(f"/v1/config/{key}", headers=tenant.auth)
    assert r.status_code == 200, r.text
    return r.json()


def delete(http, tenant, key, level="workspace") -> dict:
    r = http.delete(f"/v1/config/{key}", params={"level": level}, headers=tenant.auth)
    assert r.status_code == 200, r.text
    return r.json()


def test_list_shows_every_key_with_its_default(http, tenants):
    t = tenants(plan="team")
    r = http.get("/v1/config", headers=t.auth)
    assert r.status_code == 200, r.text
    items = r.json()["items"]
    assert [i["key"] for i in items] == sorted(REGISTRY)
    for item in items:
        spec = REGISTRY[item["key"]]
        assert item["source"] == "default", item
        assert item["updatedAt"] is None  # a not-yet timestamp is null
        assert item["type"] == spec.type
        assert item["settableAt"] == list(spec.levels)
        if item["key"].startswith("api.rate_limit."):
            assert item["value"] == getattr(PLAN_LIMITS["team"], item["key"].rsplit(".", 1)[1])
        else:
            assert item["value"] == spec.default
    by_key = {i["key"]: i for i in items}
    assert by_key[ACTION]["allowedValues"] == ["block", "auto_recover"]
    assert by_key[ACTION]["value"] == "block"
    assert by_key[THRESHOLD]["value"] == 0.35


def test_list_filters_by_prefix(http, tenant):
    r = http.get("/v1/config", params={"prefix": "api.rate_limit."}, headers=tenant.auth)
    assert r.status_code == 200, r.text
    keys = [i["key"] for i in r.json()["items"]]
    assert keys == sorted(k for k in REGISTRY if k.startswith("api.rate_limit."))


def test_list_pages_by_key_like_every_list(http, tenant):
    """`limit`/`cursor` → `items` + `nextCursor`, keyset on the key; a cursor is bound to its prefix."""
    walked, cursor = [], ""
    while True:
        r = http.get("/v1/config", params={"limit": 5, **({"cursor": cursor} if cursor else {})}, headers=tenant.auth)
        assert r.status_code == 200, r.text
        assert len(r.json()["items"]) <= 5
        walked += [i["key"] for i in r.json()["items"]]
        cursor = r.json()["nextCursor"]
        if not cursor:
            break
        other_prefix = http.get("/v1/config", params={"cursor": cursor, "prefix": "api."}, headers=tenant.auth)
        assert assert_envelope(other_prefix, 400, "bad_request")["details"] == {"parameter": "cursor"}
    assert walked == sorted(REGISTRY)


def test_workspace_value(http, tenants):
    t = tenants()
    r = put(http, t, ACTION, "auto_recover", "workspace")
    assert r.status_code == 200, r.text
    assert r.json()["value"] == "auto_recover"
    assert r.json()["source"] == "workspace"
    assert r.json()["updatedAt"].endswith("Z")
    assert get(http, t, ACTION)["source"] == "workspace"
    # The level defaults to the workspace.
    r = put(http, t, THRESHOLD, 0.5)
    assert r.status_code == 200, r.text
    assert r.json()["source"] == "workspace"


def test_org_value_is_inherited_unless_overridden(http, tenants):
    t = tenants()
    r = put(http, t, THRESHOLD, 0.5, "org")
    assert r.status_code == 200, r.text
    assert (r.json()["value"], r.json()["source"]) == (0.5, "org")
    item = get(http, t, THRESHOLD)
    assert (item["value"], item["source"]) == (0.5, "org")

    r = put(http, t, THRESHOLD, 0.7, "workspace")
    assert r.status_code == 200, r.text
    assert (r.json()["value"], r.json()["source"]) == (0.7, "workspace")
    # Changing the org value does not shadow the workspace's own setting.
    assert put(http, t, THRESHOLD, 0.6, "org").json()["source"] == "workspace"
    assert get(http, t, THRESHOLD)["value"] == 0.7

    restored = delete(http, t, THRESHOLD, "workspace")
    assert (restored["value"], restored["source"]) == (0.6, "org")
    restored = delete(http, t, THRESHOLD, "org")
    assert (restored["value"], restored["source"]) == (0.35, "default")
    assert restored["updatedAt"] is None
    # Removing a setting that is not there succeeds.
    assert delete(http, t, THRESHOLD, "org")["source"] == "default"


def test_delete_restores_the_default(http, tenants):
    t = tenants()
    assert put(http, t, ACTION, "auto_recover", "workspace").status_code == 200
    restored = delete(http, t, ACTION, "workspace")
    assert (restored["value"], restored["source"]) == ("block", "default")
    listed = {i["key"]: i for i in http.get("/v1/config", headers=t.auth).json()["items"]}
    assert listed[ACTION]["source"] == "default"


def test_settings_are_per_organization(http, tenants):
    a, b = tenants(), tenants()
    assert put(http, a, THRESHOLD, 0.9, "org").status_code == 200
    assert get(http, b, THRESHOLD)["source"] == "default"


def test_unknown_key_is_not_found(http, tenant):
    assert_envelope(http.get("/v1/config/no.such.key", headers=tenant.auth), 404, "not_found")
    assert_envelope(put(http, tenant, "no.such.key", 1), 404, "not_found")
    assert_envelope(http.delete("/v1/config/no.such.key", headers=tenant.auth), 404, "not_found")


@pytest.mark.parametrize(
    "key, value, code",
    [
        (THRESHOLD, "high", "type"),
        (THRESHOLD, True, "type"),
        (THRESHOLD, 1.5, "range"),
        (THRESHOLD, -0.1, "range"),
        (ACTION, "explode", "one_of"),
        (ACTION, 1, "one_of"),
    ],
)
def test_wrong_type_or_range_is_invalid(http, tenant, key, value, code):
    error = assert_envelope(put(http, tenant, key, value, "workspace"), 422, "validation_failed")
    violations = error["details"]["validationErrors"]
    assert len(violations) == 1
    assert violations[0]["path"] == "value"
    assert violations[0]["code"] == code
    assert violations[0]["value"] == value
    assert violations[0]["expected"]
    assert get(http, tenant, key)["source"] == "default"


def test_rate_limit_values_must_be_positive_integers(http, tenants):
    t = tenants(plan="enterprise")
    for value in (0, -5, 2.5, "100"):
        r = put(http, t, "api.rate_limit.requests_per_minute", value, "org")
        error = assert_envelope(r, 422, "validation_failed")
        assert error["details"]["validationErrors"][0]["path"] == "value"


def test_unknown_level_is_invalid(http, tenant):
    error = assert_envelope(put(http, tenant, THRESHOLD, 0.5, "galaxy"), 422, "validation_failed")
    assert error["details"]["validationErrors"][0]["path"] == "level"


def test_read_scope_cannot_write(http, tenants, tenant):
    reader = tenants.tenant_key(tenant, ["config:read"])
    assert http.get(f"/v1/config/{THRESHOLD}", headers=bearer(reader)).status_code == 200
    r = put(http, tenant, THRESHOLD, 0.4, "workspace", headers=bearer(reader))
    error = assert_envelope(r, 403, "forbidden")
    assert error["details"]["requiredScope"] == "config:write"
    error = assert_envelope(
        http.delete(f"/v1/config/{THRESHOLD}", headers=bearer(reader)), 403, "forbidden"
    )
    assert get(http, tenant, THRESHOLD)["source"] == "default"


def test_reading_needs_the_read_scope(http, tenants, tenant):
    other = tenants.tenant_key(tenant, ["personas:read"])
    error = assert_envelope(http.get("/v1/config", headers=bearer(other)), 403, "forbidden")
    assert error["details"]["requiredScope"] == "config:read"
