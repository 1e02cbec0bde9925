"""The TypeScript SDK (sdk/typescript) on the real stack, through Envoy.

Builds the SDK, then runs its node:test suite (sdk/typescript/test/*.test.mjs,
importing the built dist/) against: the session stack; a second stack whose
provider is the OpenAI-compatible stub (a 502 the SDK retries with the same
Idempotency-Key, a 429 whose Retry-After it waits out), driven from node
through a small fault-control server; and a real webhook delivery (a ping)
captured by a local receiver, handed over in a file with its secret. Also:
scripts/gen_sdk_typescript.py --check, and `tsc --noEmit` over the SDK.
Everything reaches node through PERSONA_SDK_* environment variables."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from providers.openai_stub import OpenAIStub
from webhooks.wh_receiver import Receiver

ROOT = Path(__file__).resolve().parents[2]
TSC = ROOT / "node_modules" / ".bin" / "tsc"
NODE = shutil.which("node") or "node"
NPM = shutil.which("npm") or "npm"
# The counts at the end of node's TAP report; all but the first two must be 0.
COUNTS = ("tests", "pass", "fail", "cancelled", "skipped", "todo")


def run(*args: str, env: dict[str, str] | None = None, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def output(result: subprocess.CompletedProcess[str]) -> str:
    return f"exit {result.returncode}\n--- stdout\n{result.stdout[-20000:]}\n--- stderr\n{result.stderr[-5000:]}"


@pytest.fixture(scope="session")
def building() -> Iterator[subprocess.Popen[str]]:
    """The SDK's build (into sdk/typescript/dist/), started first: it runs while the stacks start."""
    assert TSC.exists(), "TypeScript is not installed: run `npm ci` at the repository root"
    process = subprocess.Popen([NPM, "run", "build", "--workspace", "sdk/typescript"], cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    yield process
    if process.poll() is None:
        process.kill()
        process.communicate()


@pytest.fixture(scope="module")
def built(building) -> None:
    out, _ = building.communicate(timeout=180)
    assert building.returncode == 0, f"npm run build: exit {building.returncode}\n{out}"


class FaultControl:
    """What node may ask of the OpenAI stub over HTTP: reset it, inject errors
    or delays, count the requests it got (by path suffix)."""

    def __init__(self, stub: OpenAIStub):
        control = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                control.answer(self, control.act(self.path, body))

            def do_GET(self) -> None:
                url = urlparse(self.path)
                suffix = parse_qs(url.query).get("suffix", [""])[0]
                control.answer(self, {"count": len(stub.requests_to(suffix))})

            def log_message(self, *args: Any) -> None:
                pass

        self.stub = stub
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def act(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if path == "/reset":
            self.stub.reset()
        elif path == "/error":
            self.stub.inject_error(body["times"], body.get("status", 500), path=body.get("path"))
        elif path == "/delay":
            self.stub.inject_delay(body["times"], body["seconds"], path=body.get("path"))
        else:
            return {"error": f"unknown control {path}"}
        return {"ok": True}

    @staticmethod
    def answer(handler: BaseHTTPRequestHandler, value: dict[str, Any]) -> None:
        payload = json.dumps(value).encode()
        handler.send_response(404 if "error" in value else 200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def control(stub) -> Iterator[FaultControl]:
    control = FaultControl(stub)
    yield control
    control.close()


@pytest.fixture(scope="module")
def delivery(http, tenants, tmp_path_factory) -> Iterator[Path]:
    """A real signed delivery: a ping of an endpoint on a local receiver, its raw
    body, headers and the endpoint's secret written to a file for node."""
    tenant = tenants(plan="pro")
    receiver = Receiver()
    try:
        r = http.post("/v1/webhooks", headers=tenant.auth,
                      json={"url": receiver.url("/sdk-ts"), "events": ["webhook.endpoint.test_ping"]})
        assert r.status_code == 200, r.text
        endpoint, secret = r.json()["endpoint"], r.json()["secret"]
        r = http.post(f"/v1/webhooks/{endpoint['id']}/ping", json={}, headers=tenant.auth)
        assert r.status_code == 200, r.text
        got = receiver.wait_for("/sdk-ts")[0]
        path = tmp_path_factory.mktemp("sdk-ts-webhook") / "delivery.json"
        path.write_text(json.dumps({"bodyBase64": base64.b64encode(got.body).decode(), "headers": got.headers,
                                    "secret": secret, "endpointId": endpoint["id"]}))
        yield path
    finally:
        receiver.close()


def test_generated_resources_are_fresh():
    result = run(sys.executable, "scripts/gen_sdk_typescript.py", "--check")
    assert result.returncode == 0, output(result)


def test_node_suite(building, stack, tenants, pstack, ptenants, control, delivery, built):
    tenant = tenants(plan="pro")
    env = {
        **os.environ,
        "PERSONA_SDK_BASE_URL": stack.http_url,
        "PERSONA_SDK_API_KEY": tenant.api_key,
        "PERSONA_SDK_READ_ONLY_KEY": tenants.tenant_key(tenant, ["personas:read"]),
        "PERSONA_SDK_PAGES_KEY": tenants(plan="pro").api_key,
        "PERSONA_SDK_STUB_BASE_URL": pstack.http_url,
        "PERSONA_SDK_STUB_API_KEY": ptenants(plan="pro").api_key,
        "PERSONA_SDK_STUB_FREE_KEY": ptenants(plan="free").api_key,
        "PERSONA_SDK_CONTROL_URL": control.url,
        "PERSONA_SDK_WEBHOOK_DELIVERY": str(delivery),
    }
    result = run(NODE, "--test", "--test-reporter=tap", "sdk/typescript/test/", env=env, timeout=240)
    assert result.returncode == 0, output(result)
    # Nothing skipped or left out: every test ran and passed.
    summary = dict(line[2:].split(" ", 1) for line in result.stdout.splitlines()
                   if line.startswith("# ") and line[2:].split(" ", 1)[0] in COUNTS)
    assert all(summary.get(count) == "0" for count in COUNTS[2:]), output(result)
    assert int(summary["pass"]) == int(summary["tests"]) >= 30, output(result)


def test_sdk_type_checks(built):
    """The sources under the strict tsconfig, then a caller's code against the built
    package's declarations (sdk/typescript/test-support/types-check.ts)."""
    for project in ("sdk/typescript", "sdk/typescript/test-support"):
        result = run(str(TSC), "-p", project, "--noEmit")
        assert result.returncode == 0, output(result)
