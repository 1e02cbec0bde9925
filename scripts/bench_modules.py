"""Numbers the domain modules' issues ask for. Portraits: how long the local
provider takes to draw and to edit a PNG, how long a generate and an edit
take end to end through Envoy (row, durable task, storage, signed URL), and
how many signed URLs per second the service serves (wrk on one URL, through
Envoy). Billing: how long an invoice PDF takes to render, and the latency of
the invoice list through Envoy.

    make bench-modules            # or: python scripts/bench_modules.py --servers 2 --seconds 10

Needs wrk for the serving run (`make bench-tools`). Results go to
.build/bench-modules.json as well as stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

import httpx

ROOT = pathlib.Path(__file__).resolve().parents[1]
INSTRUCTIONS = ("make the background blue", "add glasses", "black and white", "zoom in", "red hair", "blur",
                "mirror", "brighter", "add a hat", "sepia")


def summary(samples_ms: list[float]) -> dict[str, float]:
    ordered = sorted(samples_ms)
    return {"n": len(ordered), "p50_ms": round(statistics.median(ordered), 2),
            "p95_ms": round(ordered[max(0, int(len(ordered) * 0.95) - 1)], 2), "mean_ms": round(statistics.mean(ordered), 2)}


def local_provider(runs: int) -> dict[str, dict[str, float]]:
    from persona_service.kernel.models import ImagePrompt
    from persona_service.providers.local import LocalProvider

    provider = LocalProvider()
    draw, edit = [], []
    source = provider.generate_image(ImagePrompt("warm-up"))
    for i in range(runs):
        started = time.perf_counter()
        source = provider.generate_image(ImagePrompt(f"persona-{i}", "Ada", ("curious", "kind"), "at dawn", "flat"))
        draw.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        provider.edit_image(source, INSTRUCTIONS[i % len(INSTRUCTIONS)])
        edit.append((time.perf_counter() - started) * 1000)
    return {"generate": summary(draw), "edit": summary(edit), "png_bytes": {"n": 1, "size": len(source)}}


def pdf_render(runs: int) -> dict[str, float]:
    from datetime import UTC, datetime, timedelta

    from persona_service.billing.pdf import render_invoice
    from persona_service.billing.records import InvoiceRecord, LineItem

    now = datetime.now(UTC)
    lines = tuple(LineItem(f"Line {i}", 1, 4900, now, now + timedelta(days=30)) for i in range(5))
    invoice = InvoiceRecord("inv_bench", "org_bench", "in_bench", "BENCH-0001", "renewal", "paid", "usd", 24500,
                            24500, now, now + timedelta(days=30), now, now, lines, 2, "", 0, now)
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        render_invoice(invoice, "Benchmark Org")
        samples.append((time.perf_counter() - started) * 1000)
    return summary(samples)


def invoice_list(http: httpx.Client, runs: int) -> dict[str, float]:
    """Latency of GET /v1/billing/invoices (20 invoices: plan changes back and forth)."""
    for i in range(20):
        http.post("/v1/billing/subscription/change", json={"plan": ("team", "pro")[i % 2]}).raise_for_status()
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        http.get("/v1/billing/invoices", params={"limit": 20}).raise_for_status()
        samples.append((time.perf_counter() - started) * 1000)
    return summary(samples)


def start_stack(servers: int, tmp: pathlib.Path):
    from persona_service.kernel.settings import Settings
    from persona_service.process.stack import Stack, free_port
    from persona_service.registry import MODULES

    settings = Settings(data_dir=tmp, database_url=os.environ.get("DATABASE_URL", ""),
                        redis_url=os.environ.get("REDIS_URL", ""), http_port=free_port(), grpc_port=free_port(1000),
                        server_processes=servers)
    ports = [settings.grpc_port] + [free_port(1000) for _ in range(servers - 1)]  # stream ports (+1000) free too
    stack = Stack(settings, MODULES, grpc_ports=ports, extra_env={"PERSONA_SIGNED_URL_TTL_SECONDS": "3600"})
    stack.start()
    return stack


def seed(stack) -> dict[str, str]:
    from persona_service.config.repository import ORG_LEVEL, ConfigRepository
    from persona_service.kernel.data.engine import make_engine
    from persona_service.kernel.data.work import Work
    from persona_service.orgs.keys import KeyService
    from persona_service.orgs.service import Onboarding
    from persona_service.registry import MODULES

    engine = make_engine(stack.database_url, pool_size=1)
    with engine.begin() as conn:
        made = Onboarding(Work.on(conn), MODULES.organization_openers).create_org(f"Portrait benchmark {uuid.uuid4().hex[:8]}", plan="enterprise")
        for name in ("requests_per_minute", "requests_per_day", "images_per_month", "cap_multiplier"):
            ConfigRepository(conn).upsert(made.org_id, ORG_LEVEL, f"api.rate_limit.{name}", 10**6, "benchmark")
        _, key = KeyService(Work.on(conn)).create(
            None, org_id=made.org_id, workspace_id=made.workspace_id, user_id=made.user_id, plan="enterprise",
            name="benchmark", scopes=["personas:read", "personas:write", "config:read", "config:write"],
        )
    engine.dispose()
    return {"Authorization": f"Bearer {key}"}


def end_to_end(http: httpx.Client, runs: int) -> tuple[dict, str]:
    persona = http.post("/v1/personas", json={"intent": "A patient librarian who paints in watercolour"})
    persona.raise_for_status()
    persona_id = persona.json()["id"]
    generate, edit = [], []
    url = ""
    for i in range(runs):
        started = time.perf_counter()
        made = http.post(f"/v1/personas/{persona_id}/portraits", json={"prompt": f"variant {i}"})
        generate.append((time.perf_counter() - started) * 1000)
        made.raise_for_status()
        assert made.json()["status"] == "generated", made.text
        started = time.perf_counter()
        edited = http.post(f"/v1/personas/{persona_id}/portrait/{made.json()['id']}/edit",
                           json={"instruction": INSTRUCTIONS[i % len(INSTRUCTIONS)]})
        edit.append((time.perf_counter() - started) * 1000)
        edited.raise_for_status()
        url = edited.json()["signedUrl"]
    return {"generate": summary(generate), "edit": summary(edit)}, url


def serve(url: str, seconds: int, connections: int) -> dict[str, float]:
    out = subprocess.run(["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "--latency", url],
                         capture_output=True, text=True, check=True).stdout
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    latency = {p: re.search(rf"\s{p}%\s+([\d.]+)(us|ms|s)", out) for p in ("50", "99")}

    def ms(found) -> float:
        value, unit = float(found.group(1)), found.group(2)
        return value / 1000 if unit == "us" else value * 1000 if unit == "s" else value

    return {"requests_per_second": rate, "p50_ms": ms(latency["50"]), "p99_ms": ms(latency["99"]),
            "errors": int(non_2xx.group(1)) if non_2xx else 0, "connections": connections, "seconds": seconds}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30, help="draws/edits (and API calls) to time")
    parser.add_argument("--servers", type=int, default=2, help="server processes behind Envoy")
    parser.add_argument("--seconds", type=int, default=10, help="length of the serving run")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--json-out", default=str(ROOT / ".build" / "bench-modules.json"))
    args = parser.parse_args()

    results: dict = {"cpus": os.cpu_count(), "local_provider": local_provider(args.runs)}
    print("local provider (in process):", json.dumps(results["local_provider"]), flush=True)
    results["invoice_pdf_render"] = pdf_render(args.runs)
    print("invoice PDF render (in process):", json.dumps(results["invoice_pdf_render"]), flush=True)
    with tempfile.TemporaryDirectory(prefix="persona-bench-portraits-") as tmp:
        stack = start_stack(args.servers, pathlib.Path(tmp))
        try:
            with httpx.Client(base_url=stack.http_url, headers=seed(stack), timeout=60) as http:
                results["through_envoy"], url = end_to_end(http, args.runs)
                print("through Envoy:", json.dumps(results["through_envoy"]), flush=True)
                results["invoice_list"] = invoice_list(http, args.runs)
                print("invoice list through Envoy:", json.dumps(results["invoice_list"]), flush=True)
            results["signed_url_serving"] = serve(url, args.seconds, args.connections)
            print("signed-URL serving:", json.dumps(results["signed_url_serving"]), flush=True)
        finally:
            stack.stop()
    out = pathlib.Path(args.json_out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
