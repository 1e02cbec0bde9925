"""providers.preflight: what `up` and `status` will say about each remote provider before the first request,
against a stand-in model server on 127.0.0.1 (its `GET /v1/models`), one that refuses the key, and an
address where nothing listens. `up`'s banner and `status` say the same through the real stack:
tests/kernel/test_cli_preflight.py."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from persona_service.providers.preflight import check, probes, run
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


def test_a_model_the_server_does_not_have_is_named_with_what_it_offers(server):
    [line] = check(settings(server, openai_model="llama3"))
    assert line == (f"chat: model `llama3` not found at {server}: the server offers: llama3.2:latest, qwen2.5; "
                    "set PERSONA_OPENAI_MODEL to one it offers, or pull it there"), line


def test_each_remote_part_is_checked_and_a_good_one_says_ok(server):
    found = run(probes(settings(server, openai_model="qwen2.5", embedding_provider="openai",
                                openai_embedding_model="nomic-embed-text", image_provider="openai")))
    assert [f.line() for f in found] == [
        f"chat: model `qwen2.5` at {server}: OK",
        f"embeddings: model `nomic-embed-text` not found at {server}: the server offers: llama3.2:latest, qwen2.5; "
        "set PERSONA_OPENAI_EMBEDDING_MODEL to one it offers, or pull it there",
        f"images: model `gpt-image-1` not found at {server}: the server offers: llama3.2:latest, qwen2.5; "
        "set PERSONA_IMAGE_MODEL to one it offers, or pull it there"]


def test_a_refused_key_and_each_part_are_named(server):
    lines = check(settings(server, openai_model="qwen2.5", openai_api_key="wrong", embedding_provider="openai"))
    assert lines == [f"chat: model `qwen2.5` at {server}: the API key is refused (401); set PERSONA_OPENAI_API_KEY",
                     f"embeddings: model `text-embedding-3-small` at {server}: the API key is refused (401); "
                     "set PERSONA_EMBEDDING_API_KEY"]


def test_a_server_that_lists_no_models_is_reachable_and_not_checked(server):
    [found] = run(probes(settings(server.removesuffix("/v1") + "/other", openai_model="qwen2.5")))
    assert found.ok and found.line().endswith(": OK (reachable; it lists no models, so the model is not checked)")


def test_a_server_that_is_not_running_is_named_at_once():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    [line] = check(settings(url, openai_model="qwen2.5"))
    assert line.startswith(f"chat: model `qwen2.5` at {url}: not reachable (") and "running" in line, line
