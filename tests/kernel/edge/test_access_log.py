"""Envoy's access log: one JSON line per request with the client's own
method and path (not the transcoded POST), the RPC, status, the error code,
request id, the caller (org, workspace, credential), and the W3C trace id of
the client's `traceparent` (also answered as `x-trace-id`). Query strings
are logged by parameter name only: a signed URL's signature (a DSAR
export's download) must not be replayable from the log."""

from __future__ import annotations

import json
import time
import uuid
from urllib.parse import parse_qsl, urlsplit

from persona_service.files.local import LocalStorage
from persona_service.files.storage import object_key, signing_key
from support import JWT_SECRET


def _lines(stack, request_id: str) -> list[dict]:
    deadline = time.monotonic() + 5  # Envoy flushes the file every 200 ms
    while True:
        text = (stack.log_dir / "access.log").read_text()
        found = [json.loads(line) for line in text.splitlines() if request_id in line]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def test_a_json_line_with_the_clients_method_path_and_trace(http, stack, tenant):
    trace_id = uuid.uuid4().hex
    request_id = "req-log-" + uuid.uuid4().hex[:12]
    headers = {**tenant.auth, "X-Request-Id": request_id,
               "traceparent": f"00-{trace_id}-{uuid.uuid4().hex[:16]}-01"}
    r = http.get("/v1/personas?limit=2", headers=headers)
    assert r.status_code == 200 and r.headers["x-trace-id"] == trace_id
    assert "x-persona-log" not in r.headers  # who called is for the log, not the answer
    (line,) = _lines(stack, request_id)
    assert line["rpc"] == "/persona.v1.PersonaService/ListPersonas"
    assert (line["org"], line["workspace"]) == (tenant.org_id, tenant.workspace_id) and line["principal"].startswith("key_")
    assert line["method"] == "GET" and line["path"] == "/v1/personas?limit"
    assert line["status"] == 200 and line["trace_id"] == trace_id and line["request_id"] == request_id
    assert isinstance(line["duration_ms"], int) and line["upstream"] and line["code"] is None


def test_deletes_and_heads_keep_their_method_and_bad_traceparents_are_ignored(http, stack, tenant):
    for method in ("DELETE", "HEAD"):
        request_id = f"req-log-{method.lower()}-" + uuid.uuid4().hex[:12]
        headers = {**tenant.auth, "X-Request-Id": request_id, "traceparent": "00-not-a-trace-01"}
        http.request(method, "/v1/personas/00000000-0000-4000-8000-000000000000", headers=headers)
        (line,) = _lines(stack, request_id)
        assert line["method"] == method and line["trace_id"] is None
        assert line["status"] == 404 and line["code"] == "not_found"  # the catalogue code, never sent to the client


def _raw_lines(stack, request_id: str) -> str:
    _lines(stack, request_id)  # waits for the flush
    return "".join(line for line in (stack.log_dir / "access.log").read_text().splitlines(True) if request_id in line)


def test_a_signed_urls_signature_is_not_logged(http, stack):
    storage = LocalStorage(stack.settings.data_dir / "objects", signing_key(JWT_SECRET), stack.http_url)
    key = object_key("org_access_log", "privacy", f"{uuid.uuid4().hex}.json")
    storage.put(key, b"{}", "application/json")
    url = urlsplit(storage.signed_url(key, 60).url)
    request_id = "req-log-signed-" + uuid.uuid4().hex[:12]
    r = http.get(f"{url.path}?{url.query}", headers={"X-Request-Id": request_id})
    assert r.status_code == 200, r.text
    query = parse_qsl(url.query)
    assert {name for name, _ in query} >= {"expires", "signature"}
    (line,) = _lines(stack, request_id)
    assert line["path"] == url.path + "?" + "&".join(name for name, _ in query)
    raw = _raw_lines(stack, request_id)
    for _, value in query:
        assert value not in raw


def test_a_query_is_not_logged_when_no_rpc_takes_the_request(http, stack):
    request_id = "req-log-nowhere-" + uuid.uuid4().hex[:12]
    assert http.get("/v1/no-such-thing?signature=sig-not-for-logs", headers={"X-Request-Id": request_id}).status_code == 404
    (line,) = _lines(stack, request_id)
    assert (line["path"], line["rpc"]) == ("/v1/no-such-thing?signature", "/v1/no-such-thing")
    assert "sig-not-for-logs" not in _raw_lines(stack, request_id)
