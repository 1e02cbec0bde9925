"""Process logs: one JSON object per line, with a failed request's id, RPC,
status, code, organization, workspace, principal and latency; `--version`."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
import uuid

from persona_service.kernel.logs import JsonFormatter, Throttled
from support import wait_until


def test_the_json_formatter_carries_request_fields_and_tracebacks():
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord("persona_service.requests", logging.INFO, __file__, 1, "failed %s", ("x",),
                                   sys.exc_info())
    record.request_id, record.status, record.code = "req_1", 404, "not_found"
    line = json.loads(JsonFormatter().format(record))
    assert line["message"] == "failed x" and line["level"] == "INFO" and line["time"].endswith("Z")
    assert line["request_id"] == "req_1" and line["status"] == 404 and line["code"] == "not_found"
    assert "ValueError: boom" in line["exception"] and "org" not in line


def test_a_failed_request_is_one_json_line_in_the_server_log(http, stack, tenant):
    request_id, trace_id = "req-json-" + uuid.uuid4().hex[:12], uuid.uuid4().hex
    r = http.get("/v1/personas/00000000-0000-4000-8000-000000000000",
                 headers={**tenant.auth, "X-Request-Id": request_id, "traceparent": f"00-{trace_id}-{'1' * 16}-01"})
    assert r.status_code == 404
    log = stack.log_dir / f"server-{stack.grpc_ports[0]}.log"
    deadline = time.monotonic() + 5
    found: list[dict] = []
    while not found and time.monotonic() < deadline:
        found = [json.loads(line) for line in log.read_text().splitlines()
                 if line.startswith("{") and request_id in line]
        time.sleep(0.05)
    (line,) = found
    assert line["rpc"] == "/persona.v1.PersonaService/GetPersona" and line["status"] == 404
    assert line["code"] == "not_found" and line["org"] == tenant.org_id and line["workspace"] == tenant.workspace_id
    assert line["principal"].startswith("key_") and line["latency_ms"] >= 0 and line["trace_id"] == trace_id


def test_version():
    result = subprocess.run([sys.executable, "-m", "persona_service.cli", "--version"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0 and result.stdout.startswith("persona-service "), result.stdout + result.stderr


def test_throttled_lines_are_one_per_key_per_period_and_count_what_they_suppressed(caplog):
    throttled = Throttled(logging.getLogger("persona_service.test_throttled"), every=60)
    with caplog.at_level(logging.WARNING, logger="persona_service.test_throttled"):
        logged = [throttled.warning("redis", "redis unavailable: %s", i) for i in range(100)]
        throttled.warning("database", "database unavailable")
    assert logged.count(True) == 1
    assert [r.getMessage() for r in caplog.records] == ["redis unavailable: 0", "database unavailable"]
    throttled.every = 0  # the period is over: the next line tells how many it held back
    with caplog.at_level(logging.WARNING, logger="persona_service.test_throttled"):
        throttled.warning("redis", "redis unavailable: %s", "again")
    assert "redis unavailable: again (and 99 more like it in" in caplog.records[-1].getMessage()


def test_a_flood_of_refusals_is_a_line_per_organization_not_per_request(http, stack, tenants):
    free = tenants(plan="free")  # 60 requests a minute
    # Fixed minute windows: 150 calls span at most one boundary, so the two windows refuse at least 150 - 2 * 60.
    # (100 calls, 62 before a boundary and 38 after, were all admitted once.)
    statuses = [http.get(f"/v1/orgs/{free.org_id}", headers=free.auth).status_code for _ in range(150)]
    assert statuses.count(429) >= 30

    def refusal_lines() -> list[str]:  # the server writes its log lines after answering
        return [line for port in stack.grpc_ports
                for line in (stack.log_dir / f"server-{port}.log").read_text().splitlines()
                if free.org_id in line and "rate_limited" in line]

    lines = wait_until(refusal_lines, 30, "a rate_limited line in a server's log")
    assert 1 <= len(lines) <= len(stack.grpc_ports)
