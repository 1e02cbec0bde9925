"""Seed a database at production volume, through PostgreSQL's bulk path (COPY).

    make seed-volume                                   # the issue's sizes (#32)
    python scripts/seed_volume.py --scale 0.1          # a tenth of every size
    python scripts/seed_volume.py --messages 200000 --database-url postgresql://...

The schema is the migrations' (applied first); column lists come from the
modules' table declarations (`tables.py`), and values a declaration defaults
in Python are filled from it, so a new NOT NULL column with a default needs
no change here. Organizations, users and keys go through the domain services
(Onboarding, KeyService), exactly as `bootstrap` makes them; the volume goes
through COPY. One big tenant holds the volume, the other organizations are
small. What the benchmark needs (keys, ids of the deep chain, the heaviest
user...) is written as JSON to `--out`. Without --database-url the embedded
PostgreSQL under --data-dir is used, and made afresh each time.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import random
import shutil
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Engine, Table
from sqlalchemy.dialects.postgresql import JSONB

ROOT = pathlib.Path(__file__).resolve().parents[1]
EPOCH = datetime(2024, 1, 1, tzinfo=UTC)
TAGS = ("education", "support", "sales", "fiction", "gaming", "health", "legal", "finance", "travel", "kids",
        "language", "history", "science", "music", "coding", "cooking", "fitness", "writing", "therapy", "news")
EVENT_TYPES = ("persona.created", "persona.updated", "persona.forked", "chat.session.started", "chat.message.created")
AUDIT_ACTIONS = ("personas.create", "personas.update", "chat.sessions.create", "keys.create", "config.set")
ENTERPRISE = "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"


@dataclasses.dataclass(frozen=True)
class Sizes:
    """Rows per table of the big tenant (the issue's figures by default)."""

    orgs: int = 1000
    personas: int = 200_000
    chain_depth: int = 50
    chains: int = 20
    sessions: int = 100_000
    messages: int = 5_000_000
    # The share of sessions (and so of messages) that belongs to the heaviest user.
    heavy_share: float = 0.2
    scim_users: int = 100_000
    scim_groups: int = 2_000
    events: int = 1_000_000
    deliveries: int = 1_000_000
    portraits: int = 50_000
    invoices: int = 36
    audit: int = 100_000
    listings: int = 10_000
    reviews: int = 10_000

    def scaled(self, factor: float) -> Sizes:
        """Every count times `factor` (at least 1); the chain depth and invoices (months) stay."""
        keep = {"chain_depth", "invoices", "heavy_share"}
        return dataclasses.replace(self, **{
            f.name: max(1, int(getattr(self, f.name) * factor))
            for f in dataclasses.fields(self) if f.name not in keep
        })


class Copier:
    """COPY rows into one table: the columns are the table's, and a column a
    row leaves out takes the Python default its declaration gives (COPY
    applies only server defaults)."""

    def __init__(self, dbapi_conn: Any, table: Table):
        self.conn, self.table = dbapi_conn, table

    def copy(self, rows: Iterable[dict[str, Any]]) -> int:
        rows = iter(rows)
        first = next(rows, None)
        if first is None:
            return 0
        unknown = set(first) - set(self.table.c.keys())
        if unknown:
            raise KeyError(f"{self.table.name} has no column(s) {sorted(unknown)}")
        defaults = {c.key: c.default.arg for c in self.table.c
                    if c.key not in first and c.default is not None and c.default.is_scalar}
        callables = {c.key: c.default.arg for c in self.table.c
                     if c.key not in first and c.default is not None and c.default.is_callable}
        keys = [*first, *defaults, *callables]
        json_keys = {c.key for c in self.table.c if isinstance(c.type, JSONB)}
        names = ", ".join(f'"{self.table.c[k].name}"' for k in keys)
        n = 0
        with self.conn.cursor() as cur:
            # The rows are consistent by construction: skip the per-row foreign-key checks and the
            # notification triggers (a superuser's privilege; the embedded PostgreSQL's user is one).
            if cur.execute("SELECT current_setting('is_superuser')").fetchone() == ("on",):
                cur.execute("SET LOCAL session_replication_role = replica")
        with self.conn.cursor() as cur, cur.copy(f"COPY {self.table.name} ({names}) FROM STDIN") as copy:
            for row in _chain(first, rows):
                full = {**row, **defaults, **{k: f(None) for k, f in callables.items()}}
                copy.write_row([json.dumps(full[k]) if k in json_keys else full[k] for k in keys])
                n += 1
        return n


def _chain(first: dict[str, Any], rest: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    yield first
    yield from rest


def at(i: int, step: float = 1.0) -> datetime:
    """Row `i`'s timestamp: increasing, so keyset pages have a realistic order."""
    return EPOCH + timedelta(seconds=i * step)


@dataclasses.dataclass
class Seeded:
    """What the benchmark and the plan tests need to reach the seeded data."""

    org_id: str
    workspace_id: str
    user_id: str
    api_key: str
    small_org_ids: list[str]
    deep_persona_id: str
    persona_id: str
    session_id: str
    heavy_user_id: str
    endpoint_id: str
    scim_user_name: str
    counts: dict[str, int]
    seconds: dict[str, float]


class Seeder:
    def __init__(self, engine: Engine, sizes: Sizes, seed: int = 32, log: Callable[[str], None] = print):
        self.engine, self.sizes, self.log = engine, sizes, log
        self.random = random.Random(seed)
        self.counts: dict[str, int] = {}
        self.seconds: dict[str, float] = {}

    def copy(self, model: type, rows: Iterable[dict[str, Any]]) -> None:
        from persona_service.kernel.data.base import table_of

        table = table_of(model)
        started = time.perf_counter()
        raw = self.engine.raw_connection()
        try:
            n = Copier(raw.driver_connection, table).copy(rows)
            raw.commit()
        finally:
            raw.close()
        took = time.perf_counter() - started
        self.counts[table.name] = self.counts.get(table.name, 0) + n
        self.seconds[table.name] = round(self.seconds.get(table.name, 0.0) + took, 2)
        self.log(f"  {table.name}: {n} rows in {took:.1f} s")

    def run(self) -> Seeded:
        big, small = self.organizations()
        org_id, workspace_id, user_id, api_key = big
        personas = self.personas(org_id, workspace_id, small)
        heavy_user = user_id
        session_id = self.chat(org_id, workspace_id, personas, heavy_user, small)
        scim_user_name = self.scim(org_id)
        endpoint_id = self.webhooks(org_id, workspace_id, personas)
        self.portraits(org_id, workspace_id, personas)
        self.invoices(org_id)
        self.audit(org_id, workspace_id, heavy_user)
        self.marketplace(small)
        self.moderation(org_id, workspace_id, small)
        # Statistics for the planner at once (autovacuum would get there later); ANALYZE's
        # results roll back with a transaction, hence autocommit.
        with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("ANALYZE")
        return Seeded(
            org_id=org_id, workspace_id=workspace_id, user_id=user_id, api_key=api_key,
            small_org_ids=[o[0] for o in small], deep_persona_id=personas.deep_tip, persona_id=personas.ids[1],
            session_id=session_id, heavy_user_id=heavy_user, endpoint_id=endpoint_id, scim_user_name=scim_user_name,
            counts=self.counts, seconds=self.seconds,
        )

    # --- organizations (through the domain services) ---------------------------

    def organizations(self):
        from persona_service.config.repository import ORG_LEVEL, ConfigRepository
        from persona_service.kernel.data.work import Work
        from persona_service.kernel.principal import KEY_SCOPES
        from persona_service.orgs.keys import KeyService
        from persona_service.orgs.service import Onboarding
        from persona_service.registry import MODULES

        started = time.perf_counter()
        tag = uuid.uuid4().hex[:6]
        with self.engine.begin() as conn:
            made = Onboarding(Work.on(conn), MODULES.organization_openers).create_org(f"Volume {tag}", plan="enterprise", platform_admin=True)
            # The benchmark measures latency, not the plan's request quotas.
            for name in ("requests_per_minute", "requests_per_day", "cap_multiplier"):
                ConfigRepository(conn).upsert(made.org_id, ORG_LEVEL, f"api.rate_limit.{name}", 10**9, "seed")
            _, key = KeyService(Work.on(conn)).create(
                None, org_id=made.org_id, workspace_id=made.workspace_id, user_id=made.user_id, plan="enterprise",
                name="volume", scopes=list(KEY_SCOPES),
            )
            small = []
            for i in range(self.sizes.orgs - 1):
                o = Onboarding(Work.on(conn), MODULES.organization_openers).create_org(f"Small {tag} {i}", plan="pro")
                small.append((o.org_id, o.workspace_id, o.user_id))
        self.counts["organizations"] = self.sizes.orgs
        self.seconds["organizations"] = round(time.perf_counter() - started, 2)
        self.log(f"  organizations: {self.sizes.orgs} in {self.seconds['organizations']} s")
        return (made.org_id, made.workspace_id, made.user_id, key), small

    # --- personas: chains of `chain_depth`, forks, the rest roots --------------

    def personas(self, org_id: str, workspace_id: str, small) -> Personas:
        from persona_service.personas.tables import Persona

        s = self.sizes
        ids = [str(uuid.UUID(int=self.random.getrandbits(128), version=4)) for _ in range(s.personas)]
        parent: list[str | None] = [None] * s.personas
        root = list(ids)
        in_chains = min(s.personas, s.chains * s.chain_depth)
        for i in range(in_chains):
            if i % s.chain_depth:
                parent[i], root[i] = ids[i - 1], root[i - 1]
        roots: list[int] = []
        for i in range(in_chains, s.personas):  # a fifth are forks of an earlier root
            if i % 5 == 0 and roots:
                r = roots[self.random.randrange(len(roots))]
                parent[i], root[i] = ids[r], ids[r]
            else:
                roots.append(i)
        states = ("active",) * 17 + ("flagged", "archived", "deleted")
        visibilities = ("private", "org", "public")

        def rows():
            for i, pid in enumerate(ids):
                state = states[i % len(states)]
                yield self._persona(pid, org_id, workspace_id, i, state, visibilities[i % 3], parent[i], root[i])
            for j, (o, w, _) in enumerate(small):
                for k in range(3):
                    pid = str(uuid.uuid4())
                    yield self._persona(pid, o, w, j * 3 + k, "active", "public", None, pid)

        self.copy(Persona, rows())
        deep_tip = ids[min(s.chain_depth, in_chains) - 1]
        return Personas(ids, deep_tip)

    @staticmethod
    def _persona(pid, org_id, workspace_id, i, state, visibility, parent, root) -> dict[str, Any]:
        deleted = state == "deleted"
        return {
            "id": pid, "org_id": org_id, "workspace_id": workspace_id, "slug": f"p-{i}-{pid[:8]}",
            "display_name": f"Persona {i}", "visibility": visibility, "metadata": {}, "intent": f"Seeded persona {i}",
            "soul": {"name": f"Persona {i}", "traits": ["curious"]}, "state": state, "parent_id": parent,
            "root_id": root, "fork_ordinal": 1 if parent else 0, "created_at": at(i), "updated_at": at(i),
            "deleted_at": at(i) if deleted else None,
            "purge_at": at(i) + timedelta(days=30) if deleted else None,
            "archived_at": at(i) if state == "archived" else None,
        }

    # --- chat: sessions, messages (the heaviest user holds `heavy_share`) ------

    def chat(self, org_id: str, workspace_id: str, personas: Personas, heavy_user: str, small) -> str:
        from persona_service.chat.tables import ChatMessage, ChatSession

        s = self.sizes
        per_session = max(1, s.messages // s.sessions)
        # Sorted: messages arrive in key order, so COPY appends to the (session_id, ordinal) index.
        session_ids = sorted(f"chs_{uuid.UUID(int=self.random.getrandbits(128)).hex[:24]}" for _ in range(s.sessions))
        heavy_every = max(1, round(1 / s.heavy_share)) if s.heavy_share else 0
        users = [f"end-user-{k}" for k in range(1000)]

        def owner(i: int) -> str:
            return heavy_user if heavy_every and i % heavy_every == 0 else users[i % len(users)]

        def sessions():
            for i, sid in enumerate(session_ids):
                yield {
                    "id": sid, "org_id": org_id, "workspace_id": workspace_id,
                    "persona_id": personas.ids[i % len(personas.ids)], "user_id": owner(i), "title": f"Session {i}",
                    "status": ("active", "ended", "archived")[i % 3], "message_count": per_session,
                    "started_at": at(i, 30), "last_active_at": at(i, 30),
                }

        def messages():
            text = "A seeded message of ordinary length, as a user or assistant would write it. " * 2
            n = 0
            for i, sid in enumerate(session_ids):
                for k in range(per_session):
                    yield {
                        "id": f"msg_{n:024d}", "session_id": sid, "org_id": org_id, "workspace_id": workspace_id,
                        "ordinal": k + 1, "role": "user" if k % 2 == 0 else "assistant", "content": text,
                        "created_at": at(i, 30) + timedelta(seconds=k), "session_started_at": at(i, 30),
                    }
                    n += 1

        self.copy(ChatSession, sessions())
        self.copy(ChatMessage, messages())
        return session_ids[0]

    # --- SCIM: users (with their `users` and memberships rows), groups ---------

    def scim(self, org_id: str) -> str:
        from persona_service.orgs.tables import Membership, User
        from persona_service.scim.repository import recount_users
        from persona_service.scim.tables import ScimGroup, ScimGroupMember, ScimUser

        s = self.sizes
        tag = org_id[-8:]
        user_ids = [f"usr_{uuid.UUID(int=self.random.getrandbits(128)).hex[:24]}" for _ in range(s.scim_users)]
        group_ids = [f"grp_{uuid.UUID(int=self.random.getrandbits(128)).hex[:24]}" for _ in range(s.scim_groups)]

        def name(i: int) -> str:
            return f"user{i}.{tag}@example.com"

        self.copy(User, ({"id": u, "email": name(i), "name": f"User {i}", "created_at": at(i)}
                         for i, u in enumerate(user_ids)))
        self.copy(Membership, ({"org_id": org_id, "user_id": u, "role": "member", "created_at": at(i)}
                               for i, u in enumerate(user_ids)))

        def scim_users():
            for i, u in enumerate(user_ids):
                doc = {
                    "schemas": ["urn:ietf:params:scim:schemas:core:2.0:User", ENTERPRISE],
                    "userName": name(i), "externalId": f"ext-{i}", "displayName": f"User {i}",
                    "name": {"givenName": "User", "familyName": f"Number{i}"},
                    "emails": [{"value": name(i), "type": "work", "primary": True}], "active": True,
                    ENTERPRISE: {"employeeNumber": str(i), "department": f"dept-{i % 50}"},
                }
                yield {"org_id": org_id, "id": u, "user_name": name(i), "external_id": f"ext-{i}",
                       "display_name": f"User {i}", "document": doc, "created_at": at(i), "updated_at": at(i)}

        self.copy(ScimUser, scim_users())
        with self.engine.begin() as conn:  # COPY ran without triggers: the kept count (0018) from the rows
            recount_users(conn)

        def groups():
            for i, g in enumerate(group_ids):
                doc = {"schemas": ["urn:ietf:params:scim:schemas:core:2.0:Group"], "displayName": f"Group {i}",
                       "members": [{"value": u} for u in user_ids[i::len(group_ids)][:50]]}
                yield {"id": g, "org_id": org_id, "display_name": f"Group {i}", "external_id": f"gext-{i}",
                       "document": doc, "created_at": at(i), "updated_at": at(i)}

        self.copy(ScimGroup, groups())
        self.copy(ScimGroupMember, ({"group_id": group_ids[i % len(group_ids)], "user_id": u, "org_id": org_id}
                                    for i, u in enumerate(user_ids)))
        return name(len(user_ids) // 2)

    # --- events, webhook endpoints and deliveries ------------------------------

    def webhooks(self, org_id: str, workspace_id: str, personas: Personas) -> str:
        from persona_service.kernel.data.tables import OutboxEvent
        from persona_service.webhooks.tables import WebhookDelivery, WebhookEndpoint

        s = self.sizes
        event_ids = [f"evt_{n:024d}" for n in range(s.events)]
        self.copy(OutboxEvent, ({
            "id": e, "org_id": org_id, "workspace_id": workspace_id, "type": EVENT_TYPES[i % len(EVENT_TYPES)],
            "occurred_at": at(i, 2), "data": {"personaId": personas.ids[i % len(personas.ids)]},
            # Fanned out already: the worker must not send a million requests.
            "dispatched_at": at(i, 2),
        } for i, e in enumerate(event_ids)))
        endpoints = [f"whe_{uuid.uuid4().hex[:24]}" for _ in range(2)]
        self.copy(WebhookEndpoint, ({
            "id": e, "org_id": org_id, "workspace_id": workspace_id, "url": f"https://hooks.example.com/{k}",
            "events": ["*"], "secret_enc": "seeded", "secret_created_at": EPOCH, "created_at": at(k),
        } for k, e in enumerate(endpoints)))
        later = datetime.now(UTC) + timedelta(days=365)

        def deliveries():
            for i in range(s.deliveries):
                pending = i % 100 == 0  # retries scheduled far ahead: the claim must skip them cheaply
                yield {
                    "id": f"whd_{i:024d}", "endpoint_id": endpoints[i % 2], "event_id": event_ids[i % len(event_ids)],
                    "event_type": EVENT_TYPES[i % len(EVENT_TYPES)], "status": "pending" if pending else "succeeded",
                    "attempt_count": 1, "next_attempt_at": later if pending else None, "last_status_code": 200,
                    # Beyond the events, a delivery is a replay (the unique index allows one original per event).
                    "replay_of": None if i < len(event_ids) else f"whd_{i % len(event_ids):024d}",
                    "created_at": at(i, 2), "completed_at": None if pending else at(i, 2),
                }

        self.copy(WebhookDelivery, deliveries())
        return endpoints[0]

    def portraits(self, org_id: str, workspace_id: str, personas: Personas) -> None:
        from persona_service.portraits.tables import Portrait

        owners = personas.ids[: max(1, len(personas.ids) // 20)]
        self.copy(Portrait, ({
            "id": str(uuid.uuid4()), "org_id": org_id, "workspace_id": workspace_id,
            "persona_id": owners[i % len(owners)], "conversation_id": f"conv-{i // 10}", "status": "ready",
            "storage_key": f"portraits/{org_id}/{i}.png", "size": 1000, "width": 512, "height": 512,
            "created_at": at(i), "updated_at": at(i),
        } for i in range(self.sizes.portraits)))

    def invoices(self, org_id: str) -> None:
        from persona_service.billing.tables import Invoice

        def month(k: int) -> datetime:
            return datetime(2023 + k // 12, k % 12 + 1, 1, tzinfo=UTC)

        self.copy(Invoice, ({
            "id": f"inv_{uuid.uuid4().hex[:24]}", "org_id": org_id, "processor_invoice_id": f"in_seed_{k}",
            "number": f"SEED-{k + 1:04d}", "kind": "renewal", "status": "paid", "currency": "usd",
            "amount_due_minor": 9900, "amount_paid_minor": 9900, "period_start": month(k), "period_end": month(k + 1),
            "due_date": month(k + 1), "paid_at": month(k), "line_items": [], "created_at": month(k),
        } for k in range(self.sizes.invoices)))

    def audit(self, org_id: str, workspace_id: str, heavy_user: str) -> None:
        from persona_service.kernel.data.tables import AuditEvent

        self.copy(AuditEvent, ({
            "id": f"aud_{i:024d}", "occurred_at": at(i, 10), "org_id": org_id, "workspace_id": workspace_id,
            "actor_user_id": heavy_user if i % 2 else f"usr_other{i % 100}", "credential_id": f"key_{i % 10}",
            "action": AUDIT_ACTIONS[i % len(AUDIT_ACTIONS)], "resource_type": "persona", "resource_id": f"res-{i}",
            "outcome": "success" if i % 10 else "failure", "status": 200 if i % 10 else 403,
            "request_id": f"req-{i}",
        } for i in range(self.sizes.audit)))

    def marketplace(self, small) -> None:
        from persona_service.marketplace.repository import rebuild_tags
        from persona_service.marketplace.tables import Listing

        def rows():
            for i in range(self.sizes.listings):
                o, w, _ = small[i % len(small)] if small else (None, None, None)
                if o is None:
                    return
                yield {
                    "id": f"lst_{uuid.uuid4().hex[:24]}", "org_id": o, "workspace_id": w, "persona_id": str(uuid.uuid4()),
                    "title": f"Listing {i}", "audience_tags": [TAGS[i % len(TAGS)], TAGS[(i * 7 + 3) % len(TAGS)]],
                    "price_minor": 500, "currency": "usd", "status": "published" if i % 10 else "pending_review",
                    "created_at": at(i), "updated_at": at(i), "published_at": at(i) if i % 10 else None,
                }

        self.copy(Listing, rows())
        with self.engine.begin() as conn:  # COPY ran without triggers: listing_tags (0019) from the rows
            rebuild_tags(conn)

    def moderation(self, org_id: str, workspace_id: str, small) -> None:
        from persona_service.moderation.tables import ModerationReview

        # `pii` is the rare stage (one in 20), as a filter is worth having for.
        stages = ("input_intent", "output_content", "impersonation")
        self.copy(ModerationReview, ({
            "id": f"mod_{i:024d}", "org_id": org_id if i % 2 else small[i % len(small)][0] if small else org_id,
            "workspace_id": workspace_id, "stage": "pii" if i % 20 == 0 else stages[i % 3], "subject_type": "persona",
            "subject_id": f"sub-{i}", "categories": ["harassment" if i % 3 else "self_harm"], "scores": {},
            "excerpt": "A seeded excerpt.", "status": ("pending", "claimed", "resolved")[i % 3] if i % 5 else "pending",
            "created_at": at(i),
        } for i in range(self.sizes.reviews)))


@dataclasses.dataclass
class Personas:
    ids: list[str]
    deep_tip: str  # the last persona of the first chain (depth `chain_depth`)


def seed(database_url: str, sizes: Sizes, log: Callable[[str], None] = print) -> Seeded:
    """Migrate `database_url` to head, then seed it."""
    from persona_service.kernel.data import migrate
    from persona_service.kernel.data.engine import make_engine
    from persona_service.registry import MODULES

    migrate.upgrade(database_url, MODULES.migrations)
    engine = make_engine(database_url, pool_size=1)
    try:
        return Seeder(engine, sizes, log=log).run()
    finally:
        engine.dispose()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL", ""),
                        help="default: the embedded PostgreSQL under --data-dir")
    parser.add_argument("--data-dir", type=pathlib.Path, default=ROOT / ".build" / "volume")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every size (e.g. 0.1)")
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / ".build" / "volume-seed.json")
    for f in dataclasses.fields(Sizes):
        parser.add_argument(f"--{f.name.replace('_', '-')}", type=type(f.default), default=None)
    args = parser.parse_args(argv)
    sizes = Sizes().scaled(args.scale) if args.scale != 1.0 else Sizes()
    sizes = dataclasses.replace(sizes, **{f.name: v for f in dataclasses.fields(Sizes)
                                          if (v := getattr(args, f.name)) is not None})
    url = args.database_url
    if not url:
        from persona_service.kernel.data.embedded import postgres_url

        # The benchmark's own database: seeded afresh each time (a second seed would add a second big tenant).
        shutil.rmtree(args.data_dir, ignore_errors=True)
        url = postgres_url(args.data_dir / "postgres")
    started = time.perf_counter()
    print(f"seeding {url.split('@')[-1]} with {sizes}", file=sys.stderr)
    seeded = seed(url, sizes, log=lambda line: print(line, file=sys.stderr))
    result = {"database_url": url, "sizes": dataclasses.asdict(sizes), **dataclasses.asdict(seeded),
              "total_seconds": round(time.perf_counter() - started, 1)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(f"seeded in {result['total_seconds']} s; details in {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
