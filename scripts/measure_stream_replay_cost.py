"""What saving a keyed stream's frames with its Idempotency-Key costs at its run's end (kernel.transport.runs
`Runs.keep`, kernel.transport.idempotency `keep_frames`): bytes stored and time, for a persona generation and a
chat message streamed with a key.

    .venv/bin/python scripts/measure_stream_replay_cost.py [--rounds 8] [--reps 200]

Starts a test stack (tests/support.py: a server and a runner, as the suite's), makes a Pro organization, a
persona and a chat session, then per round streams, interleaved, a keyed and an unkeyed persona generation and a
keyed and an unkeyed chat message through Envoy (wall time of each, client side: the keyed run's end waits for
the save). For each keyed run: its frames as Redis kept them, their packed size (`pack_ended`), what PostgreSQL
stores (`octet_length(frames)`; checked equal to compressing and sealing them here), what the Fernet token's base64
text would have taken, and zlib's levels 1, 6 and 9 compared. Time, in this process, per keyed run's end: packing,
compressing and sealing its frames (median of `--reps`), and the save's transaction on the stack's PostgreSQL
(`keep_frames` on the run's own record, median and p90 of `--reps`) interleaved with two baselines: a transaction
of one `SELECT 1` (a round trip), and one updating the same record without the blob (`SET locked_until =
locked_until`: what any write's commit costs, its WAL flush included), so the blob's own share is the difference. Unkeyed runs save nothing (no branch but `run.claim is None`).
Prints the load average at start and end (the machine is shared: docs/testing.md).
"""

from __future__ import annotations

import argparse
import base64
import os
import pathlib
import statistics
import sys
import tempfile
import time
import uuid
import zlib

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _median_ms(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1000:.3f} ms"


