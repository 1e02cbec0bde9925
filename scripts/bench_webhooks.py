"""Webhook delivery benchmark: sustained deliveries/s from the outbox to a
local receiver on 127.0.0.1, with one worker process and with two.

Embedded PostgreSQL (migrated), one endpoint subscribed to `*`, N events
written to the outbox, then `persona-service worker` process(es) started; the
rate is measured on the succeeded-deliveries count between 10% and 90% of
the run (fan-out, signing, keep-alive POSTs and attempt records included).

Also reported: CPU seconds used by the worker process(es) and by the receiver
(a raw asyncio protocol, uvloop when present), which share the machine.

Run: .venv/bin/python scripts/bench_webhooks.py [--events 20000] [--workers 1 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import pathlib
import subprocess
import sys
import tempfile
import time

RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok"


def receiver(port_queue) -> None:
    """A minimal keep-alive HTTP/1.1 receiver (asyncio, uvloop when present)."""
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass

    class Proto(asyncio.Protocol):
        def connection_made(self, transport):
            self.t, self.buf = transport, b""

        def data_received(self, data):
            self.buf += data
            while True:
                head_end = self.buf.find(b"\r\n\r\n")
                if head_end < 0:
                    return
                head = self.buf[:head_end].lower()
                i = head.find(b"content-length:")
                length = int(head[i + 15:].split(b"\r\n", 1)[0]) if i >= 0 else 0
                if len(self.buf) < head_end + 4 + length:
                    return
                self.buf = self.buf[head_end + 4 + length:]
                self.t.write(RESPONSE)

    async def main():
        server = await asyncio.get_running_loop().create_server(Proto, "127.0.0.1", 0, backlog=1024)
        port_queue.put(server.sockets[0].getsockname()[1])
        await server.serve_forever()

    asyncio.run(main())


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(url_db: str, data_dir: pathlib.Path, receiver_url: str, events: int, workers: int, receiver_pid: int) -> dict:
    from persona_service.kernel.data.engine import make_engine
    from persona_service.kernel.data.work import Work
    from persona_service.kernel.principal import SCOPES, Principal
    from persona_service.kernel.secretbox import SecretBox
    from persona_service.kernel.settings import Settings
    from persona_service.kernel.transport.outbox import Outbox
    from persona_service.orgs.service import Onboarding
    from persona_service.registry import MODULES
    from persona_service.webhooks.service import WebhookService
    from persona_service.webhooks.tables import WebhookDelivery
    from sqlalchemy import func, select

    engine = make_engine(url_db, pool_size=2)
    box = SecretBox(Settings(data_dir=data_dir).resolved_secrets_key())
    with engine.begin() as conn:
        made = Onboarding(Work.on(conn), MODULES.organization_openers).create_org(f"bench {time.time()}", plan="pro", region="us")
        p = Principal("api_key", "bench", made.org_id, made.workspace_id, made.user_id, frozenset(SCOPES), "owner", "pro", False)
        endpoint, _ = WebhookService(Work.on(conn), box=box, allow_private=True).create(p, url=receiver_url, events=["*"])
        outbox = Outbox(Work.on(conn))
        for i in range(events):
            outbox.emit("persona.updated", made.org_id, made.workspace_id, {"personaId": f"p{i}", "version": i})
    env = {**os.environ, "DATABASE_URL": url_db, "PERSONA_DATA_DIR": str(data_dir), "PERSONA_WEBHOOKS_ALLOW_PRIVATE": "1",
           "PERSONA_LOG_LEVEL": "WARNING"}
    procs = [subprocess.Popen([sys.executable, "-m", "persona_service.cli", "worker"], env=env, stdin=subprocess.DEVNULL)
             for _ in range(workers)]
    count = select(func.count()).select_from(WebhookDelivery).where(
        WebhookDelivery.endpoint_id == endpoint["id"], WebhookDelivery.status == "succeeded")
    marks: dict[float, float] = {}
    receiver_cpu = cpu_seconds(receiver_pid)
    started = time.monotonic()
    try:
        while True:
            with engine.connect() as conn:
                done = conn.execute(count).scalar_one()
            now = time.monotonic()
            for frac in (0.1, 0.9):
                if done >= frac * events and frac not in marks:
                    marks[frac] = now
            if done >= events or now - started > 600:
                break
            time.sleep(0.05)
    finally:
        receiver_cpu = cpu_seconds(receiver_pid) - receiver_cpu
        worker_cpu = [cpu_seconds(proc.pid) for proc in procs]
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait()
    engine.dispose()
    total = time.monotonic() - started
    rate = 0.8 * events / (marks[0.9] - marks[0.1]) if 0.9 in marks else 0.0
    return {"workers": workers, "events": events, "delivered": done, "seconds": round(total, 2),
            "sustained_deliveries_per_s": round(rate), "overall_deliveries_per_s": round(done / total),
            # CPU seconds over the whole run: the worker(s) (start-up included) and the receiver.
            "worker_cpu_s": [round(c, 2) for c in worker_cpu], "receiver_cpu_s": round(receiver_cpu, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=20000)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()

    from persona_service.kernel.data import migrate
    from persona_service.kernel.data.embedded import postgres_url
    from persona_service.registry import MODULES

    queue = multiprocessing.Queue()
    recv = multiprocessing.Process(target=receiver, args=(queue,), daemon=True)
    recv.start()
    receiver_url = f"http://127.0.0.1:{queue.get(timeout=10)}/hook"
    with tempfile.TemporaryDirectory(prefix="bench-webhooks-") as tmp:
        data_dir = pathlib.Path(tmp)
        url_db = postgres_url(data_dir / "postgres")
        migrate.upgrade(url_db, MODULES.migrations)
        results = [run(url_db, data_dir, receiver_url, args.events, n, recv.pid) for n in args.workers]
    recv.terminate()
    print(json.dumps({"cpus": os.cpu_count(), "results": results}, indent=2))


if __name__ == "__main__":
    main()
