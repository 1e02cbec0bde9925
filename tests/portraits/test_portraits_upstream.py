"""Portraits drawn by an OpenAI-compatible Images API (a real HTTP server on
127.0.0.1), through Envoy: the images it returns are stored and served; its
5xx and timeouts, after the retries, answer the portrait shape's 502/504
with `provider` and leave the row `failed`; a provider slower than the
request's wait answers the row `pending`/`generating`, and the durable task
still finishes it."""

from __future__ import annotations

import time

import httpx
import pytest
from providers.openai_stub import OpenAIStub, openai_stub, openai_stub_server  # noqa: F401
from support import TenantFactory, assert_envelope, client_for, engine_for, make_stack, running

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def upstream(openai_stub_server: OpenAIStub, tmp_path_factory):  # noqa: F811
    env = {"PERSONA_IMAGE_PROVIDER": "openai", "PERSONA_IMAGE_BASE_URL": openai_stub_server.base_url,
           "PERSONA_PROVIDER_BACKOFF_SECONDS": "0", "PERSONA_IMAGE_TIMEOUT_SECONDS": "1.5",
           "PERSONA_PORTRAIT_WAIT_SECONDS": "15"}
    # 1.5 s, not less: under a loaded CI machine an answer of the stub (a thread of
    # this process) took over 0.3 s once, the client timed out and retried, and the
    # one-request count saw two (a retry after a timeout is the contract, not a bug).
    with running(make_stack(tmp_path_factory.mktemp("portraits-upstream"), workers=0, **env)) as stack, \
            engine_for(stack) as engine, client_for(stack) as http:
        tenant = TenantFactory(engine)(plan="pro")
        r = http.post("/v1/personas", json={"intent": "A stubborn harbour pilot who reads the tides"},
                      headers=tenant.auth)
        assert r.status_code == 200, r.text
        yield http, tenant, r.json()["id"]


def _generate(http, tenant, persona_id):
    return http.post(f"/v1/personas/{persona_id}/portraits", json={"prompt": "at dawn"}, headers=tenant.auth)


def _edit(http, tenant, persona_id, portrait_id, instruction="add glasses"):
    return http.post(f"/v1/personas/{persona_id}/portrait/{portrait_id}/edit", json={"instruction": instruction},
                     headers=tenant.auth)


def test_images_come_from_the_upstream(upstream, openai_stub):  # noqa: F811
    http, tenant, persona_id = upstream
    r = _generate(http, tenant, persona_id)
    assert r.status_code == 200 and r.json()["status"] == "generated", r.text
    edited = _edit(http, tenant, persona_id, r.json()["id"])
    assert edited.status_code == 200 and edited.json()["status"] == "generated", edited.text
    assert httpx.get(edited.json()["signedUrl"]).content.startswith(PNG)
    assert len(openai_stub.requests_to("/images/generations")) == 1
    (request,) = openai_stub.requests_to("/images/edits")
    assert request.body["prompt"] == "add glasses"


def test_upstream_5xx_is_502_in_the_portrait_shape(upstream, openai_stub):  # noqa: F811
    http, tenant, persona_id = upstream
    source = _generate(http, tenant, persona_id).json()
    openai_stub.inject_error(times=4, status=500, path="/images/edits")  # the first try and three retries
    r = _edit(http, tenant, persona_id, source["id"])
    assert r.status_code == 502, r.text
    assert r.json() == {"error": "provider_error", "message": r.json()["message"], "provider": "openai",
                        "reason": "provider_failed", "retryable": True}  # (a failed portrait keeps only its code)
    failed = http.get(f"/v1/personas/{persona_id}/portraits", params={"conversationId": source["id"]},
                      headers=tenant.auth).json()["items"][0]
    assert failed["status"] == "failed" and failed["failureCode"] == "provider_error"
    # A failed portrait is not a source for edits.
    assert _edit(http, tenant, persona_id, failed["id"]).status_code == 404


def test_image_provider_failures_are_audited_under_the_organization(upstream, openai_stub):  # noqa: F811
    """Each failed attempt is in the organization's GET /v1/audit/events with
    the upstream's envelope under `details.upstream`, as a text provider's is."""
    http, tenant, persona_id = upstream
    source = _generate(http, tenant, persona_id).json()
    envelope = {"error": {"message": "the image model is overloaded", "type": "server_error", "code": "img_busy"}}
    openai_stub.inject_error(times=4, status=500, envelope=envelope, path="/images/edits")
    assert _edit(http, tenant, persona_id, source["id"]).status_code == 502
    r = http.get("/v1/audit/events", params={"action": "provider.call", "limit": 100}, headers=tenant.auth)
    assert r.status_code == 200, r.text
    mine = [e for e in r.json()["items"] if e["details"].get("upstream") == envelope]
    assert sorted(e["details"]["attempt"] for e in mine) == [1, 2, 3, 4], r.json()
    for entry in mine:
        assert entry["outcome"] == "failure" and entry["errorCode"] == "provider_error"
        assert entry["details"]["upstreamStatus"] == 500 and entry["details"]["operation"] == "edit_image"
        assert entry["workspaceId"] == tenant.workspace_id


def test_a_502_after_the_commit_frees_its_idempotency_key(upstream, openai_stub):  # noqa: F811
    http, tenant, persona_id = upstream
    source = _generate(http, tenant, persona_id).json()
    headers = {**tenant.auth, "Idempotency-Key": f"retry-{source['id']}"}
    path = f"/v1/personas/{persona_id}/portrait/{source['id']}/edit"
    openai_stub.inject_error(times=4, status=500, path="/images/edits")
    assert http.post(path, json={"instruction": "add a hat"}, headers=headers).status_code == 502
    retried = http.post(path, json={"instruction": "add a hat"}, headers=headers)
    assert retried.status_code == 200 and retried.json()["status"] == "generated", retried.text
    assert "idempotent-replayed" not in retried.headers


def test_upstream_timeout_is_504(upstream, openai_stub):  # noqa: F811
    http, tenant, persona_id = upstream
    source = _generate(http, tenant, persona_id).json()
    openai_stub.inject_delay(times=4, seconds=1.8, path="/images/edits")
    r = _edit(http, tenant, persona_id, source["id"])
    # The envelope: the spec gives the portrait shape to 502, not 504.
    assert assert_envelope(r, 504, "provider_timeout")["details"]["provider"] == "openai"


def test_an_answer_that_does_not_wait_and_the_task_that_finishes_it(upstream, openai_stub):  # noqa: F811
    http, tenant, persona_id = upstream
    source = _generate(http, tenant, persona_id).json()
    openai_stub.inject_delay(times=1, seconds=0.2, path="/images/edits")
    r = http.post(f"/v1/personas/{persona_id}/portrait/{source['id']}/edit", json={"instruction": "blur"},
                  headers={**tenant.auth, "Prefer": "wait=0"})
    assert r.status_code == 200, r.text
    assert r.json()["status"] in ("pending", "generating")
    portrait_id = r.json()["portraitId"]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        got = http.get(f"/v1/personas/{persona_id}/portraits/{portrait_id}", headers=tenant.auth).json()
        if got["status"] not in ("pending", "generating"):
            break
        time.sleep(0.05)
    assert got["status"] == "generated", got
    assert httpx.get(got["signedUrl"]).content.startswith(PNG)
