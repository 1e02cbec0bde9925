"""Online migration check: the previous release serves, 0 errors, on the
schema the current tree's migrations make (docs/online-migrations.md).

    .venv/bin/python scripts/check_online_migration.py [--previous HEAD~1]

A deploy migrates first (expand), then replaces the servers one by one: for
a while the previous release's servers run on the new schema. This script
makes that moment: a fresh embedded PostgreSQL migrated to the current
tree's head, then the previous commit's code (`git archive <rev>`, read-only
git use: the working tree and its git state are untouched) started as a
stack on it (its own edge, server and workers; it does not migrate), and a
smoke set of calls through that release's edge: create, stream, read and
list personas, a chat exchange, the event feed, the audit log, a webhook endpoint whose deliveries
that release's worker fans out (listed, then the endpoint deleted). Any answer that is not a
success fails the check. It takes about a minute, so the suite runs only
the static half (tests/kernel/test_online_migrations.py); `make
check-online-migration` runs this one. For uncommitted work, pass
`--previous HEAD`.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]

# Runs inside the previous release's tree, with its code first on the path.
DRIVER = r'''
import json, os, pathlib, sys, time
prev = pathlib.Path.cwd()
import persona_service
assert pathlib.Path(persona_service.__file__).resolve().is_relative_to(prev), persona_service.__file__
from persona_service.kernel.data import migrate
migrate.upgrade = lambda *args, **kwargs: None  # the schema is the next release's, migrated already
from support import TenantFactory, client_for, engine_for, make_stack, running

results = []

def call(client, method, path, **kwargs):
    r = client.request(method, path, **kwargs)
    results.append({"call": f"{method} {path}", "status": r.status_code, "body": r.text[:300]})
    return r

with running(make_stack(pathlib.Path(sys.argv[1]))) as stack, engine_for(stack) as engine, \
        client_for(stack, timeout=60) as http:
    tenant = TenantFactory(engine)(plan="pro")
    auth = tenant.auth
    # an endpoint first, so the calls' events are fanned out to it by that release's webhook worker
    hook = call(http, "POST", "/v1/webhooks", json={"url": "https://hooks.invalid/smoke", "events": ["*"]},
                headers=auth)
    hook_id = hook.json().get("endpoint", {}).get("id", "missing") if hook.status_code < 300 else "missing"
    made = call(http, "POST", "/v1/personas", json={"intent": "A lighthouse keeper who collects storms"}, headers=auth)
    persona = made.json().get("id", "missing") if made.status_code < 300 else "missing"
    call(http, "GET", f"/v1/personas/{persona}", headers=auth)
    call(http, "GET", "/v1/personas", params={"limit": 5}, headers=auth)
    streamed = call(http, "POST", "/v1/personas", params={"stream": "true"},
                    json={"intent": "A baker who reads bread"}, headers=auth)
    if '"status":"completed"' not in streamed.text:
        results.append({"call": "stream end", "status": 599, "body": streamed.text[-300:]})
    session = call(http, "POST", "/v1/chat/sessions", json={"personaId": persona}, headers=auth)
    session_id = session.json().get("sessionId", "missing") if session.status_code < 300 else "missing"
    call(http, "POST", f"/v1/chat/sessions/{session_id}/messages", json={"content": "Hello"}, headers=auth)
    call(http, "GET", "/v1/events", params={"limit": 5}, headers=auth)
    logged = call(http, "GET", "/v1/audit/events", params={"limit": 5}, headers=auth)  # its own writes, listed
    if logged.status_code < 300 and not logged.json().get("items"):
        results.append({"call": "audit entries", "status": 599, "body": logged.text[-300:]})
    deadline = time.monotonic() + 60
    while True:  # the fan-out is the worker's, in the background: its deliveries show within the minute
        deliveries = http.get(f"/v1/webhooks/{hook_id}/deliveries", params={"limit": 5}, headers=auth)
        if deliveries.status_code >= 300 or deliveries.json().get("items") or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    fanned = deliveries.status_code < 300 and bool(deliveries.json().get("items"))
    results.append({"call": "GET /v1/webhooks/{id}/deliveries (fanned out)", "body": deliveries.text[:300],
                    "status": deliveries.status_code if deliveries.status_code >= 300 else 200 if fanned else 599})
    call(http, "DELETE", f"/v1/webhooks/{hook_id}", headers=auth)
print(json.dumps(results))
'''


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--previous", default="HEAD~1", help="the previous release's commit (default HEAD~1)")
    args = parser.parse_args()
    sys.path[:0] = [str(ROOT / "server"), str(ROOT / "gen" / "python")]
    from persona_service.kernel.data import migrate
    from persona_service.kernel.data.embedded import EmbeddedRedis, postgres_url
    from persona_service.registry import MODULES

    with tempfile.TemporaryDirectory(prefix="online-migration-") as tmp:
        work = pathlib.Path(tmp)
        previous = work / "previous"
        previous.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.previous], check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", str(previous)], input=archive.stdout, check=True)
        database_url = postgres_url(work / "postgres")
        redis = EmbeddedRedis(work / "redis")
        try:
            migrate.upgrade(database_url, MODULES.migrations)  # the next release's schema (expand)
            env = {**os.environ, "DATABASE_URL": database_url, "REDIS_URL": redis.url,
                   "PYTHONPATH": os.pathsep.join(str(previous / p) for p in ("server", "gen/python", "tests"))}
            run = subprocess.run([sys.executable, "-c", DRIVER, str(work / "stack")], cwd=previous, env=env,
                                 capture_output=True, text=True, timeout=600)
        finally:
            redis.close()
    if run.returncode != 0:
        print(run.stdout[-4000:], run.stderr[-4000:], sep="\n")
        return 1
    results = json.loads(run.stdout.strip().splitlines()[-1])
    errors = [r for r in results if r["status"] >= 300]
    for r in results:
        print(f"{r['status']}  {r['call']}")
    print(f"{args.previous} on the current schema: {len(results)} calls, {len(errors)} errors")
    for r in errors:
        print("  ", r["call"], r["body"])
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
