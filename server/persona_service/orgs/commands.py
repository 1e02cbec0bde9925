"""`persona-service bootstrap` and `persona-service mint-jwt`."""

from __future__ import annotations

import argparse
import json
import sys

from persona_service.kernel.api import Command


def bootstrap(args: argparse.Namespace) -> int:
    from persona_service.kernel.api import KEY_SCOPES, SCOPES, Work, command_database
    from persona_service.orgs.keys import KeyService
    from persona_service.orgs.service import Onboarding

    with command_database(migrations=args.modules.migrations) as engine, engine.begin() as conn:
        made = Onboarding(Work.on(conn), args.modules.organization_openers).create_org(
            args.org_name, plan=args.plan, region=args.region, owner_email=args.owner_email,
            platform_admin=args.platform_admin,
        )
        _, secret = KeyService(Work.on(conn)).create(
            None, org_id=made.org_id, workspace_id=made.workspace_id, user_id=made.user_id, plan=args.plan,
            name="bootstrap", scopes=list(KEY_SCOPES if args.platform_admin else SCOPES), mode=args.mode,
        )
    print(json.dumps({"orgId": made.org_id, "workspaceId": made.workspace_id, "userId": made.user_id, "apiKey": secret}))
    return 0


def _bootstrap_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--org-name", required=True)
    parser.add_argument("--plan", choices=["free", "pro", "team", "enterprise"], default="pro")
    parser.add_argument("--region", choices=["us", "eu"], default="us")
    parser.add_argument("--mode", choices=["live", "test"], default="live", help="key prefix sk_live_ or sk_test_")
    parser.add_argument("--owner-email")
    parser.add_argument("--platform-admin", action="store_true", help="make the Owner a platform administrator")


def mint_jwt(args: argparse.Namespace) -> int:
    from persona_service.kernel.api import command_database, session_token
    from persona_service.orgs.repository import OrgRepository

    with command_database() as engine, engine.connect() as conn:
        member = OrgRepository(conn).member(args.org_id, args.user_id, args.workspace_id)
    if member is None:
        print(f"persona-service: {args.user_id} is not an active member of {args.org_id} with access to "
              f"{args.workspace_id}: the service would refuse the token", file=sys.stderr)
        return 1
    print(session_token(args.user_id, args.org_id, args.workspace_id, args.ttl_seconds))
    return 0


def _mint_jwt_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--user-id", required=True)
    parser.add_argument("--org-id", required=True)
    parser.add_argument("--workspace-id", required=True)
    parser.add_argument("--ttl-seconds", type=int)


COMMANDS = (
    Command("bootstrap", "create an organization, workspace, Owner and an all-scopes API key", bootstrap,
            _bootstrap_arguments, on_instance=True),
    Command("mint-jwt", "issue a session JWT for a member of an organization (refused for anyone else)", mint_jwt,
            _mint_jwt_arguments, on_instance=True, standalone=True),
)
