"""A real HTTP receiver on 127.0.0.1 for webhook tests: records every
request (headers, raw body) and answers from a programmable script."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float

    @property
    def event(self) -> dict:
        return json.loads(self.body)


@dataclass
class Answer:
    status: int = 200
    body: bytes = b"ok"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


class Receiver:
    def __init__(self):
        self.requests: list[Received] = []
        self.lock = threading.Lock()
        # path -> function(Received) -> Answer; default 200.
        self.routes: dict[str, Callable[[Received], Answer]] = {}
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                length = int(self.headers.get("content-length", 0))
                got = Received(self.path, {k.lower(): v for k, v in self.headers.items()}, self.rfile.read(length), time.time())
                answer = receiver.routes.get(self.path, lambda r: Answer())(got)
                if answer.delay:
                    time.sleep(answer.delay)
                with receiver.lock:
                    receiver.requests.append(got)
                self.send_response(answer.status)
                for k, v in answer.headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(answer.body)))
                self.end_headers()
                self.wfile.write(answer.body)

            def log_message(self, *args):
                pass

        class Server(ThreadingHTTPServer):
            request_queue_size = 512  # workers open many keep-alive connections at once

            def handle_error(self, request, client_address):
                pass  # clients that go away (a killed worker, a timeout) are expected here

        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def at(self, path: str) -> list[Received]:
        with self.lock:
            return [r for r in self.requests if r.path == path]

    def wait_for(self, path: str, count: int = 1, timeout: float = 15.0) -> list[Received]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = self.at(path)
            if len(got) >= count:
                return got
            time.sleep(0.05)
        raise AssertionError(f"{path}: {len(self.at(path))} requests, expected {count}")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
