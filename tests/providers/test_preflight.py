"""providers.preflight: what `up` and `status` will say about each remote provider before the first request,
against a stand-in model server on 127.0.0.1 (its `GET /v1/models`), one that refuses the key, and an
address where nothing listens. (Wiring into `up`'s banner and `status`: not yet.)"""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from persona_service.providers.preflight import check
from persona_service.providers.settings import ProviderSettings


@pytest.fixture(scope="module")
def server():
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.headers.get("Authorization") == "Bearer wrong":
                status, body = 401, {"error": {"message": "bad key"}}
            elif self.path == "/v1/models":
                status, body = 200, {"object": "list", "data": [{"id": "llama3.2:latest"}, {"id": "qwen2.5"}]}
            else:
                status, body = 404, {"error": {"message": "not found"}}
            payload = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()


def settings(url: str, **extra: str) -> ProviderSettings:
    return ProviderSettings(provider="openai", openai_base_url=url, **extra)


def test_the_local_model_needs_no_check():
    assert check(ProviderSettings()) == []


@pytest.mark.parametrize("model", ["qwen2.5", "llama3.2", "llama3.2:latest"])
def test_a_model_the_server_lists_is_fine(server, model):
    assert check(settings(server, openai_model=model)) == []


def test_a_model_the_server_does_not_have_is_named(server):
    [line] = check(settings(server, openai_model="llama3"))
    assert line.startswith(f"chat: {server} has no model `llama3` (it lists: llama3.2:latest, qwen2.5)"), line


def test_a_refused_key_and_each_part_are_named(server):
    lines = check(settings(server, openai_model="qwen2.5", openai_api_key="wrong", embedding_provider="openai"))
    assert lines == [f"chat: {server}: the API key is refused (401); set the provider's …_API_KEY",
                     f"embedding: {server}: the API key is refused (401); set the provider's …_API_KEY"]


def test_a_server_that_is_not_running_is_named_at_once():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    [line] = check(settings(url, openai_model="qwen2.5"))
    assert line.startswith(f"chat: {url}: not reachable (") and "running" in line, line
