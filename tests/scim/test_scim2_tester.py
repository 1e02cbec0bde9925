"""scim2-tester, the SCIM 2.0 compliance checker, against the real stack
through Envoy with a SCIM token: every check must end without ERROR or
CRITICAL (skipped ones are features the service does not announce)."""

from __future__ import annotations

import collections

import httpx2
from scim2_client.engines.httpx2 import SyncSCIMClient
from scim2_tester import Status, check_server


def test_scim2_tester_finds_no_error(stack, org, scim_token):
    base = f"http://127.0.0.1:{stack.settings.http_port}/v1/auth/scim/v2"
    with httpx2.Client(base_url=base, headers={"Authorization": f"Bearer {scim_token}"}, timeout=30) as http:
        results = check_server(SyncSCIMClient(http))
    counts = collections.Counter(r.status.name for r in results)
    print("scim2-tester:", dict(counts))
    failed = [f"{r.resource_type or ''} {r.title}: {r.reason}" for r in results
              if r.status in (Status.ERROR, Status.CRITICAL)]
    assert not failed, "\n".join(failed)
    assert counts["SUCCESS"] > 50
