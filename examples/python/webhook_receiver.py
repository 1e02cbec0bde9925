"""A webhook receiver that trusts only deliveries whose signature verifies (Python SDK).

    PERSONA_WEBHOOK_SECRET=whsec_… .venv/bin/python examples/python/webhook_receiver.py --port 9999

Point an endpoint at http://127.0.0.1:9999/hooks (the service delivers to a local http
address only with PERSONA_ENV=development). `--exit-after N`: stop after N verified events."""

import argparse
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from persona_sdk import WebhookVerificationError, webhooks

SECRET = os.environ["PERSONA_WEBHOOK_SECRET"]  # the endpoint's `secret`, shown once when it was created
verified = threading.Semaphore(0)


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))  # the raw bytes, as signed
        try:
            event = webhooks.construct_event(body, self.headers.get(webhooks.SIGNATURE_HEADER), SECRET)
        except WebhookVerificationError as exc:
            print("rejected:", exc, flush=True)
            self.send_response(400)  # not acknowledged: never trusted
        else:
            print("verified", event.type, event.id, event.data, flush=True)  # dedupe on event.id: at least once
            self.send_response(204)  # any 2xx acknowledges the delivery
            verified.release()
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:  # the line above is enough
        pass


parser = argparse.ArgumentParser()
parser.add_argument("--port", type=int, default=9999)
parser.add_argument("--exit-after", type=int, default=0, metavar="N")
args = parser.parse_args()
server = ThreadingHTTPServer(("127.0.0.1", args.port), Receiver)
threading.Thread(target=server.serve_forever, daemon=True).start()
print(f"listening on http://127.0.0.1:{args.port}/hooks", flush=True)
received = 0
try:
    while not args.exit_after or received < args.exit_after:
        verified.acquire()
        received += 1
except KeyboardInterrupt:  # Ctrl-C
    pass
