"""`persona-service`: run the service and administer it from the shell."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time


def _settings():
    from persona_service import config

    return config.load()


def _database_url(settings) -> str:
    from persona_service.embedded import postgres_url

    return settings.database_url or postgres_url(settings.data_dir / "postgres")


def cmd_up(args) -> int:
    from persona_service.stack import Stack, StackError

    settings = _settings()
    started = time.monotonic()
    stack = Stack(settings)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        stack.start()
    except StackError as exc:
        stack.stop()
        print(f"persona-service: {exc}", file=sys.stderr)
        return 1
    print(
        f"Persona Service is up in {time.monotonic() - started:.1f}s\n"
        f"  HTTP/JSON and gRPC (h2c): http://127.0.0.1:{settings.http_port}/v1\n"
        f"  gRPC server(s):           {', '.join(f'127.0.0.1:{p}' for p in stack.grpc_ports)}\n"
        f"  webhook workers:          {stack.workers}\n"
        f"  data:                     {settings.data_dir}\n"
        f"  logs:                     {stack.log_dir}\n"
        f"Create an organization and key: persona-service bootstrap --org-name 'My Org'\n"
        f"Stop with Ctrl-C.",
        flush=True,
    )
    stop.wait()
    print("stopping…", flush=True)
    stack.stop()
    return 0


def cmd_serve(args) -> int:
    from persona_service.server import serve

    serve()
    return 0


def cmd_worker(args) -> int:
    from persona_service.webhooks.worker import main as worker_main

    worker_main()
    return 0


def cmd_migrate(args) -> int:
    from persona_service.db import migrate

    migrate.upgrade(_database_url(_settings()))
    return 0


def cmd_bootstrap(args) -> int:
    from persona_service.db import migrate
    from persona_service.db.engine import make_engine
    from persona_service.domain.keys import KeyService
    from persona_service.domain.orgs import Onboarding
    from persona_service.domain.principal import SCOPES

    url = _database_url(_settings())
    migrate.upgrade(url)
    engine = make_engine(url, pool_size=1)
    with engine.begin() as conn:
        made = Onboarding(conn).create_org(
            args.org_name, plan=args.plan, region=args.region, owner_email=args.owner_email,
            platform_admin=args.platform_admin,
        )
        _, secret = KeyService(conn).create(
            None, org_id=made.org_id, workspace_id=made.workspace_id, user_id=made.user_id, plan=args.plan,
            name="bootstrap", scopes=list(SCOPES), mode=args.mode,
        )
    engine.dispose()
    print(json.dumps({"orgId": made.org_id, "workspaceId": made.workspace_id, "userId": made.user_id, "apiKey": secret}))
    return 0


def cmd_mint_jwt(args) -> int:
    from persona_service.domain.auth import Authenticator, CredentialCache

    settings = _settings()
    auth = Authenticator(settings.resolved_jwt_secret(), CredentialCache(0), settings.jwt_ttl_seconds)
    print(auth.mint_session(args.user_id, args.org_id, args.workspace_id, args.ttl_seconds))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="persona-service", description="Persona Service")
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("up", help="run everything: PostgreSQL, Redis, migrations, gRPC server, webhook worker, Envoy").set_defaults(func=cmd_up)
    sub.add_parser("serve", help="run only the gRPC server (DATABASE_URL and REDIS_URL required)").set_defaults(func=cmd_serve)
    sub.add_parser("worker", help="run the webhook delivery worker (DATABASE_URL, or the embedded PostgreSQL)").set_defaults(
        func=cmd_worker
    )
    sub.add_parser("migrate", help="apply database migrations").set_defaults(func=cmd_migrate)

    boot = sub.add_parser("bootstrap", help="create an organization, workspace, Owner and an all-scopes API key")
    boot.add_argument("--org-name", required=True)
    boot.add_argument("--plan", choices=["free", "pro", "team", "enterprise"], default="pro")
    boot.add_argument("--region", choices=["us", "eu"], default="us")
    boot.add_argument("--mode", choices=["live", "test"], default="live", help="key prefix sk_live_ or sk_test_")
    boot.add_argument("--owner-email")
    boot.add_argument("--platform-admin", action="store_true", help="make the Owner a platform administrator")
    boot.set_defaults(func=cmd_bootstrap)

    jwt = sub.add_parser("mint-jwt", help="issue a session JWT for a user")
    jwt.add_argument("--user-id", required=True)
    jwt.add_argument("--org-id", required=True)
    jwt.add_argument("--workspace-id", required=True)
    jwt.add_argument("--ttl-seconds", type=int)
    jwt.set_defaults(func=cmd_mint_jwt)

    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
