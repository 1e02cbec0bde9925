"""A SCIM caller for the tests: `application/scim+json` bodies through Envoy."""

from __future__ import annotations

import json
from typing import Any

import httpx

SCIM = "application/scim+json"
BASE = "/v1/auth/scim/v2"
USER = "urn:ietf:params:scim:schemas:core:2.0:User"
GROUP = "urn:ietf:params:scim:schemas:core:2.0:Group"
PATCH = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
ERROR = "urn:ietf:params:scim:api:messages:2.0:Error"


class Scim:
    def __init__(self, http: httpx.Client, token: str):
        self.http, self.token = http, token

    def call(self, method: str, path: str, body: Any = None, **headers: str) -> httpx.Response:
        sent = {"Authorization": f"Bearer {self.token}", "Accept": SCIM, **headers}
        if body is not None:
            sent.setdefault("Content-Type", SCIM)
        content = body if isinstance(body, bytes | str) or body is None else json.dumps(body)
        return self.http.request(method, BASE + path, content=content, headers=sent)

    def user(self, user_name: str, **attributes: Any) -> dict[str, Any]:
        r = self.call("POST", "/Users", {"schemas": [USER], "userName": user_name, **attributes})
        assert r.status_code == 201, r.text
        return r.json()

    def group(self, name: str, members: list[str] = (), **attributes: Any) -> dict[str, Any]:  # type: ignore[assignment]
        r = self.call("POST", "/Groups", {"schemas": [GROUP], "displayName": name,
                                          "members": [{"value": m} for m in members], **attributes})
        assert r.status_code == 201, r.text
        return r.json()

    def created(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST `body` (an oracle fixture's, from the contract's generator) to `path`: the resource made (201)."""
        r = self.call("POST", path, body)
        assert r.status_code == 201, r.text
        return r.json()

    def patch(self, path: str, *operations: dict[str, Any], **headers: str) -> httpx.Response:
        return self.call("PATCH", path, {"schemas": [PATCH], "Operations": list(operations)}, **headers)

    def find(self, kind: str, filter: str, **params: Any) -> dict[str, Any]:
        r = self.http.get(BASE + kind, params={"filter": filter, **params},
                          headers={"Authorization": f"Bearer {self.token}"})
        assert r.status_code == 200, r.text
        return r.json()
