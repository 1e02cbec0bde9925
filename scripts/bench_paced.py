"""Open-loop (paced) HTTP load for scripts/benchmark.py, run as its own process.

Request i is due at start + i/rate and its latency counts from that time, so
a server that falls behind shows in the latency (no coordinated omission);
requests still unsent when the run ends count with the time they had waited.

    python scripts/bench_paced.py '{"port": 8080, "path": "/v1/...", "headers": {...},
                                    "rate": 1000, "seconds": 10, "warmup": 2, "connections": 64}'

Prints one line: `BENCH_JSON {"rps", "p50_ms", "p99_ms", "errors", "unsent"}`.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import sys


async def _response_status(reader: asyncio.StreamReader) -> int:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    await reader.readexactly(length)
    return int(head[9:12])


async def paced(cfg: dict) -> dict:
    host, port, rate = "127.0.0.1", cfg["port"], cfg["rate"]
    request = (
        f"GET {cfg['path']} HTTP/1.1\r\nHost: {host}:{port}\r\n"
        + "".join(f"{k}: {v}\r\n" for k, v in cfg["headers"].items()) + "\r\n"
    ).encode()
    loop = asyncio.get_running_loop()
    start = loop.time() + 0.2
    measure_from = start + cfg["warmup"]
    end = measure_from + cfg["seconds"]
    due_numbers = itertools.count()
    latencies: list[float] = []
    errors = completed = 0

    async def connection() -> None:
        nonlocal errors, completed
        reader = writer = None
        while True:
            due = start + next(due_numbers) / rate
            if due >= end:
                break
            if due > loop.time():
                await asyncio.sleep(due - loop.time())
            try:
                if writer is None:
                    reader, writer = await asyncio.open_connection(host, port)
                writer.write(request)
                ok = 200 <= await asyncio.wait_for(_response_status(reader), 30) < 300
            except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError):
                ok = False
                if writer is not None:
                    writer.close()
                reader = writer = None
            if due >= measure_from:
                if ok:
                    latencies.append(loop.time() - due)
                    completed += 1
                else:
                    errors += 1
        if writer is not None:
            writer.close()

    await asyncio.gather(*(connection() for _ in range(cfg["connections"])))
    finished = loop.time()
    # Due in the window but never sent (every connection was busy): they waited at least until now.
    first_unsent = max(next(due_numbers), math.ceil((measure_from - start) * rate))
    unsent = max(0, math.ceil((end - start) * rate) - first_unsent)
    latencies += [finished - (start + i / rate) for i in range(first_unsent, first_unsent + unsent)]
    latencies.sort()

    def pct(q: float) -> float:
        return latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000 if latencies else math.nan

    return {"rps": completed / cfg["seconds"], "p50_ms": pct(0.50), "p99_ms": pct(0.99), "errors": errors,
            "unsent": unsent}


def main() -> None:
    try:
        from uvloop import run
    except ImportError:
        from asyncio import run
    print("BENCH_JSON " + json.dumps(run(paced(json.loads(sys.argv[1])))), flush=True)


if __name__ == "__main__":
    main()
