"""A webhook receiver: verifies each delivery's signature with the Python SDK and prints the event.

    PERSONA_WEBHOOK_SECRET=whsec_… python examples/webhook_receiver.py --port 9999

Point a webhook endpoint at http://127.0.0.1:9999/hooks (the service must run with
PERSONA_ENV=development to deliver to a local http address). A delivery whose signature
does not verify is answered 400 and never trusted; a verified one 204, once printed.
`--exit-after N` stops after N verified events (the suite uses it)."""

from __future__ import annotations

import argparse
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from persona_sdk import WebhookVerificationError, webhooks


def handler(secret: str, received: threading.Semaphore) -> type[BaseHTTPRequestHandler]:
    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))  # the raw bytes, as signed
            try:
                event = webhooks.construct_event(body, self.headers.get(webhooks.SIGNATURE_HEADER), secret)
            except WebhookVerificationError as exc:
                print(f"rejected: {exc}", flush=True)
                self.send_response(400)
                self.end_headers()
                return
            print(f"verified {event.type} {event.id} {event.data}", flush=True)
            self.send_response(204)  # any 2xx acknowledges; anything else is retried
            self.end_headers()
            received.release()

        def log_message(self, format: str, *args: object) -> None:  # one line per event is enough
            pass

    return Receiver


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--port", type=int, default=9999)
    parser.add_argument("--exit-after", type=int, metavar="N", help="stop after N verified events")
    args = parser.parse_args()
    secret = os.environ.get("PERSONA_WEBHOOK_SECRET")
    if not secret:
        print("webhook_receiver: set PERSONA_WEBHOOK_SECRET to the endpoint's secret (whsec_…)", file=sys.stderr)
        return 2
    received = threading.Semaphore(0)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), handler(secret, received))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"listening on http://127.0.0.1:{args.port}/hooks", flush=True)
    count = 0
    try:
        while args.exit_after is None or count < args.exit_after:
            received.acquire()
            count += 1
    except KeyboardInterrupt:
        pass
    server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