def _p90_ms(samples: list[float]) -> str:
    return f"{sorted(samples)[int(len(samples) * 0.9) - 1] * 1000:.3f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--reps", type=int, default=200)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))
    import httpx
    import redis
    from cryptography.fernet import Fernet
    from persona_service.kernel.data.engine import make_engine
    from persona_service.kernel.data.idempotency_repository import IdempotencyRepository
    from persona_service.kernel.secretbox import SecretBox
    from persona_service.kernel.transport.idempotency import FRAMES_LEVEL, Claim, Idempotency
    from persona_service.kernel.transport.runs import pack_ended
    from sqlalchemy import text
    from support import TenantFactory, make_stack, running

    print(f"load average at start: {os.getloadavg()}", flush=True)
    with tempfile.TemporaryDirectory() as data_dir, running(make_stack(pathlib.Path(data_dir))) as stack:
        engine = make_engine(stack.database_url, pool_size=2)
        client = redis.Redis.from_url(stack.redis_url)
        tenant = TenantFactory(engine)(plan="pro")
        http = httpx.Client(base_url=stack.http_url, timeout=60)
        persona = http.post("/v1/personas", json={"intent": "A tide-watcher who keeps a ledger of moons"},
                            headers=tenant.auth)
        persona.raise_for_status()
        session = http.post("/v1/chat/sessions", json={"personaId": persona.json()["id"]}, headers=tenant.auth)
        session.raise_for_status()
        sid = session.json()["sessionId"]
        intents = ["A cartographer of vanished coastlines", "A bell-founder who tunes bells by moonlight",
                   "A glassblower who hums to her furnace", "A beekeeper who translates the hive's gossip"]
        questions = ["Which moon do you remember best?", "What do the tides owe you?",
                     "Tell me about the longest night you kept watch.", "Which ledger entry do you regret?"]

        def persona_stream(i: int, headers: dict[str, str]) -> httpx.Response:
            return http.post("/v1/personas", params={"stream": "true"},
                             json={"intent": f"{intents[i % len(intents)]} ({i})"}, headers=headers)

        def chat_stream(i: int, headers: dict[str, str]) -> httpx.Response:
            return http.post(f"/v1/chat/sessions/{sid}/messages", params={"stream": "true"},
                             json={"content": questions[i % len(questions)]}, headers=headers)

        kinds = {"persona generation": persona_stream, "chat message": chat_stream}
        walls: dict[str, dict[bool, list[float]]] = {kind: {True: [], False: []} for kind in kinds}
        kept: dict[str, list[tuple[str, str, list[bytes], int]]] = {kind: [] for kind in kinds}
        for i in range(args.rounds):
            for kind, send in kinds.items():
                for keyed in (True, False) if i % 2 == 0 else (False, True):
                    key = f"cost-{uuid.uuid4()}"
                    headers = {**tenant.auth, **({"Idempotency-Key": key} if keyed else {})}
                    started = time.perf_counter()
                    answer = send(i, headers)
                    walls[kind][keyed].append(time.perf_counter() - started)
                    answer.raise_for_status()
                    if keyed:
                        run_id = answer.headers["x-run-id"]
                        frames = [f if isinstance(f, bytes) else f.encode()
                                  for f in client.lrange(f"run:{run_id}:frames", 0, -1)]
                        with engine.connect() as conn:
                            stored = conn.execute(text("SELECT octet_length(frames) FROM idempotency_keys"
                                                       " WHERE org_id = :org AND key = :key"),
                                                  {"org": tenant.org_id, "key": key}).scalar()
                        kept[kind].append((key, run_id, frames, int(stored or 0)))

        box = SecretBox(Fernet.generate_key().decode())
        store = Idempotency(engine, box)
        for kind in kinds:
            print(f"\n{kind} ({len(kept[kind])} keyed runs):")
            packed = [pack_ended(frames, "completed", None) for _key, _run, frames, _stored in kept[kind]]
            sizes = {level: [len(zlib.compress(p, level)) for p in packed] for level in (1, 6, 9)}
            sealed = [box.seal_bytes(zlib.compress(p, FRAMES_LEVEL)) for p in packed]
            print(f"  frames per run: {statistics.median(len(f) for *_, f, _s in kept[kind])}, packed "
                  f"{statistics.median(len(p) for p in packed)} B, zlib 1/6/9 "
                  f"{'/'.join(str(statistics.median(sizes[level])) for level in (1, 6, 9))} B")
            print(f"  stored (octet_length, median): {statistics.median(s for *_, s in kept[kind])} B; as the "
                  f"token's base64 text it would be {statistics.median(len(s) for s in sealed)} B")
            assert all(s == len(base64.urlsafe_b64decode(t)) for (*_, s), t in zip(kept[kind], sealed, strict=True))
            p = packed[len(packed) // 2]
            cpu: list[float] = []
            for _ in range(args.reps):
                started = time.perf_counter()
                base64.urlsafe_b64decode(box.seal_bytes(zlib.compress(p, FRAMES_LEVEL)))
                cpu.append(time.perf_counter() - started)
            print(f"  pack+compress+seal: {_median_ms(cpu)} (median of {args.reps})")
            save: list[float] = []
            baseline: list[float] = []
            write: list[float] = []
            key, run_id, frames, _stored = kept[kind][len(kept[kind]) // 2]
            claim, blob = Claim(tenant.org_id, key), pack_ended(frames, "completed", None)
            for _ in range(args.reps):
                started = time.perf_counter()
                with engine.begin() as conn:
                    conn.execute(text("SELECT 1"))
                baseline.append(time.perf_counter() - started)
                started = time.perf_counter()
                with engine.begin() as conn:
                    conn.execute(text("UPDATE idempotency_keys SET locked_until = locked_until"
                                      " WHERE org_id = :org AND key = :key"), {"org": tenant.org_id, "key": key})
                write.append(time.perf_counter() - started)
                started = time.perf_counter()
                store.keep_frames(claim, run_id, blob)
                save.append(time.perf_counter() - started)
            with engine.connect() as conn:  # what keep_frames wrote last is what a replay reads
                assert IdempotencyRepository(conn).frames(tenant.org_id, key, run_id) is not None
            print(f"  keep_frames (whole save, its transaction included): median {_median_ms(save)}, p90 "
                  f"{_p90_ms(save)}; baselines: SELECT 1 median {_median_ms(baseline)}, p90 {_p90_ms(baseline)}; "
                  f"the record updated without the blob median {_median_ms(write)}, p90 {_p90_ms(write)}")
            print(f"  stream wall time, client side: keyed median {_median_ms(walls[kind][True])}, unkeyed "
                  f"{_median_ms(walls[kind][False])} ({args.rounds} each, interleaved)")
        http.close()
        client.close()
        engine.dispose()
    print(f"\nload average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
