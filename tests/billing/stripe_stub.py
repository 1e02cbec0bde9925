"""A real HTTP server on 127.0.0.1 speaking the parts of Stripe's API the
Stripe processor uses (form-encoded requests, JSON objects back):
`POST /v1/customers`, `POST /v1/invoiceitems`, `POST /v1/invoices`,
`POST /v1/invoices/{id}/finalize`, `POST /v1/invoices/{id}/pay`,
`GET /v1/invoices/{id}`. `decline = True` makes `pay` answer Stripe's 402
card error; `pdf_gone` lists invoices whose `invoice_pdf` is null; every
request is recorded (method, path, form)."""

from __future__ import annotations

import itertools
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs


class StripeStub:
    def __init__(self):
        self.customers: dict[str, dict[str, Any]] = {}
        self.invoices: dict[str, dict[str, Any]] = {}
        self.pending_items: dict[str, list[dict[str, Any]]] = {}
        self.requests: list[tuple[str, str, dict[str, Any]]] = []
        self.decline = False
        self.pdf_gone: set[str] = set()
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> StripeStub:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _id(self, prefix: str) -> str:
        return f"{prefix}_stub{next(self._ids):06d}"

    def _handle(self, method: str, path: str, form: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.requests.append((method, path, form))
            parts = path.strip("/").split("/")
            if method == "POST" and parts == ["v1", "customers"]:
                customer = {"id": self._id("cus"), "object": "customer", "metadata": _meta(form),
                            "name": form.get("name", "")}
                self.customers[customer["id"]] = customer
                return 200, customer
            if method == "POST" and parts == ["v1", "invoiceitems"]:
                item = {"id": self._id("ii"), "object": "invoiceitem", "customer": form["customer"],
                        "amount": int(form["amount"]), "currency": form["currency"],
                        "description": form.get("description", "")}
                self.pending_items.setdefault(form["customer"], []).append(item)
                return 200, item
            if method == "POST" and parts == ["v1", "invoices"]:
                items = self.pending_items.pop(form["customer"], [])
                invoice = {"id": self._id("in"), "object": "invoice", "customer": form["customer"], "status": "draft",
                           "amount_due": sum(i["amount"] for i in items), "amount_paid": 0,
                           "currency": items[0]["currency"] if items else "usd", "metadata": _meta(form),
                           "invoice_pdf": None, "created": int(time.time())}
                self.invoices[invoice["id"]] = invoice
                return 200, invoice
            if len(parts) >= 3 and parts[:2] == ["v1", "invoices"] and parts[2] in self.invoices:
                invoice = self.invoices[parts[2]]
                if method == "GET" and len(parts) == 3:
                    shown = dict(invoice)
                    if invoice["id"] in self.pdf_gone:
                        shown["invoice_pdf"] = None
                    return 200, shown
                if method == "POST" and parts[3:] == ["finalize"]:
                    invoice["status"] = "open"
                    invoice["invoice_pdf"] = f"{self.url}/pdf/{invoice['id']}.pdf"
                    return 200, invoice
                if method == "POST" and parts[3:] == ["pay"]:
                    if self.decline:
                        return 402, {"error": {"type": "card_error", "code": "card_declined",
                                               "decline_code": "generic_decline", "message": "Your card was declined."}}
                    invoice.update(status="paid", amount_paid=invoice["amount_due"])
                    return 200, invoice
            return 404, {"error": {"type": "invalid_request_error", "message": f"No such route: {method} {path}"}}

    def _handler(self):
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self, method: str) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
                form = {k: v[0] for k, v in parse_qs(raw).items()}
                status, body = stub._handle(method, self.path.split("?")[0], form)
                payload = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.send_header("Request-Id", "req_stub")
                self.end_headers()
                self.wfile.write(payload)

            def do_POST(self) -> None:
                self._answer("POST")

            def do_GET(self) -> None:
                self._answer("GET")

        return Handler


def _meta(form: dict[str, Any]) -> dict[str, str]:
    return {k[len("metadata["):-1]: v for k, v in form.items() if k.startswith("metadata[")}
